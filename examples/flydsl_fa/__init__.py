"""FlyDSL's own generic flash-attention forward kernel (f16/bf16, MFMA, K/V through LDS,
online softmax), as FlyDSL ships it: ``flash_attn_generic.py`` and ``flash_attn_utils.py``
(``kernels/attention``) and the ``kernels/common`` modules they import (``kernels_common.py``,
``mem_ops.py``, ``buffer_ops.py``), copied from `ROCm/FlyDSL <https://github.com/ROCm/FlyDSL>`_
at commit ``11c4174d`` (Apache-2.0; each file keeps its SPDX header and copyright line).
The only edits are the imports: FlyDSL's absolute ``kernels.attention`` / ``kernels.common``
imports made relative to this package, and ``import flydsl.compiler as flyc`` made
``import flydsl_runtime.flyc as flyc`` (the one-line migration). About 6,400 lines reaching
~860 functions, classes and values from one launcher: the size of a real kernel library's
trace, which FlyDSL 0.5 re-traces in every new process (~150 ms here) and flydsl_runtime
serves from its persistent index.

It lives outside ``examples/kernels`` on purpose: that package is what the mutation oracle
and the static-vs-runtime agreement suite import whole. ``kernels_common.py``, ``mem_ops.py``
and ``buffer_ops.py`` are also in ``tests/static/fixtures/flydslkernels`` (byte for byte, with
FlyDSL's absolute ``kernels.common`` imports: the agreement suite's data); here their imports
are relative, so this package runs beside ``examples/kernels`` (whose top-level name is
``kernels`` too) in one process.

:func:`flash_attn` is how a caller calls it (as FlyDSL's ``flash_attn_interface`` does): one
launcher built per (heads, head dim, causal, dtype) by :func:`launcher`, kept by
``functools.lru_cache``.
"""

from __future__ import annotations

import functools

from .flash_attn_generic import build_flash_attn_func_module_primary

__all__ = ["build_flash_attn_func_module_primary", "flash_attn", "launcher"]


@functools.lru_cache(maxsize=64)
def launcher(num_heads: int, head_dim: int, causal: bool, dtype_str: str):
    """The launcher of this configuration: ``launcher(...)(q, k, v, out, batch, seq_len)``."""
    return build_flash_attn_func_module_primary(num_heads, head_dim, causal=causal, dtype_str=dtype_str)


def flash_attn(q, k, v, out, *, causal: bool = True, stream=None):
    """Attention forward of ``q``, ``k``, ``v`` (``[batch, seq_len, heads, head_dim]``, f16 or
    bf16) into ``out`` (the same shape)."""
    batch, seq_len, num_heads, head_dim = q.shape
    dtype_str = {"torch.float16": "f16", "torch.bfloat16": "bf16"}[str(q.dtype)]
    return launcher(num_heads, head_dim, causal, dtype_str)(q, k, v, out, batch, seq_len, stream=stream)
