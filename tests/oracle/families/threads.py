"""Family ``threads``: a helper monkeypatched by another thread while a trace runs, and put
back before the trace ends (A-B-A).

The trace is a launcher's first call (a miss); another thread rebinds a helper, a constant,
a dict entry, a class attribute, a function's ``__code__`` / ``__defaults__``, a closure cell
or an environment variable when the trace enters a helper for the n-th time, and puts it
back before the trace's last store. The raced call's IR mixes both states (plain FlyDSL races
the same way: not judged); what is judged is the NEXT call and a fresh start from the
persistent index: the state is back, so they must serve what a fresh trace gives, never the
mixed IR the raced trace produced.
"""

from __future__ import annotations

from families.kernels import rmsnorm
from families.model import Case

FAMILY = "threads"

HELPERS = '''\
"""Epilogue helpers the kernel calls per element."""

import os

SCALE = 0.5
TABLE = {"scale": 0.5}


class Cfg:
    SCALE = 0.5


CFG = Cfg()


def post(v, factor=0.5):
    return v * factor


def other(v, factor=0.5):
    return v + factor


def env_scale():
    return float(os.environ.get("FAM_ABA_SCALE", "0.5"))


def make_post(factor):
    def post_closure(v):
        return v * factor

    return post_closure


post_closure = make_post(0.5)
'''

H = 'h = mod("helpers")\n'
# memops.load is entered 5 times by the sum of squares, then once per stored element.
ELEMENT_1 = ("load", 7)
LAST_STORE = ("store", 4)


def _race(patch: str, restore: str, at: tuple[str, int]) -> str:
    return H + f"during_trace(lambda: {patch}, {at!r}, lambda: {restore}, {LAST_STORE!r})\n"


def _case(name: str, post: str, mutate: str, what: str, reaches: bool | None = None, limit: str = "") -> Case:
    files = rmsnorm(post, imports="from . import helpers", extra={"helpers.py": HELPERS})
    return Case(
        FAMILY,
        name,
        files,
        H + "orig = h.post\n" + mutate,
        reaches,
        what,
        new_process=False,
        baseline_calls=False,
        limit=limit,
    )


CASES: tuple[Case, ...] = (
    _case(
        "function_rebound",
        "helpers.post(v)",
        _race("setattr(h, 'post', h.other)", "setattr(h, 'post', orig)", ("post", 2)),
        "a module function rebound by another thread mid-trace, put back",
    ),
    _case(
        "constant_rebound",
        "v * helpers.SCALE",
        _race("setattr(h, 'SCALE', 0.25)", "setattr(h, 'SCALE', 0.5)", ELEMENT_1),
        "a module constant set by another thread mid-trace, put back",
    ),
    _case(
        "class_attribute",
        "v * helpers.CFG.SCALE",
        _race("setattr(h.Cfg, 'SCALE', 0.25)", "setattr(h.Cfg, 'SCALE', 0.5)", ELEMENT_1),
        "a class constant set by another thread mid-trace, put back",
    ),
    _case(
        "dict_entry",
        "v * helpers.TABLE['scale']",
        _race("h.TABLE.__setitem__('scale', 0.25)", "h.TABLE.__setitem__('scale', 0.5)", ELEMENT_1),
        "a registry dict entry set by another thread mid-trace, put back",
    ),
    _case(
        "code_swapped",
        "helpers.post(v)",
        "code = orig.__code__\n"
        + _race("setattr(orig, '__code__', h.other.__code__)", "setattr(orig, '__code__', code)", ("post", 2)),
        "a helper's __code__ swapped by another thread mid-trace, put back",
    ),
    _case(
        "defaults_swapped",
        "helpers.post(v)",
        _race("setattr(orig, '__defaults__', (0.25,))", "setattr(orig, '__defaults__', (0.5,))", ("post", 2)),
        "a helper's __defaults__ swapped by another thread mid-trace, put back",
    ),
    _case(
        "closure_cell",
        "helpers.post_closure(v)",
        "cell = h.post_closure.__closure__[0]\n"
        + _race("setattr(cell, 'cell_contents', 0.25)", "setattr(cell, 'cell_contents', 0.5)", ("post_closure", 2)),
        "a closure cell of a helper written by another thread mid-trace, put back",
        limit="CPython raises no event for a cell write and a cell has no version tag",
    ),
    _case(
        "env_variable",
        "v * helpers.env_scale()",
        _race("os.environ.__setitem__('FAM_ABA_SCALE', '0.25')", "os.environ.pop('FAM_ABA_SCALE')", ("env_scale", 2)),
        "an environment variable a helper reads set by another thread mid-trace, removed again",
    ),
    _case(
        "neutral_unrelated_helper",
        "helpers.post(v)",
        "other = h.other\n" + _race("setattr(h, 'other', h.post)", "setattr(h, 'other', other)", ("post", 2)),
        "NEUTRAL: a helper the trace never calls rebound by another thread mid-trace, put back",
        reaches=False,
    ),
)
