"""Row softmax built by a plain builder function: the kernel reads the builder's locals.

``build_softmax`` is not cached: the module builds its launchers once at import, as kernel
repositories do for their fixed configurations. The kernel's ``width``, ``scale`` and
``use_exp2`` are closure cells of the builder; an ``os.getenv`` flag is read while tracing.
Each build declares its own ``@fx.struct SharedStorage`` (its LDS), as FlyDSL's softmax,
layernorm, rmsnorm and flash-attention builders do: FlyDSL fills that class's layout cache
during the launcher's first trace.
"""

import os

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

from . import memops

LOG2E = 1.4426950408889634


def _exp(x, use_exp2):
    if use_exp2 or os.getenv("RW_SOFTMAX_EXP2", "0") == "1":
        return fx.exp2(x * LOG2E)
    return fx.exp(x)


def build_softmax(width, scale=1.0, use_exp2=False):
    block = 64

    @fx.struct
    class SharedStorage:  # per build, as FlyDSL's softmax/norm kernels declare their LDS
        s_red: fx.Array[fx.Float32, block, 16]

    @flyc.kernel
    def softmax_kernel(x: fx.Tensor, out: fx.Tensor):
        lds = fx.SharedAllocator().allocate(SharedStorage).peek()
        lds.s_red.view(fx.make_layout(block, 1))  # FlyDSL fills the class's layout cache here
        row = fx.thread_idx.x + fx.block_idx.x * block
        base = memops.row_base(row, width)
        values = [memops.load(x, base + j, scale=scale) for j in range(width)]
        peak = values[0]
        for v in values[1:]:
            peak = fx.arith.maximumf(peak, v)
        exps = [_exp(v - peak, use_exp2) for v in values]
        total = exps[0]
        for e in exps[1:]:
            total = total + e
        for j in fx.range_constexpr(width):
            memops.store(out, base + j, exps[j] / total)

    @flyc.jit
    def softmax(x: fx.Tensor, out: fx.Tensor, rows: fx.Int32):
        softmax_kernel(x, out).launch(grid=(rows // block, 1, 1), block=(block, 1, 1))

    return softmax


softmax_w4 = build_softmax(4)
softmax_w4_scaled = build_softmax(4, scale=0.5, use_exp2=True)
