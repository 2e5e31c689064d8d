"""A kernel whose trace reads data files (a tuning table, a directory of configs): the way
kernel repositories pick tile sizes per arch at compile time."""

import json
import os

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

HERE = os.path.dirname(os.path.abspath(__file__))
TUNED = os.path.join(HERE, "tuned.json")
BLOCK = 64


def tuned_factor() -> float:
    with open(TUNED) as f:  # read while tracing: the value is baked into the IR
        return float(json.load(f)["factor"])


def config_count() -> int:
    directory = os.path.join(HERE, "tuned_configs")
    return len([name for name in os.listdir(directory) if name.endswith(".json")])


@flyc.kernel
def tuned_kernel(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] * tuned_factor() + b[tid] * float(config_count())


@flyc.jit
def tuned_launch(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    tuned_kernel(a, b, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))
