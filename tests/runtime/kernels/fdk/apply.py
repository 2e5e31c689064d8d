"""Launchers no persistent index row can serve: a function passed as a compile-time
argument (no cross-process name), and FlyDSL's own ``JitFunction`` made directly (not through
``flyc.jit``, so not a flydsl_runtime launcher even under ``flydsl_runtime.install()``)."""

from typing import Callable

import flydsl.expr as fx
from flydsl.compiler.jit_function import JitFunction

import flydsl_runtime.flyc as flyc

BLOCK = 64


def double(x):
    return x + x


@flyc.kernel
def apply_kernel(a: fx.Tensor, c: fx.Tensor, fn: fx.Constexpr[Callable]):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = fn(a[tid])


@flyc.jit
def apply(a: fx.Tensor, c: fx.Tensor, n: fx.Int32, fn: fx.Constexpr[Callable]):
    apply_kernel(a, c, fn).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.kernel
def twice_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] + a[tid]


def _own(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    twice_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


own = JitFunction(_own)
