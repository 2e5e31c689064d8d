"""A gather whose element transform is reached through a computed ``getattr``.

This is the documented limit of any bytecode or static analysis (``docs/guarantees.md``:
computed lookups): the trace reads ``_transform_v1`` but the code only shows
``getattr(module, name)``. The mutation oracle uses it as its control: an edit of
``_transform_v1`` must come out STALE, which proves the oracle can see a stale answer.
"""

import sys

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

VERSION = "v" + "1"


def _transform_v1(v):
    return v * 3.0


@flyc.kernel
def gather_kernel(x: fx.Tensor, out: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * 64
    transform = getattr(sys.modules[__name__], "_transform_" + VERSION.lower())
    out[tid] = transform(x[tid * 4])


@flyc.jit
def gather(x: fx.Tensor, out: fx.Tensor, n: fx.Int32):
    gather_kernel(x, out).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))
