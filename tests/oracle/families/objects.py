"""Family ``objects``: state reached through objects held in globals.

A module-level configuration instance (``cfg.CFG``) whose attribute the trace reads resolves
on its class or a base class: class constants, methods, properties, a custom descriptor,
``__slots__`` members, a reassigned ``__class__``; changed live, or by editing the class's
module and reloading it (kernel repositories keep per-target configs as instances of small
classes: FlyDSL's ``MegaMoEConfig``/``Stage1Config``, ``pa_metadata_tuning``).
"""

from __future__ import annotations

from families.kernels import rmsnorm
from families.model import Case

FAMILY = "objects"

CFG = '''\
"""Norm configuration: a module-level instance the kernels read while tracing."""

import functools

from .base import BaseConfig


class Knob:
    """A tunable read through the descriptor protocol."""

    def __init__(self, value):
        self.value = value

    def __get__(self, obj, owner=None):
        return self.value


class NormConfig(BaseConfig):
    SCALE = 0.5
    DOC = "rmsnorm"
    knob = Knob(0.5)

    @property
    def gain(self):
        return self.SCALE * 2.0


class FastConfig(NormConfig):
    SCALE = 0.75


class SlotConfig:
    __slots__ = ("scale", "eps")

    def __init__(self):
        self.scale = 0.5
        self.eps = 1e-6


class TableConfig:
    """Attributes served from a table by __getattr__ (as namespace-like config objects do)."""

    def __init__(self):
        self._table = {"scale": 0.5}

    def __getattr__(self, name):
        try:
            return self._table[name]
        except KeyError:
            raise AttributeError(name) from None


class DerivedConfig:
    BASE_SCALE = 0.5

    @functools.cached_property
    def scale(self):
        return self.BASE_SCALE * 1.0

    @staticmethod
    def clamp(v):
        return v * 0.5


CFG = NormConfig()
SLOTS = SlotConfig()
TABLE = TableConfig()
DERIVED = DerivedConfig()
'''

BASE = '''\
"""The configuration base class every target's config derives from."""


class BaseConfig:
    UNROLL_SCALE = 1.0

    def post_scale(self):
        return self.SCALE * self.UNROLL_SCALE
'''


def _case(name: str, post: str, mutate: str, reaches: bool | None, what: str, **kw: object) -> Case:
    files = rmsnorm(post, imports="from . import cfg", extra={"cfg.py": CFG, "base.py": BASE})
    return Case(FAMILY, name, files, mutate, reaches, what, **kw)  # type: ignore[arg-type]


