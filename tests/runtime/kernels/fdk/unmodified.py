"""A kernel module written against plain FlyDSL, never edited for flydeps (install() test)."""

import flydsl.compiler as flyc
import flydsl.expr as fx


def twice(x):
    return x + x


@flyc.kernel
def twice_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * 64
    c[tid] = twice(a[tid])


@flyc.jit
def launch_twice(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    twice_kernel(a, c).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))
