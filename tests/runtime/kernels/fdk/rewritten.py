"""Launchers reaching rewritten_helpers by module attribute, through a class, and bound."""

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

from . import rewritten_helpers as rh


@flyc.jit
def direct(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    rh.branchy_kernel(a, c).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))


@flyc.jit
def via_class(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    rh.Ops().launch(a, c, n)


class Runner:
    def __cache_signature__(self):
        return ()

    @flyc.kernel
    def kern(self, a: fx.Tensor, c: fx.Tensor):
        tid = fx.thread_idx.x + fx.block_idx.x * 64
        v = a[tid]
        if tid > 3:
            v = v * a[tid]
        c[tid] = rh.combine(v, a[tid], 3)

    @flyc.jit
    def launch(self, a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
        self.kern(a, c).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))
        rh.Ops().launch(a, c, n)