CASES: tuple[Case, ...] = (
    _case(
        "class_constant_live",
        "v * cfg.CFG.SCALE",
        'mod("cfg").NormConfig.SCALE = 0.25',
        True,
        "a class constant read through the instance, set on the class",
    ),
    _case(
        "base_constant_live",
        "v * cfg.CFG.post_scale()",
        'mod("base").BaseConfig.UNROLL_SCALE = 2.0',
        True,
        "a base-class constant read by a base-class method, set on the base",
    ),
    _case(
        "method_replaced",
        "v * cfg.CFG.post_scale()",
        'mod("cfg").NormConfig.post_scale = lambda self: 3.0',
        True,
        "a method the trace calls through the instance, replaced on the subclass",
    ),
    _case(
        "property_reads_constant",
        "v * cfg.CFG.gain",
        'mod("cfg").NormConfig.SCALE = 0.125',
        True,
        "a property reading a class constant; the constant set",
    ),
    _case(
        "property_replaced",
        "v * cfg.CFG.gain",
        'mod("cfg").NormConfig.gain = property(lambda self: 4.0)',
        True,
        "a property replaced on the class",
    ),
    _case(
        "descriptor_state",
        "v * cfg.CFG.knob",
        'vars(mod("cfg").NormConfig)["knob"].value = 0.25',
        True,
        "a custom descriptor's own state edited in place",
    ),
    _case(
        "slots_member",
        "v * cfg.SLOTS.scale",
        'mod("cfg").SLOTS.scale = 0.25',
        True,
        "a __slots__ member of a module-level instance set",
    ),
    _case(
        "class_reassigned",
        "v * cfg.CFG.SCALE",
        'mod("cfg").CFG.__class__ = mod("cfg").FastConfig',
        True,
        "the instance's __class__ reassigned to a subclass with another constant",
    ),
    _case(
        "instance_shadows_class",
        "v * cfg.CFG.SCALE",
        'mod("cfg").CFG.SCALE = 0.25',
        True,
        "an instance attribute set that shadows the class constant",
    ),
    _case(
        "class_module_edited",
        "v * cfg.CFG.SCALE",
        'pkg.edit("cfg.py", "    SCALE = 0.5", "    SCALE = 0.25")',
        True,
        "the class's module edited (constant) and reloaded",
        startup="",
    ),
    _case(
        "base_module_edited",
        "v * cfg.CFG.post_scale()",
        'pkg.edit("base.py", "UNROLL_SCALE = 1.0", "UNROLL_SCALE = 2.0")',
        None,
        "the base class's module edited and reloaded; the subclass still derives from the old base",
        startup="",
    ),
    _case(
        "base_then_class_reloaded",
        "v * cfg.CFG.post_scale()",
        'pkg.edit("base.py", "UNROLL_SCALE = 1.0", "UNROLL_SCALE = 2.0")\nimportlib.reload(mod("cfg"))',
        True,
        "the base module edited and reloaded, then the config module reloaded",
        startup="",
    ),
    _case(
        "method_replaced_by_def",
        "v * cfg.CFG.post_scale()",
        'def post_scale(self):\n    return 3.0\n\n\nmod("base").BaseConfig.post_scale = post_scale\n',
        True,
        "a method the trace calls through the instance, replaced on the base class by a def",
    ),
    _case(
        "staticmethod_replaced",
        "cfg.DERIVED.clamp(v)",
        'mod("cfg").DerivedConfig.clamp = staticmethod(lambda v: v * 0.25)',
        True,
        "a staticmethod the trace calls through the instance, replaced on the class",
    ),
    _case(
        "getattr_table_entry",
        "v * cfg.TABLE.scale",
        'mod("cfg").TABLE._table["scale"] = 0.25',
        True,
        "an attribute served by the class's __getattr__ from a table; the table entry set",
    ),
    _case(
        "cached_property_invalidated",
        "v * cfg.DERIVED.scale",
        'mod("cfg").DerivedConfig.BASE_SCALE = 0.25\ndel mod("cfg").DERIVED.scale\n',
        True,
        "a functools.cached_property over a class constant: the constant set and the cached value deleted",
        startup='mod("cfg").DerivedConfig.BASE_SCALE = 0.25',
    ),
    _case(
        "neutral_unread_class_attr",
        "v * cfg.CFG.SCALE",
        'mod("cfg").NormConfig.DOC = "rmsnorm v2"',
        False,
        "NEUTRAL: a class attribute the trace never reads set",
    ),
    _case(
        "neutral_equal_value",
        "v * cfg.CFG.SCALE",
        'mod("cfg").NormConfig.SCALE = 1.0 / 2.0',
        False,
        "NEUTRAL: the class constant set to an equal value",
    ),
    _case(
        "neutral_unread_instance_attr",
        "v * cfg.CFG.gain",
        'mod("cfg").CFG.note = "tuned on mi300"',
        False,
        "NEUTRAL: an instance attribute the trace never reads set",
    ),
    _case(
        "neutral_reload_no_edit",
        "v * cfg.CFG.SCALE",
        'importlib.reload(mod("cfg"))',
        False,
        "NEUTRAL: the config module reloaded without an edit (a new instance of a new, equal class)",
        startup="",
    ),
)
