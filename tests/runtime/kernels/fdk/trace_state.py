"""Kernels whose IR depends on state no name in their code spells (issue 35).

Each helper returns a factor the kernel multiplies by, read through one pattern: a
module-level instance whose class (or base class) holds it, a ``functools.partial``'s
keywords, a ``singledispatch`` registry, an import run inside the helper, a PEP 562 lazy
package, a ``ContextVar``, a ``threading.local`` and a library's data attribute. The
launchers whose changes are data changes follow ``on_drift="rebuild"`` (the default raises).
"""

import contextvars
import functools
import json
import threading

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

from . import lazy_ops

BLOCK = 64


class Base:
    SCALE = 2.0


class Tuning(Base):
    __slots__ = ("unroll",)

    def __init__(self):
        self.unroll = 1.0


class WideTuning(Base):
    __slots__ = ("unroll",)
    SCALE = 5.0


TUNING = Tuning()


def instance_factor():
    return TUNING.SCALE * TUNING.unroll


def _scaled(x, factor=1.0):
    return x * factor


SCALED = functools.partial(_scaled, factor=2.0)


def partial_factor():
    return SCALED(1.0)


@functools.singledispatch
def weight(x):
    return 1.0


@weight.register
def _(x: int):
    return 2.0


def dispatch_factor():
    return weight(0.5)


def imported_factor():
    from . import trace_state_dep as dep

    return dep.FACTOR


def lazy_factor():
    return lazy_ops.FACTOR


MODE = contextvars.ContextVar("fdk_mode", default=2.0)
LOCAL = threading.local()


def context_factor():
    return MODE.get()


def local_factor():
    return LOCAL.__dict__.get("factor", 2.0)


def library_factor():
    return 2.0 if json.__version__ >= "2" else 3.0


@flyc.kernel
def instance_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] * instance_factor()


@flyc.jit(on_drift="rebuild")  # a data change retraces (the default raises)
def instance_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    instance_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.kernel
def partial_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] * partial_factor() * dispatch_factor()


@flyc.jit(on_drift="rebuild")  # a data change retraces (the default raises)
def partial_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    partial_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.kernel
def import_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] * imported_factor() * lazy_factor()


@flyc.jit(on_drift="rebuild")  # a data change retraces (the default raises)
def import_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    import_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.jit  # the default policy: a change of instance data raises GlobalDriftError
def instance_default_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    instance_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.kernel
def context_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] * context_factor() * local_factor() * library_factor()


@flyc.jit
def context_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    context_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))
