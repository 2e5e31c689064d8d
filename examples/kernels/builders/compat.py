"""Math helpers that newer FlyDSL releases provide; a fallback definition otherwise."""

import flydsl.expr as fx

LOG2E = 1.4426950408889634

try:  # FlyDSL >= 0.6 ships a fused exp2 with range reduction
    from flydsl.expr.math import fast_exp2
except ImportError:

    def fast_exp2(x):
        """exp2 through the plain intrinsic (what 0.5 offers)."""
        return fx.exp2(x * 1.0)


def exp_scaled(x, scale):
    return fast_exp2(x * scale * LOG2E)
