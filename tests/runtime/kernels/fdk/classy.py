"""A class-bound launcher on Base; Sub overrides the helper the kernel calls through self."""

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

BIAS = 1


class Base:
    def op(self, a, b):
        return a + b

    @flyc.kernel
    def kern(self, a: fx.Tensor, b: fx.Tensor, c: fx.Tensor):
        tid = fx.thread_idx.x
        c[tid] = self.op(a[tid], b[tid])

    @flyc.jit
    def launch(self, a: fx.Tensor, b: fx.Tensor, c: fx.Tensor):
        self.kern(a, b, c).launch(grid=(1, 1, 1), block=(64, 1, 1))


class Sub(Base):
    def op(self, a, b):
        return a * b + BIAS


class Keyed(Base):
    """Says what of its state the trace reads, so equal instances share compiled code."""

    def __init__(self, tag: str = "same") -> None:
        self.tag = tag

    def __cache_signature__(self):
        return (self.tag,)


class Scaled(Base):
    """No ``__cache_signature__``: keyed by identity, its attributes read at trace time."""

    def __init__(self, scale: int) -> None:
        self.scale = scale

    def op(self, a, b):
        return a * self.scale + b
