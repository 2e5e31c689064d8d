"""Numerically stable softmax on a register tile."""

import flydsl.expr as fx

from ..common import row_max, row_sum

LOG2E = 1.4426950408889634


def online_softmax(scores, scale):
    peak = row_max(scores)
    probs = [fx.exp2((s - peak) * scale * LOG2E) for s in scores]
    return probs, row_sum(probs)
