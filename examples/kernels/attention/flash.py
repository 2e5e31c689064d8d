"""Flash attention forward: an ``lru_cache`` compile factory around a FlyDSL kernel."""

import functools

import flydsl.compiler as flyc
import flydsl.expr as fx

from ..common import mem
from ..common.reduce import REDUCERS
from .softmax import online_softmax

BLOCK_M = 64
BLOCK_N = 64
NUM_WARPS = 4


def _scale_for(head_dim):
    return head_dim**-0.5


@functools.lru_cache(maxsize=64)
def compile_flash_attention(head_dim, causal=False, dtype="f16"):
    """Build (once per signature) the launcher of a flash-attention forward kernel."""
    scale = _scale_for(head_dim)

    def _mask(scores, row, col):
        if causal:
            return [fx.select(col + i > row, -float("inf"), s) for i, s in enumerate(scores)]
        return scores

    @flyc.kernel
    def flash_attention_kernel(q: fx.Tensor, k: fx.Tensor, v: fx.Tensor, out: fx.Tensor):
        row = fx.block_idx.x * BLOCK_M + fx.thread_idx.x
        q_tile = mem.load_tile(q, row, head_dim)
        acc = [fx.Float32(0.0)] * head_dim
        for col in fx.range_constexpr(0, BLOCK_N * 8, BLOCK_N):
            k_tile = mem.load_tile(k, col, head_dim)
            scores = _mask([a * b for a, b in zip(q_tile, k_tile, strict=True)], row, col)
            probs, denom = online_softmax(scores, scale)
            v_tile = mem.load_tile(v, col, head_dim)
            acc = [a + p * x / denom for a, p, x in zip(acc, probs, v_tile, strict=True)]
        mem.store_tile(out, row, head_dim, acc)

    @flyc.jit
    def launch_flash_attention(
        q: fx.Tensor,
        k: fx.Tensor,
        v: fx.Tensor,
        out: fx.Tensor,
        stream: fx.Stream = fx.Stream(None),  # noqa: B008  (FlyDSL's default-stream idiom)
    ):
        grid = (q.shape[0] // BLOCK_M, 1, 1)
        flash_attention_kernel(q, k, v, out).launch(grid=grid, block=(NUM_WARPS * 64, 1, 1), stream=stream)

    return launch_flash_attention


@functools.cache
def compile_row_reduce(kind):
    """A second factory: the reduction is picked from a dispatch table at build time."""
    reducer = REDUCERS[kind]

    @flyc.kernel
    def row_reduce_kernel(x: fx.Tensor, out: fx.Tensor):
        row = fx.block_idx.x
        values = mem.load_tile(x, row, BLOCK_N)
        mem.store_tile(out, row, 1, [reducer(values)])

    @flyc.jit
    def launch_row_reduce(x: fx.Tensor, out: fx.Tensor):
        row_reduce_kernel(x, out).launch(grid=(x.shape[0], 1, 1), block=(BLOCK_N, 1, 1))

    return launch_row_reduce
