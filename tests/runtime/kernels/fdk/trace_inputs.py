"""Kernels whose IR depends on more than their code: env reads, arch and device queries, decorator args."""

import os
from os import environ

import flydsl.expr as fx
import torch
from flydsl.expr import rocdl

import flydsl_runtime.flyc as flyc

from . import kernel_args as ka

BLOCK = 64


def pipelined() -> bool:
    # Read the way kernel repositories do, through an alias imported before any build.
    return environ.get("FA_PP", "1") == "1"


@flyc.kernel
def env_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    if pipelined():
        c[tid] = a[tid] + a[tid]
    else:
        c[tid] = a[tid] * a[tid]
    if os.getenv("FDK_ENABLE_DMA", "0") == "1":
        c[tid] = c[tid] + a[tid]
    if "FDK_EXTRA" in os.environ:
        c[tid] = c[tid] * 2.0


@flyc.jit
def env_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    env_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.kernel
def persistent_kernel(a: fx.Tensor, c: fx.Tensor):
    # A persistent kernel sizes its work by the device's compute units, asked while tracing.
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] * float(torch.cuda.get_device_properties(0).multi_processor_count)


@flyc.jit
def persistent_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    persistent_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.kernel
def named_device_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    if "MI300A" in torch.cuda.get_device_name():  # the current device, through torch's own helper
        c[tid] = a[tid] + a[tid]
    else:
        c[tid] = a[tid] * a[tid]


@flyc.jit
def named_device_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    named_device_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.kernel
def wait_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    rocdl.s_waitcnt(vmcnt=0)  # encoded for FlyDSL's get_rocm_arch(), not for the target
    c[tid] = a[tid] + a[tid]


@flyc.jit
def wait_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    wait_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.jit
def args_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32, bx: fx.Int32):
    # A runtime block size: only the kernel's known_block_size= says what it is.
    ka.sized_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(bx, 1, 1))
    ka.named_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))
    ka.plain_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.kernel
def scale_kernel(a: fx.Tensor, c: fx.Tensor, factor: fx.Constexpr[float]):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] * factor


@flyc.jit
def scale_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32, factor: fx.Constexpr[float]):
    scale_kernel(a, c, factor).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.kernel
def pick_kernel(a: fx.Tensor, c: fx.Tensor, mode: fx.Constexpr):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    if type(mode) is bool:
        c[tid] = a[tid] + a[tid]
    elif type(mode) is tuple:
        c[tid] = a[tid] * mode[1]
    elif type(mode) is float:
        c[tid] = a[tid] * mode
    else:
        c[tid] = a[tid] * a[tid]


@flyc.jit
def pick_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32, mode: fx.Constexpr):
    pick_kernel(a, c, mode).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.cached_factory
def unroll_factor() -> int:
    # A compile-time choice made by a cached factory while tracing: its env read is the trace's too.
    return int(os.environ.get("FDK_UNROLL", "1"))


@flyc.kernel
def unrolled_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    acc = a[tid]
    for _i in range(unroll_factor()):
        acc = acc + a[tid]
    c[tid] = acc


@flyc.jit
def unrolled_first(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    unrolled_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.jit
def unrolled_second(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    unrolled_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))
