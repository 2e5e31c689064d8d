"""A kernel that reaches its helper through a computed getattr: invisible to static and
bytecode discovery (only the module object is a visible dependency)."""

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

from . import reduce_helpers as rh

OP = "comb" + "ine"


@flyc.kernel
def dyn_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * 64
    c[tid] = getattr(rh, OP + "")(a[tid], a[tid])


@flyc.jit
def launch_dyn(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    dyn_kernel(a, c).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))
