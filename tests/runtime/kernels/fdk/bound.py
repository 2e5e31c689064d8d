"""Launchers bound to instances whose classes have no ``__cache_signature__`` (keyed by
identity within a process, by their state across processes), and launchers whose state has
no cross-process digest."""

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

TABLE = list(range(300))  # over the snapshot limit (256): digested by identity


class Opaque:
    __slots__ = ()  # no readable state: digested by identity


class Quant:
    BLOCK = 64

    def __init__(self, factor, handle=None):
        self.factor = factor
        self.handle = handle
        self.memo = {}

    def scaled(self, v):
        return v * self.factor

    @flyc.kernel
    def quant_kernel(self, a: fx.Tensor, b: fx.Tensor, c: fx.Tensor):
        tid = fx.thread_idx.x + fx.block_idx.x * self.BLOCK
        c[tid] = self.scaled(a[tid]) + b[tid]

    @flyc.jit
    def launch(self, a: fx.Tensor, b: fx.Tensor, c: fx.Tensor, n: fx.Int32):
        self.quant_kernel(a, b, c).launch(grid=(n // self.BLOCK, 1, 1), block=(self.BLOCK, 1, 1))


class Memo(Quant):
    """Writes to its own state while tracing (a memo filled by the trace)."""

    def scaled(self, v):
        self.memo["traced"] = self.memo.get("traced", 0) + 1
        return v * self.factor


QUANT = Quant(factor=2)
OPAQUE = Quant(factor=2, handle=Opaque())
MEMO = Memo(factor=2)


@flyc.kernel
def tabled_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * 64
    c[tid] = a[tid] * TABLE[2]


@flyc.jit
def tabled(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    tabled_kernel(a, c).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))
