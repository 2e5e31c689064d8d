"""Family ``callables``: library callables that carry user state.

``functools.partial`` (its function, positional arguments and keywords, including in-place
edits of ``.keywords``), ``functools.singledispatch`` registries (a ``register`` after the
first trace), ``operator.attrgetter`` / ``methodcaller`` applied to a config object, and bound
methods of user objects, held in module globals the kernel calls while tracing (kernel
libraries build epilogues as partials and dispatch element conversions by type).
"""

from __future__ import annotations

from families.kernels import rmsnorm
from families.model import Case

FAMILY = "callables"

CFG = '''\
"""Epilogues and tunables the kernels call while tracing."""

import functools
import operator

from . import helpers


def scale_by(v, factor=1.0, bias=0.0):
    return v * factor + bias


EPILOGUE = functools.partial(scale_by, factor=0.5)
SCALE2 = functools.partial(operator.mul, 0.5)
LIB_EPILOGUE = functools.partial(helpers.scale_by, factor=0.5)


@functools.singledispatch
def as_scale(value):
    return float(value) / 4.0


@as_scale.register(float)
def _(value):
    return value


SCALE = 2  # an int: dispatched to the base implementation


class Tuning:
    scale = 0.5

    def quantum(self, bits):
        return self.scale / bits


TUNED = Tuning()
TUNED.inner = Tuning()
PICK = operator.attrgetter("scale")
PICK_NESTED = operator.attrgetter("inner.scale")
LISTED = functools.partial(lambda v, scales: v * scales[0], scales=[0.5])
QUANTUM = operator.methodcaller("quantum", 2)


class Scaler:
    def __init__(self, factor):
        self.factor = factor

    def apply(self, v):
        return v * self.factor


APPLY = Scaler(0.5).apply


class Epilogue:
    factor = 0.5

    def __call__(self, v):
        return v * self.factor


EPI = Epilogue()
SETTINGS = {"scale": 0.5}
ITEM = operator.itemgetter("scale")
'''

HELPERS = '''\
"""A helper module the partials are built over."""


def scale_by(v, factor=1.0, bias=0.0):
    return v * factor + bias
'''


def _case(name: str, post: str, mutate: str, reaches: bool | None, what: str, **kw: object) -> Case:
    files = rmsnorm(post, imports="from . import cfg", extra={"cfg.py": CFG, "helpers.py": HELPERS})
    return Case(FAMILY, name, files, mutate, reaches, what, **kw)  # type: ignore[arg-type]


CASES: tuple[Case, ...] = (
    _case(
        "partial_keywords_in_place",
        "cfg.EPILOGUE(v)",
        'mod("cfg").EPILOGUE.keywords["factor"] = 0.25',
        True,
        "a partial's .keywords dict edited in place (factor)",
    ),
    _case(
        "partial_keyword_added",
        "cfg.EPILOGUE(v)",
        'mod("cfg").EPILOGUE.keywords["bias"] = 1.0',
        True,
        "a keyword added to a partial's .keywords in place",
    ),
    _case(
        "partial_rebound",
        "cfg.EPILOGUE(v)",
        'mod("cfg").EPILOGUE = functools.partial(mod("cfg").scale_by, factor=0.25)',
        True,
        "the global rebound to a partial with another keyword",
    ),
    _case(
        "partial_args_setstate",
        "cfg.SCALE2(v)",
        'mod("cfg").SCALE2.__setstate__((operator.mul, (0.25,), {}, None))',
        True,
        "a partial's positional arguments replaced in place (__setstate__, as copy/pickle do)",
    ),
    _case(
        "partial_func_code_swapped",
        "cfg.EPILOGUE(v)",
        'mod("cfg").scale_by.__code__ = (lambda v, factor=1.0, bias=0.0: v * factor - 1.0).__code__',
        True,
        "the partial's function body swapped (__code__)",
    ),
    _case(
        "partial_over_reloaded_module",
        "cfg.LIB_EPILOGUE(v)",
        'pkg.edit("helpers.py", "v * factor + bias", "v * factor * 2.0 + bias")',
        None,
        "the partial's function's module edited and reloaded; the partial holds the old function",
        startup="",
    ),
    _case(
        "singledispatch_register",
        "v * cfg.as_scale(cfg.SCALE)",
        '@mod("cfg").as_scale.register(int)\ndef _(value):\n    return value / 8.0\n',
        True,
        "singledispatch: an implementation for int registered after the first trace",
    ),
    _case(
        "attrgetter_target_attr",
        "v * cfg.PICK(cfg.TUNED)",
        'mod("cfg").TUNED.scale = 0.25',
        True,
        "attrgetter('scale') applied to a config instance; its attribute set",
    ),
    _case(
        "methodcaller_method",
        "v * cfg.QUANTUM(cfg.TUNED)",
        'mod("cfg").Tuning.quantum = lambda self, bits: self.scale * bits',
        True,
        "methodcaller('quantum', 2): the method replaced on the class",
    ),
    _case(
        "bound_method_self_state",
        "cfg.APPLY(v)",
        'mod("cfg").APPLY.__self__.factor = 0.25',
        True,
        "a bound method held in a global: its instance's attribute set",
    ),
    _case(
        "callable_instance_call_replaced",
        "cfg.EPI(v)",
        'mod("cfg").Epilogue.__call__ = lambda self, v: v * 0.25',
        True,
        "a callable instance held in a global: __call__ replaced on its class",
    ),
    _case(
        "itemgetter_dict_entry",
        "v * cfg.ITEM(cfg.SETTINGS)",
        'mod("cfg").SETTINGS["scale"] = 0.25',
        True,
        "itemgetter('scale') applied to a settings dict; the entry set",
    ),
    _case(
        "attrgetter_dotted_path",
        "v * cfg.PICK_NESTED(cfg.TUNED)",
        'mod("cfg").TUNED.inner.scale = 0.25',
        True,
        "attrgetter('inner.scale'): the nested object's attribute set",
    ),
    _case(
        "partial_keyword_list_in_place",
        "cfg.LISTED(v)",
        'mod("cfg").LISTED.keywords["scales"][0] = 0.25',
        True,
        "a list held in a partial's keywords edited in place",
    ),
    _case(
        "neutral_singledispatch_unrelated",
        "v * cfg.as_scale(cfg.SCALE)",
        '@mod("cfg").as_scale.register(complex)\ndef _(value):\n    return abs(value)\n',
        False,
        "NEUTRAL: singledispatch: an implementation for a type the trace never dispatches registered",
    ),
    _case(
        "neutral_bound_method_unread",
        "cfg.APPLY(v)",
        'mod("cfg").APPLY.__self__.label = "mi300"',
        False,
        "NEUTRAL: the bound method's instance gets an attribute the method never reads",
    ),
    _case(
        "neutral_partial_equal",
        "cfg.EPILOGUE(v)",
        'mod("cfg").EPILOGUE = functools.partial(mod("cfg").scale_by, factor=0.5)',
        False,
        "NEUTRAL: the global rebound to an equal new partial",
    ),
)
