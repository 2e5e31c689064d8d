"""An fp8-quant-like kernel on buffer resources, held by a class with a ``@flyc.jit`` method.

``Fp8Quant.launch`` launches the ``quant_kernel`` method through ``self``; the kernel reads
class attributes (``CLAMP``, ``BLOCK``) and the instance's ``inv_scale`` while tracing, and
quantizes with a saturating clamp as an fp8 cast would.
"""

import flydsl.expr as fx
from flydsl.expr import rocdl

import flydsl_runtime.flyc as flyc

from . import memops


class Fp8Quant:
    BLOCK = 64
    CLAMP = 448.0  # largest finite float8 e4m3 value

    def __init__(self, scale):
        self.inv_scale = 1.0 / scale

    def saturate(self, v):
        return fx.math.clampf(v, -self.CLAMP, self.CLAMP)

    @flyc.kernel
    def quant_kernel(self, x: fx.Tensor, out: fx.Tensor, bias: fx.Constexpr[float]):
        tid = fx.thread_idx.x + fx.block_idx.x * self.BLOCK
        src = rocdl.make_buffer_tensor(x)
        dst = rocdl.make_buffer_tensor(out)
        memops.store(dst, tid, self.saturate(memops.load(src, tid, scale=self.inv_scale)), bias=bias)

    @flyc.jit
    def launch(self, x: fx.Tensor, out: fx.Tensor, n: fx.Int32, bias: fx.Constexpr[float] = 0.0):
        self.quant_kernel(x, out, bias).launch(grid=(n // self.BLOCK, 1, 1), block=(self.BLOCK, 1, 1))


QUANT = Fp8Quant(scale=2.0)
