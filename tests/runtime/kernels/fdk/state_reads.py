"""Kernels whose IR depends on process state: torch's settings (issue 35.5), memoized readers (35.4).

A process of the persistent-index tests sets the state at import from variables no trace
reads (``FDK_DEFAULT_DTYPE``, ``FDK_DETERMINISTIC``, ``FDK_TF32``; ``FDK_WARM_TILE=1`` warms
the memoized reader before any trace, as a module reading its configuration at import does).
"""

import functools
import os

import flydsl.expr as fx
import torch

import flydsl_runtime.flyc as flyc

BLOCK = 64

if "FDK_DEFAULT_DTYPE" in os.environ:
    torch.set_default_dtype(getattr(torch, os.environ["FDK_DEFAULT_DTYPE"]))
if os.environ.get("FDK_DETERMINISTIC") == "1":
    torch.use_deterministic_algorithms(True)
if os.environ.get("FDK_TF32") == "1":
    torch.backends.cuda.matmul.allow_tf32 = True


@flyc.kernel
def settings_kernel(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    if torch.get_default_dtype() == torch.float64:  # the accumulator a kernel picks
        c[tid] = a[tid] + b[tid]
    else:
        c[tid] = a[tid] * b[tid]
    if torch.are_deterministic_algorithms_enabled():  # no atomics when asked for determinism
        c[tid] = c[tid] - b[tid]
    if torch.backends.cuda.matmul.allow_tf32:
        c[tid] = c[tid] * 2.0
    if torch.backends.cudnn.deterministic:
        c[tid] = c[tid] + a[tid]


@flyc.jit
def settings_launch(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    settings_kernel(a, b, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@functools.cache
def tile() -> int:
    # A configuration reader memoized the usual way: a hit answers what an earlier call read.
    return int(os.environ.get("FDK_TILE", "1"))


@functools.lru_cache(maxsize=8)
def scale(path: str) -> float:
    with open(path) as f:
        return float(f.read())


if os.environ.get("FDK_WARM_TILE") == "1":
    tile()


@flyc.kernel
def tiled_kernel(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    if tile() == 2:
        c[tid] = a[tid] + b[tid]
    else:
        c[tid] = a[tid] * b[tid]


@flyc.jit
def tiled_launch(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    tiled_kernel(a, b, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.kernel
def scaled_kernel(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] * scale(os.environ.get("FDK_SCALE_FILE", "/dev/null/none"))


@flyc.jit
def scaled_launch(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    scaled_kernel(a, b, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))
