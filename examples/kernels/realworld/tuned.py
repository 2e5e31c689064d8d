"""A kernel tuned from tables on disk: its scale and bias are read from a file while tracing.

Kernel repositories pick per-architecture constants from tuning files at compile time: a
helper the trace calls lists a directory of configurations, takes the one of the target
(an environment variable names it) or the default, and ``json``-loads it. The values become
constants of the IR, so the files are inputs of the build as much as the code is.
``tuning/`` holds one table per architecture, keyed by the row width.
"""

import json
import os
from pathlib import Path

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

from . import memops

BLOCK = 64
TUNING = Path(__file__).resolve().parent / "tuning"


def tuned_config(width):
    """The tuning entry of ``width`` for the target named by ``RW_TUNED_ARCH``."""
    names = sorted(p.name for p in TUNING.glob("*.json"))
    wanted = os.environ.get("RW_TUNED_ARCH", "gfx942") + ".json"
    table = json.loads((TUNING / (wanted if wanted in names else "default.json")).read_text())
    return table[str(width)]


@flyc.kernel(name="tuned_scale_f32", known_block_size=[BLOCK, 1, 1])
def tuned_kernel(
    x: fx.Tensor, out: fx.Tensor, width: fx.Constexpr[int], scale: fx.Constexpr[float], bias: fx.Constexpr[float]
):
    row = fx.thread_idx.x + fx.block_idx.x * BLOCK
    base = memops.row_base(row, width)
    for j in range(width):
        memops.store(out, base + j, memops.load(x, base + j, scale=scale), bias=bias)


@flyc.jit
def tuned_scale(x: fx.Tensor, out: fx.Tensor, rows: fx.Int32, width: fx.Constexpr[int] = 4):
    config = tuned_config(width)
    tuned_kernel(x, out, width, config["scale"], config["bias"]).launch(grid=(rows // BLOCK, 1, 1), block=(BLOCK, 1, 1))
