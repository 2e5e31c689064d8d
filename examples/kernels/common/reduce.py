"""Row reductions across a thread block."""

import functools

import flydsl.expr as fx

__all__ = ["row_max", "row_sum", "REDUCERS"]


def _combine(op, values):
    return functools.reduce(op, values)


def row_max(values):
    return _combine(fx.max, values)


def row_sum(values):
    return _combine(lambda a, b: a + b, values)


# A dispatch table: kernels pick their reduction by name.
REDUCERS = {"max": row_max, "sum": row_sum}
