"""Kernels whose decorator arguments and names reach the IR (launched from trace_inputs)."""

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

BLOCK = 64


@flyc.kernel(known_block_size=[BLOCK, 1, 1])
def sized_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] + a[tid]


@flyc.kernel(name="fdk_named")
def named_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] + a[tid]


def _plain(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] * a[tid]


plain_kernel = flyc.kernel(_plain)
