"""The specializations of the example kernels to build ahead of time, as a kernel repository's
AOT script lists them: ``flydeps aot build`` calls :func:`specializations` and compiles each
item for each ``--arch`` into one shippable directory.

    flydeps aot build examples/aot_specializations.py:specializations --arch gfx942,gfx950 --out /tmp/aot

(docs/cli.md, "flydeps aot build"). A runtime started with ``FLYDEPS_CACHE_DIR=/tmp/aot`` and
``FLYDSL_RUNTIME_CACHE_DIR=/tmp/aot/flydsl`` then makes these calls without tracing, and with
``FLYDEPS_AOT=strict`` refuses any other call, naming what differs from the nearest one built.

The items are the launchers of ``kernels/realworld`` called as their callers call them:
``rmsnorm`` with its ``eps`` and ``stream`` defaults omitted, ``layernorm`` with ``width`` as
a keyword, a softmax launcher made by a builder function, and a ``@flyc.jit`` method of an
instance (``QUANT.launch``). The tensors are CPU placeholders: FlyDSL keys a tensor by its
dtype and layout, not by its size or contents, so each compile-time value listed here
(``width``, ``bias``, the softmax builder's arguments) is one specialization.
"""

from collections.abc import Iterator

import torch
from kernels.realworld import norms, quant, softmax

ROWS = 256  # a multiple of the kernels' 64-thread block
WIDTHS = (1, 2, 4, 8)  # the row widths the example model runs
BIASES = (0.0, 1.0)


def specializations() -> Iterator[tuple]:
    """``(launcher, args)`` or ``(launcher, args, kwargs)``: the same items, in the same order,
    on every call (each build worker calls it again and takes its items by position)."""
    x = torch.zeros(ROWS * max(WIDTHS))
    w = torch.zeros(max(WIDTHS))
    for width in WIDTHS:
        yield norms.rmsnorm, (x, w, x, ROWS, width)
        yield norms.layernorm, (x, w, w, x, ROWS), {"width": width}
    yield softmax.softmax_w4, (x, x, ROWS)
    yield softmax.softmax_w4_scaled, (x, x, ROWS)
    for bias in BIASES:
        yield quant.QUANT.launch, (x, x, ROWS), {"bias": bias}
