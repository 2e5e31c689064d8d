"""Helpers with dynamic control flow (FlyDSL's AST rewrite generates names for it) and a
class holding a jit method: what issue 7.8's spurious invalidation came from."""

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc


def combine(acc, x, n):
    if n > 2:
        acc = acc + x
    else:
        acc = acc * x
    return acc


@flyc.kernel
def branchy_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * 64
    v = a[tid]
    if tid > 3:
        v = v + a[tid]
    for _i in range(2):
        v = v + a[tid]
    c[tid] = combine(v, a[tid], 3)


class Ops:
    @flyc.jit
    def launch(self, a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
        branchy_kernel(a, c).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))
