"""Kernel package sources the family cases are made of, written as kernel repositories write them.

Contract
--------
Each function returns the ``(relative path, text)`` files of one small package (``{PKG}``
in a text is the package's import name, filled in by the harness). The kernels follow
``examples/kernels/realworld`` and FlyDSL's own ``kernels/norm``: an RMSNorm row kernel over
``memops`` helpers (:func:`rmsnorm`), a softmax built by a plain builder with an
``@fx.struct`` shared-memory struct defined per build, as FlyDSL's ``softmax_kernel.py`` and
``rmsnorm_common.make_reduction_storage`` do (:func:`softmax_builder`), an fp8-quant-like
saturating scale (:func:`quant`). A case changes one slot: ``post`` is the expression of the
normalized element ``v`` the kernel stores, ``imports``/``prelude`` add module-level code, and
``extra`` adds modules. All compile for real on a CPU-only machine under ``COMPILE_ONLY=1``.
"""

from __future__ import annotations

MEMOPS = '''\
"""Buffer helpers every kernel of the package imports."""


def load(t, idx):
    return t[idx]


def store(t, idx, value):
    t[idx] = value


def passthrough(v):
    return v


def describe(width):
    """Never called by a kernel: a debugging aid."""
    return f"width={width}"
'''

RMSNORM = '''\
"""RMSNorm, one row of WIDTH elements per thread, over the memops helpers."""

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

from . import memops
{imports}

BLOCK = 64
WIDTH = 4
EPS = 1e-6
{prelude}


@flyc.kernel(known_block_size=[BLOCK, 1, 1])
def rmsnorm_kernel(x: fx.Tensor, out: fx.Tensor):
    row = fx.thread_idx.x + fx.block_idx.x * BLOCK
    base = row * WIDTH
    ss = memops.load(x, base) * memops.load(x, base)
    for j in fx.range_constexpr(1, WIDTH):
        e = memops.load(x, base + j)
        ss = ss + e * e
    inv = fx.rsqrt(ss / float(WIDTH) + EPS)
    for j in fx.range_constexpr(WIDTH):
        v = memops.load(x, base + j) * inv
        memops.store(out, base + j, {post})


{jit}
def launch(x: fx.Tensor, out: fx.Tensor, rows: fx.Int32, stream: fx.Stream = fx.Stream(None)):
    rmsnorm_kernel(x, out).launch(grid=(rows // BLOCK, 1, 1), block=(BLOCK, 1, 1), stream=stream)
'''

SOFTMAX = '''\
"""Row softmax from a plain builder, shared-memory reduction slot in a per-build @fx.struct."""

import flydsl.expr as fx
from flydsl.expr import gpu

import flydsl_runtime.flyc as flyc

from . import memops
{imports}

BLOCK = 64
LOG2E = 1.4426950408889634
{prelude}


def make_reduction_storage(red_slots):
    @fx.struct
    class SharedStorage:
        s_red: fx.Array[fx.Float32, red_slots, 16]

    return SharedStorage


{builder_decorator}
def build_softmax(width, scale=1.0, epilogue=memops.passthrough):
    red_slots = max(1, BLOCK // 64)
    SharedStorage = make_reduction_storage(red_slots)

    @flyc.kernel
    def softmax_kernel(x: fx.Tensor, out: fx.Tensor):
        row = fx.thread_idx.x + fx.block_idx.x * BLOCK
        lds = fx.SharedAllocator().allocate(SharedStorage).peek()
        s_red = lds.s_red.view(fx.make_layout(red_slots, 1))
        base = row * width
        values = [memops.load(x, base + j) * scale for j in range(width)]
        peak = values[0]
        for e in values[1:]:
            peak = fx.arith.maximumf(peak, e)
        fx.memref_store(peak, s_red, 0)
        gpu.barrier()
        peak = fx.memref_load(s_red, 0)
        exps = [fx.exp2((e - peak) * LOG2E) for e in values]
        total = exps[0]
        for e in exps[1:]:
            total = total + e
        for j in fx.range_constexpr(width):
            v = exps[j] / total
            memops.store(out, base + j, {post})

    {jit}
    def launch(x: fx.Tensor, out: fx.Tensor, rows: fx.Int32, stream: fx.Stream = fx.Stream(None)):
        softmax_kernel(x, out).launch(grid=(rows // BLOCK, 1, 1), block=(BLOCK, 1, 1), stream=stream)

    return launch


launch = build_softmax(4)
'''

QUANT = '''\
"""fp8-quant-like saturating scale: the kernel clamps to the largest finite e4m3 value."""

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

from . import memops
{imports}

BLOCK = 64
CLAMP = 448.0
{prelude}


@flyc.kernel
def quant_kernel(x: fx.Tensor, out: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    for j in fx.range_constexpr(4):
        v = memops.load(x, tid * 4 + j)
        memops.store(out, tid * 4 + j, fx.math.clampf({post}, -CLAMP, CLAMP))


{jit}
def launch(x: fx.Tensor, out: fx.Tensor, rows: fx.Int32):
    quant_kernel(x, out).launch(grid=(rows // BLOCK, 1, 1), block=(BLOCK, 1, 1))
'''


def _package(kern: str, extra: dict[str, str] | None) -> tuple[tuple[str, str], ...]:
    files = {"__init__.py": '"""A kernel package."""\n', "memops.py": MEMOPS, "kern.py": kern}
    files.update(extra or {})
    return tuple(files.items())


def rmsnorm(
    post: str, *, imports: str = "", prelude: str = "", extra: dict[str, str] | None = None, jit: str = "@flyc.jit"
) -> tuple[tuple[str, str], ...]:
    return _package(RMSNORM.format(post=post, imports=imports, prelude=prelude, jit=jit), extra)


def softmax_builder(
    post: str = "v",
    *,
    imports: str = "",
    prelude: str = "",
    extra: dict[str, str] | None = None,
    jit: str = "@flyc.jit",
    builder_decorator: str = "",
) -> tuple[tuple[str, str], ...]:
    text = SOFTMAX.format(post=post, imports=imports, prelude=prelude, jit=jit, builder_decorator=builder_decorator)
    return _package(text, extra)


def quant(
    post: str, *, imports: str = "", prelude: str = "", extra: dict[str, str] | None = None, jit: str = "@flyc.jit"
) -> tuple[tuple[str, str], ...]:
    return _package(QUANT.format(post=post, imports=imports, prelude=prelude, jit=jit), extra)
