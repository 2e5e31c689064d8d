"""Softmax built by a plain builder function: no cache, the kernel reads the builder's locals."""

import functools

import flydsl.compiler as flyc
import flydsl.expr as fx

from ..common import mem
from .compat import exp_scaled, fast_exp2

WARP = 64
MAX_THREADS = 256


def _elem_bits(dtype):
    return 16 if dtype in ("f16", "bf16") else 32


def _threads_for(n, vec_width):
    return max(WARP, min(MAX_THREADS, n // vec_width))


def _row_peak(rows):
    return functools.reduce(fx.max, [functools.reduce(fx.max, r) for r in rows])


def build_softmax_module(M, N, dtype="f16", unroll=2):
    """Return the launcher of a row softmax over an ``M x N`` tensor."""
    elem_bits = _elem_bits(dtype)
    vec_width = 128 // elem_bits
    threads = _threads_for(N, vec_width)
    weights = [1.0 / (i + 1) for i in range(unroll)]

    @flyc.kernel(known_block_size=[threads, 1, 1])
    def softmax_kernel(x: fx.Tensor, out: fx.Tensor):
        row = fx.block_idx.x
        chunks = [mem.load_tile(x, row * unroll + i, vec_width) for i in range(unroll)]
        scaled = [[v * w for v in chunk] for chunk, w in zip(chunks, weights, strict=True)]
        peak = _row_peak(scaled)
        probs = [fast_exp2(v - peak) for chunk in scaled for v in chunk]
        mem.store_tile(out, row, N, probs)

    @flyc.jit
    def launch_softmax(x: fx.Tensor, out: fx.Tensor, stream: fx.Stream = fx.Stream(None)):  # noqa: B008
        softmax_kernel(x, out).launch(grid=(M, 1, 1), block=(threads, 1, 1), stream=stream)

    return launch_softmax


def build_logsoftmax_module(M, N, temperature=1.0):
    """A second builder: the kernel reads a parameter and a builder-only helper's result."""
    vec_width = 128 // _elem_bits("f32")

    @flyc.kernel
    def logsoftmax_kernel(x: fx.Tensor, out: fx.Tensor):
        row = fx.block_idx.x
        values = mem.load_tile(x, row, vec_width)
        mem.store_tile(out, row, N, [exp_scaled(v, 1.0 / temperature) for v in values])

    @flyc.jit
    def launch_logsoftmax(x: fx.Tensor, out: fx.Tensor):
        logsoftmax_kernel(x, out).launch(grid=(M, 1, 1), block=(WARP, 1, 1))

    return launch_logsoftmax


@functools.lru_cache(maxsize=32)
def _build_softmax(M, N, dtype="f16"):
    """The entry point callers use: delegates to the plain builder."""
    return build_softmax_module(M, N, dtype)
