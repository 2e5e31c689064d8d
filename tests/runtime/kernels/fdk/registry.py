"""A launcher whose trace appends to a registry it also reads (a build log, a name table)."""

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

TRACED_SHAPES: list[object] = []


@flyc.kernel
def copy_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * 64
    c[tid] = a[tid]


@flyc.jit
def logged_copy(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    TRACED_SHAPES.append(len(TRACED_SHAPES))
    copy_kernel(a, c).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))


@flyc.jit
def counted_copy(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    """Reads and appends to the registry logged_copy's traces fill (one build log for both)."""
    TRACED_SHAPES.append(len(TRACED_SHAPES))
    copy_kernel(a, c).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))
