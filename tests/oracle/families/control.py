"""Family ``control``: a helper reached through a computed ``getattr`` with a non-constant
name, mutated. No analysis of the code can see which helper the name selects (the
documented limit), so these cases MUST come out STALE, in memory and in a new process: the
proof that the oracle sees a stale answer when there is one.
"""

from __future__ import annotations

from families.kernels import rmsnorm
from families.model import Case

FAMILY = "control"

PRELUDE = """
VERSION = "v" + "1"


def _transform_v1(v):
    return v * 3.0


def transform(v):
    fn = getattr(sys.modules[__name__], "_transform_" + VERSION.lower())
    return fn(v)
"""

SWAP = 'mod("kern")._transform_v1.__code__ = (lambda v: v * 5.0).__code__'

CASES: tuple[Case, ...] = (
    Case(
        FAMILY,
        "computed_getattr_code_swapped",
        rmsnorm("transform(v)", imports="import sys", prelude=PRELUDE),
        SWAP,
        True,
        "CONTROL: the helper behind getattr(module, '_transform_' + VERSION.lower()) gets another body",
        control=True,
    ),
)
