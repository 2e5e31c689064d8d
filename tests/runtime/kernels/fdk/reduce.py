"""Partial-sum reduction whose helpers live in another module."""

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

from . import reduce_helpers as rh

PER_THREAD = 4


@flyc.kernel
def partial_sum_kernel(x: fx.Tensor, out: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * 64
    acc = rh.load(x, tid * PER_THREAD)
    for i in range(1, PER_THREAD):
        acc = rh.combine(acc, rh.load(x, tid * PER_THREAD + i))
    out[tid] = acc


@flyc.jit
def partial_sum(x: fx.Tensor, out: fx.Tensor, n: fx.Int32):
    partial_sum_kernel(x, out).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))
