"""A launcher whose compile-time argument has a default that callers omit."""

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

BLOCK = 64


@flyc.kernel
def scaled_copy_kernel(a: fx.Tensor, c: fx.Tensor, factor: fx.Constexpr[int]):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] * factor


@flyc.jit
def scaled_copy(a: fx.Tensor, c: fx.Tensor, n: fx.Int32, factor: fx.Constexpr[int] = 2, stream: fx.Stream = None):
    scaled_copy_kernel(a, c, factor).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1), stream=stream)
