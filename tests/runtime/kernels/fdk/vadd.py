"""Vector add: a launcher, a kernel, a helper and a data global, all in one module."""

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

BLOCK = 64
SCALE = 2


def scale(x):
    return x * SCALE


@flyc.kernel
def vadd_kernel(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = scale(a[tid]) + b[tid]


@flyc.jit
def vadd(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    vadd_kernel(a, b, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.kernel
def axpy_kernel(a: fx.Tensor, c: fx.Tensor, factor: fx.Constexpr[int]):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] * factor


@flyc.jit
def axpy(a: fx.Tensor, c: fx.Tensor, n: fx.Int32, factor: fx.Constexpr[int]):
    axpy_kernel(a, c, factor).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))
