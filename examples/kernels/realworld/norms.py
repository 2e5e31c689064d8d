"""RMSNorm and LayerNorm, one row of ``width`` elements per thread, over ``memops`` helpers.

Shapes: ``@flyc.kernel(known_block_size=[...])``; ``fx.Constexpr[float]`` epsilon with a
default; a launcher whose ``stream`` parameter has a default that callers omit; an
``os.getenv`` flag read while tracing; keyword calls into library-decorated helpers.
"""

import os

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

from . import memops
from .memops import load, store

BLOCK = 64


def inv_std(var, eps):
    if os.getenv("RW_NORM_PRECISE", "0") == "1":
        return 1.0 / fx.sqrt(var + eps)
    return fx.rsqrt(var + eps)


@flyc.kernel(name="rmsnorm_f32", known_block_size=[BLOCK, 1, 1])
def rmsnorm_kernel(x: fx.Tensor, w: fx.Tensor, out: fx.Tensor, width: fx.Constexpr[int], eps: fx.Constexpr[float]):
    row = fx.thread_idx.x + fx.block_idx.x * BLOCK
    base = memops.row_base(row, width)
    memops.note_trace("rmsnorm", width)
    inv = inv_std(memops.accumulate(x, base, width, square=True) / float(width), eps)
    for j in range(width):
        store(out, base + j, load(x, base + j) * inv * load(w, j))


@flyc.jit
def rmsnorm(
    x: fx.Tensor,
    w: fx.Tensor,
    out: fx.Tensor,
    rows: fx.Int32,
    width: fx.Constexpr[int],
    eps: fx.Constexpr[float] = 1e-6,
    stream: fx.Stream = fx.Stream(None),
):
    rmsnorm_kernel(x, w, out, width, eps).launch(grid=(rows // BLOCK, 1, 1), block=(BLOCK, 1, 1), stream=stream)


@flyc.kernel(name="layernorm_f32", known_block_size=[BLOCK, 1, 1])
def layernorm_kernel(
    x: fx.Tensor, w: fx.Tensor, b: fx.Tensor, out: fx.Tensor, width: fx.Constexpr[int], eps: fx.Constexpr[float]
):
    row = fx.thread_idx.x + fx.block_idx.x * BLOCK
    base = memops.row_base(row, width)
    memops.note_trace("layernorm", width)
    mean = memops.accumulate(x, base, width) / float(width)
    var = memops.accumulate(x, base, width, square=True) / float(width) - mean * mean
    inv = inv_std(var, eps)
    for j in range(width):
        centered = memops.axpby(load(x, base + j), mean, alpha=1.0, beta=-1.0)
        store(out, base + j, centered * inv * load(w, j), bias=0.0)
        store(out, base + j, memops.axpby(load(out, base + j), load(b, j), beta=1.0, alpha=1.0))


@flyc.jit
def layernorm(
    x: fx.Tensor,
    w: fx.Tensor,
    b: fx.Tensor,
    out: fx.Tensor,
    rows: fx.Int32,
    width: fx.Constexpr[int],
    eps: fx.Constexpr[float] = 1e-5,
    stream: fx.Stream = fx.Stream(None),
):
    layernorm_kernel(x, w, b, out, width, eps).launch(grid=(rows // BLOCK, 1, 1), block=(BLOCK, 1, 1), stream=stream)
