"""Memory helpers shaped like a kernel repository's buffer utilities, imported by every kernel.

The helpers are wrapped by a library decorator (``kerneldeco.traced``: ``functools.wraps``
code living in site-packages) or by FlyDSL's ``dsl_loc_tracing``, so a dependency walk that
stops at library code never reads their bodies. ``row_base`` memoizes into a module dict and
``note_trace`` appends to a registry while a trace runs; ``accumulate`` reads an environment
variable while tracing.
"""

import os

from flydsl.expr.meta import dsl_loc_tracing
from kerneldeco import traced

PAD = 4
TRACE_LOG: list = []  # (kernel, width) of every trace, appended while tracing
_ROW_PITCH: dict = {}  # width -> padded row pitch, memoized while tracing


def row_pitch(width):
    """Row pitch in elements, padded to ``PAD`` (memoized like a layout cache)."""
    pitch = _ROW_PITCH.get(width)
    if pitch is None:
        pitch = (width + PAD - 1) // PAD * PAD
        _ROW_PITCH[width] = pitch
    return pitch


@traced
def row_base(row, width):
    return row * row_pitch(width)


@traced
def load(t, idx, scale=1.0):
    value = t[idx]
    if scale != 1.0:
        value = value * scale
    return value


@dsl_loc_tracing
def store(t, idx, value, *, bias=0.0):
    if bias:
        value = value + bias
    t[idx] = value


@traced
def axpby(x, y, alpha=1.0, beta=1.0):
    return x * alpha + y * beta


@traced
def accumulate(t, base, width, square=False):
    """Sum (or sum of squares) of ``width`` elements from ``base``; unrolled while tracing."""
    pairwise = os.environ.get("RW_PAIRWISE_SUM", "0") == "1"
    values = [load(t, base + j) for j in range(width)]
    if square:
        values = [v * v for v in values]
    if pairwise and width % 2 == 0:
        values = [axpby(values[j], values[j + 1]) for j in range(0, width, 2)]
    acc = values[0]
    for v in values[1:]:
        acc = acc + v
    return acc


def note_trace(kernel, width):
    TRACE_LOG.append((kernel, width))
    return len(TRACE_LOG)


def describe_layout(width):
    """Never called by a kernel: a debugging aid living next to the helpers."""
    return f"pitch={row_pitch(width)} pad={PAD} width={width * 1}"
