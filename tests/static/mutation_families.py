"""The mutation oracle's construct families (issue 37, classes 1-3): single edits of
constructs real kernel repositories use, each with the answer Python's semantics give.

Contract: :data:`CASES` is a list of :class:`Case` records. Each places a snippet (module
level code, written as FlyDSL's ``kernels/norm/layernorm_kernel.py`` and
``kernels/common`` write theirs) into a small kernel package (:func:`package`), makes the
layernorm builder read ``use``, then applies one textual edit. ``expect`` says what the edit
does to what a trace of the layernorm builder runs, decided per case by reading the code
(never from the analyzer):

* ``change``: the edited code or value may be what the trace runs or reads (some
  binding it touches may be the one live when the module finished executing, or a class
  statement, registration, default or lookup the builder reads runs it): the builder's
  digest must change;
* ``same``: the trace cannot run or read it: the digest must not change;
* ``conservative``: the edit cannot change the trace, or whether it does is not decidable
  from the files (a ``TYPE_CHECKING`` stub, a setter nobody calls at import, another key of
  a registry the builder indexes): a rebuild is allowed, not required. ``why`` says which.

The rmsnorm builder of the same module reads none of the snippets, so every edit must leave
its digest unchanged (``other``, overridable). ``written`` is ``before-tuning`` for the
cases designed before the analyzer was read or changed for them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FAMILIES = {
    1: "module bindings: every binding that may be live at the end of the module",
    2: "class bodies: names class-body values read, metaclasses, data patched onto a class",
    3: "registrations and computed lookups: filled dicts, getattr, computed defaults, PEP 562",
}
EXPECTATIONS = ("change", "same", "conservative")
ROOT = "fk.norm:build_layernorm_module"
OTHER = "fk.norm:build_rmsnorm_module"

COMMON = '''"""Helpers shared by the kernels (shaped like FlyDSL's kernels/common/kernels_common.py)."""

import flydsl.expr as fx


def get_warp_size(arch=None):
    if arch is not None and arch.startswith("gfx1"):
        return 32
    return 64


def dtype_to_elem_type(dtype_str: str):
    if dtype_str == "f32":
        return fx.Float32
    if dtype_str == "f16":
        return fx.Float16
    if dtype_str == "bf16":
        return fx.BFloat16
    raise ValueError(f"unsupported dtype: {dtype_str!r}")


def pick_block(n: int) -> int:
    return 256 if n > 4096 else 128


def atomic_add(ptr, val):
    return fx.atomic_add(ptr, val)
'''

NORM = '''"""LayerNorm kernel builder (shaped like FlyDSL's kernels/norm/layernorm_kernel.py)."""

import math
import os

import flydsl.compiler as flyc
import flydsl.expr as fx

from fk.common import atomic_add, get_warp_size

KERNEL_NAME = "layernorm"
EPS = 1e-5
BLOCK_THREADS = 256

#SNIPPET


def build_layernorm_module(N: int, dtype_str: str, eps: float = EPS):
    tuned = USE

    @flyc.kernel
    def layernorm_kernel(Input: fx.Tensor, Output: fx.Tensor, m: fx.Int32):
        bid = fx.block_idx.x
        row = fx.slice(Input, (bid, None))
        fx.copy(fx.make_copy_atom(tuned, N), row, fx.slice(Output, (bid, None)))

    @flyc.jit
    def launch_layernorm(Input: fx.Tensor, Output: fx.Tensor, m: int, stream: fx.Stream = fx.Stream(None)):
        layernorm_kernel(Input, Output, m).launch(grid=(m, 1, 1), block=(BLOCK_THREADS, 1, 1), stream=stream)

    return launch_layernorm


def build_rmsnorm_module(N: int, dtype_str: str):
    @flyc.kernel
    def rmsnorm_kernel(Input: fx.Tensor, Output: fx.Tensor):
        bid = fx.block_idx.x
        atomic_add(fx.slice(Output, (bid, None)), fx.slice(Input, (bid, None)))

    @flyc.jit
    def launch_rmsnorm(Input: fx.Tensor, Output: fx.Tensor, m: int, stream: fx.Stream = fx.Stream(None)):
        rmsnorm_kernel(Input, Output).launch(grid=(m, 1, 1), block=(BLOCK_THREADS, 1, 1), stream=stream)

    return launch_rmsnorm
'''

FASTMATH = '''"""Fast math helpers."""

import math


def rsqrt(x):
    return math.pow(x, -0.5)


def exp2(x):
    return math.pow(2.0, x)
'''


@dataclass(frozen=True)
class Case:
    """One edit: ``edit`` is (file relative to the package's parent, old text, new text);
    ``old`` occurs exactly once in that file."""

    family: int
    name: str
    snippet: str
    use: str
    edit: tuple[str, str, str]
    expect: str
    why: str = ""
    other: str = "same"
    extra: dict[str, str] = field(default_factory=dict)
    written: str = "before-tuning"


def package(case: Case) -> dict[str, str]:
    """The package's files before the edit (relative path -> text)."""
    files = {
        "fk/__init__.py": "",
        "fk/common.py": COMMON,
        "fk/norm.py": NORM.replace("#SNIPPET", case.snippet.strip("\n")).replace("USE", case.use, 1),
    }
    files.update(case.extra)
    return files


def edited(case: Case, files: dict[str, str]) -> str:
    """The edited file's new text; raises ValueError when ``old`` is not there exactly once."""
    path, old, new = case.edit
    text = files[path]
    if text.count(old) != 1:
        raise ValueError(f"case {case.name}: {old!r} occurs {text.count(old)} times in {path}")
    return text.replace(old, new)


N = "fk/norm.py"

# ---------------------------------------------------------------- 1. module bindings
_ENV_BRANCH = """
if os.environ.get("FK_WIDE_VEC") == "1":
    VEC_WIDTH = 16
else:
    VEC_WIDTH = 8
"""
_DEF_BRANCH = """
if get_warp_size() == 64:
    def _warp_reduce(x):
        return x + x.shuffle_xor(32)
else:
    def _warp_reduce(x):
        return x + x.shuffle_xor(16)
"""
_ELIF = """
_ARCH = os.environ.get("FK_ARCH", "gfx942")
if _ARCH.startswith("gfx95"):
    LDS_BYTES = 163840
elif _ARCH.startswith("gfx94"):
    LDS_BYTES = 65536
else:
    LDS_BYTES = 32768
"""
_TYPE_CHECKING = """
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    def _cvt(x: float) -> float: ...
else:
    def _cvt(x):
        return x.to(fx.Float32)
"""
_NOT_TYPE_CHECKING = """
from typing import TYPE_CHECKING

if not TYPE_CHECKING:
    def _cvt(x):
        return x.to(fx.Float32)
else:
    def _cvt(x: float) -> float: ...
"""
_MATCH = """
_DEFAULT_DTYPE = os.environ.get("FK_DTYPE", "bf16")
match _DEFAULT_DTYPE:
    case "f32":
        ELEM_BITS = 32
    case "f16" | "bf16":
        ELEM_BITS = 16
    case _:
        ELEM_BITS = 8
"""
_KEYERROR = """
try:
    BLOCK_OVERRIDE = int(os.environ["FK_BLOCK_THREADS"])
except KeyError:
    BLOCK_OVERRIDE = 256
"""
_EXCEPTION_DEF = """
try:
    from fk.common import fast_rsqrt
except Exception:
    def fast_rsqrt(x):
        return 1.0 / math.sqrt(x)
"""
_TRY_ELSE = """
try:
    _TUNED = os.environ["FK_TUNED"]
except KeyError:
    _TUNED = ""
    UNROLL = 2
else:
    UNROLL = 4
"""
_AUG = """
SMEM_SLOTS = 16
if get_warp_size() == 32:
    SMEM_SLOTS *= 2
"""
_AUG_PLAIN = """
RED_SLOTS = BLOCK_THREADS // 64
RED_SLOTS += 1
"""
_WALRUS_IF = """
if (_env_vec := os.environ.get("FK_VEC")) is not None:
    VEC = int(_env_vec)
else:
    VEC = 8
"""
_WALRUS_ASSERT = """
assert (WARP := get_warp_size()) in (32, 64)
"""
_STARRED = """
BLOCK_M, *VEC_CHOICES = (256, 8, 4, 2)
"""
_STARRED_CALL = """
def _pick_tiles():
    return (128, 64, 32)


TILE_M, *_ = _pick_tiles()
"""
_STAR_REBIND = """
def rsqrt(x):
    return 1.0 / math.sqrt(x)


from fk.fastmath import *  # noqa: E402,F403
"""
_GLOBAL_AT_IMPORT = """
_CFG = None


def _load_config():
    global _CFG
    _CFG = {"block": 256, "vec": 8}


_load_config()
"""
_GLOBAL_TUNE = """
VEC_BYTES = 16


def _tune():
    global VEC_BYTES
    if get_warp_size() == 32:
        VEC_BYTES = 8


_tune()
"""
_GLOBAL_SETTER = """
_OVERRIDE_EPS = None


def set_eps_override(value):
    global _OVERRIDE_EPS
    _OVERRIDE_EPS = float(value)
"""
_REBOUND = """
SCALE = 2.0
INV_SCALE = 1.0 / SCALE
SCALE = 4.0
"""

FAMILY_1 = [
    Case(1, "if branch", _ENV_BRANCH, "VEC_WIDTH * 2", (N, "VEC_WIDTH = 16", "VEC_WIDTH = 32"), "change"),
    Case(1, "else branch", _ENV_BRANCH, "VEC_WIDTH * 2", (N, "VEC_WIDTH = 8", "VEC_WIDTH = 4"), "change"),
    Case(1, "if branch def", _DEF_BRANCH, "_warp_reduce", (N, "shuffle_xor(32)", "shuffle_xor(33)"), "change"),
    Case(1, "else branch def", _DEF_BRANCH, "_warp_reduce", (N, "shuffle_xor(16)", "shuffle_xor(8)"), "change"),
    Case(1, "if branch condition", _ENV_BRANCH, "VEC_WIDTH", (N, '== "1"', '== "yes"'), "change"),
    Case(1, "elif branch", _ELIF, "LDS_BYTES", (N, "65536", "98304"), "change"),
    Case(1, "first of elif chain", _ELIF, "LDS_BYTES", (N, "163840", "131072"), "change"),
    Case(1, "TYPE_CHECKING else", _TYPE_CHECKING, "_cvt", (N, "fx.Float32", "fx.Float16"), "change"),
    Case(
        1,
        "TYPE_CHECKING stub",
        _TYPE_CHECKING,
        "_cvt",
        (N, "-> float: ...", "-> float:\n        return x"),
        "conservative",
        "the stub never runs; a branch that cannot run may cost a rebuild",
    ),
    Case(1, "not TYPE_CHECKING", _NOT_TYPE_CHECKING, "_cvt", (N, "fx.Float32", "fx.BFloat16"), "change"),
    Case(1, "match case", _MATCH, "ELEM_BITS", (N, "ELEM_BITS = 32", "ELEM_BITS = 64"), "change"),
    Case(1, "match wildcard", _MATCH, "ELEM_BITS", (N, "ELEM_BITS = 8", "ELEM_BITS = 4"), "change"),
    Case(1, "match subject", _MATCH, "ELEM_BITS", (N, '"FK_DTYPE", "bf16"', '"FK_DTYPE", "f32"'), "change"),
    Case(
        1,
        "KeyError fallback",
        _KEYERROR,
        "BLOCK_OVERRIDE",
        (N, "BLOCK_OVERRIDE = 256", "BLOCK_OVERRIDE = 512"),
        "change",
    ),
    Case(
        1,
        "KeyError try body",
        _KEYERROR,
        "BLOCK_OVERRIDE",
        (N, '["FK_BLOCK_THREADS"])', '["FK_BLOCK_THREADS"]) * 2'),
        "change",
    ),
    Case(
        1,
        "except Exception def",
        _EXCEPTION_DEF,
        "fast_rsqrt",
        (N, "1.0 / math.sqrt(x)", "1.0 / math.sqrt(x + 1e-12)"),
        "change",
    ),
    Case(1, "try else", _TRY_ELSE, "UNROLL", (N, "UNROLL = 4", "UNROLL = 8"), "change"),
    Case(1, "except with try else", _TRY_ELSE, "UNROLL", (N, "UNROLL = 2", "UNROLL = 1"), "change"),
    Case(1, "augmented assignment", _AUG, "SMEM_SLOTS", (N, "SMEM_SLOTS *= 2", "SMEM_SLOTS *= 4"), "change"),
    Case(1, "before augmented", _AUG, "SMEM_SLOTS", (N, "SMEM_SLOTS = 16", "SMEM_SLOTS = 32"), "change"),
    Case(1, "plain augmented", _AUG_PLAIN, "RED_SLOTS", (N, "RED_SLOTS += 1", "RED_SLOTS += 2"), "change"),
    Case(1, "walrus in if", _WALRUS_IF, "VEC", (N, '"FK_VEC")', '"FK_VEC_WIDTH")'), "change"),
    Case(
        1,
        "walrus in assert",
        _WALRUS_ASSERT,
        "WARP",
        (N, "(WARP := get_warp_size())", '(WARP := get_warp_size("gfx1100"))'),
        "change",
    ),
    Case(1, "starred target", _STARRED, "VEC_CHOICES[0]", (N, "(256, 8, 4, 2)", "(256, 16, 4, 2)"), "change"),
    Case(1, "starred call", _STARRED_CALL, "TILE_M", (N, "(128, 64, 32)", "(256, 64, 32)"), "change"),
    Case(
        1,
        "star import rebinds def",
        _STAR_REBIND,
        "rsqrt",
        ("fk/fastmath.py", "math.pow(x, -0.5)", "math.pow(x, -0.25)"),
        "change",
        extra={"fk/fastmath.py": FASTMATH},
    ),
    Case(
        1,
        "def a star import rebinds",
        _STAR_REBIND,
        "rsqrt",
        (N, "1.0 / math.sqrt(x)", "2.0 / math.sqrt(x)"),
        "conservative",
        "the star import always replaces it; keeping the earlier def costs a rebuild only",
        extra={"fk/fastmath.py": FASTMATH},
    ),
    Case(
        1,
        "def a star import leaves (__all__)",
        _STAR_REBIND,
        "rsqrt",
        (N, "1.0 / math.sqrt(x)", "2.0 / math.sqrt(x)"),
        "change",
        extra={"fk/fastmath.py": FASTMATH.replace("import math\n", 'import math\n\n__all__ = ["exp2"]\n')},
    ),
    Case(
        1,
        "star import (__all__) leaves def",
        _STAR_REBIND,
        "rsqrt",
        ("fk/fastmath.py", "math.pow(x, -0.5)", "math.pow(x, -0.25)"),
        "same",
        extra={"fk/fastmath.py": FASTMATH.replace("import math\n", 'import math\n\n__all__ = ["exp2"]\n')},
    ),
    Case(1, "global set at import", _GLOBAL_AT_IMPORT, '_CFG["vec"]', (N, '"vec": 8', '"vec": 16'), "change"),
    Case(1, "global tuned at import", _GLOBAL_TUNE, "VEC_BYTES", (N, "VEC_BYTES = 8", "VEC_BYTES = 4"), "change"),
    Case(
        1,
        "global set by a setter",
        _GLOBAL_SETTER,
        "_OVERRIDE_EPS",
        (N, "float(value)", "float(value) * 2"),
        "conservative",
        "whether a user calls the setter before the trace is not in the files",
    ),
    Case(1, "binding read before a rebinding", _REBOUND, "INV_SCALE", (N, "SCALE = 2.0", "SCALE = 3.0"), "change"),
    Case(1, "binding always rebound", _REBOUND, "SCALE", (N, "SCALE = 2.0", "SCALE = 3.0"), "same"),
    Case(
        1,
        "comment in a branch",
        _ENV_BRANCH,
        "VEC_WIDTH",
        (N, "    VEC_WIDTH = 8", "    # narrow\n    VEC_WIDTH = 8"),
        "same",
    ),
    Case(1, "unread branch binding", _ENV_BRANCH, "BLOCK_THREADS", (N, "VEC_WIDTH = 16", "VEC_WIDTH = 32"), "same"),
]

# ---------------------------------------------------------------- 2. class bodies
_PROPERTY = """
def _vec_width(self):
    return 16 // self.elem_bytes


class NormConfig:
    def __init__(self, n, elem_bytes):
        self.n = n
        self.elem_bytes = elem_bytes

    vec_width = property(_vec_width)
"""
_CACHED_PROPERTY = """
from functools import cached_property


def _tiles(self):
    return [t for t in (64, 128, 256) if t <= self.n]


class TileConfig:
    def __init__(self, n):
        self.n = n

    tiles = cached_property(_tiles)
"""
_FACTORY = """
from dataclasses import dataclass, field


def _default_tiles():
    return [64, 128, 256]


@dataclass(frozen=True)
class TileConfig:
    block_threads: int = 256
    tiles: list = field(default_factory=_default_tiles)
"""
_COMPREHENSION_HELPER = """
def _bits(dtype):
    return {"f32": 32, "f16": 16, "bf16": 16}[dtype]


class DTypes:
    NAMES = ("f32", "f16", "bf16")
    BITS = {d: _bits(d) for d in ("f32", "f16", "bf16")}
"""
_COMPREHENSION_CONST = """
_WIDTHS = (1, 2, 4, 8)


class Vec:
    CHOICES = [w * 2 for w in _WIDTHS]
"""
_CLASS_CALL = """
class WaveConfig:
    WARP = get_warp_size()
    LANES = BLOCK_THREADS // WARP
"""
_META_NEW = """
class _ConfigMeta(type):
    def __new__(mcls, name, bases, ns):
        ns.setdefault("VEC", 8)
        return super().__new__(mcls, name, bases, ns)


class LayerNormConfig(metaclass=_ConfigMeta):
    BLOCK = 256
"""
_META_INIT = """
class _Registry(type):
    def __init__(cls, name, bases, ns):
        super().__init__(name, bases, ns)
        cls.ALIGN = 16


class LayerNormConfig(metaclass=_Registry):
    BLOCK = 256
"""
_META_CALL = """
class _Singleton(type):
    def __call__(cls, *args):
        inst = super().__call__(*args)
        inst.unroll = 4
        return inst


class Tuning(metaclass=_Singleton):
    def __init__(self, n):
        self.n = n
"""
_PATCHED = """
class NormConfig:
    EPS = 1e-5


NormConfig.EPS = 1e-6
"""
_SETATTR = """
class NormConfig:
    EPS = 1e-5


setattr(NormConfig, "EPS", 1e-6)
"""
_DEFAULTS = '''"""Launch defaults."""


class LaunchDefaults:
    WAVES = 2
'''
_PATCHED_IMPORTED = """
from fk.defaults import LaunchDefaults

LaunchDefaults.WAVES = 4
"""
_INIT_SUBCLASS = """
class KernelConfig:
    def __init_subclass__(cls, width=4, **kw):
        super().__init_subclass__(**kw)
        cls.WIDTH = width * 2


class LNConfig(KernelConfig, width=8):
    pass
"""
_CLASS_DECORATOR = """
def _with_defaults(cls):
    cls.UNROLL = 4
    return cls


@_with_defaults
class Cfg:
    BLOCK = 256
"""
_UNREAD_PATCH = """
class NormConfig:
    EPS = 1e-5


class Unused:
    X = 1


Unused.X = 2
"""

FAMILY_2 = [
    Case(2, "property(getter)", _PROPERTY, "NormConfig(N, 2).vec_width", (N, "16 // self", "32 // self"), "change"),
    Case(
        2,
        "cached_property(getter)",
        _CACHED_PROPERTY,
        "TileConfig(N).tiles",
        (N, "(64, 128, 256)", "(32, 128, 256)"),
        "change",
    ),
    Case(
        2,
        "default_factory helper",
        _FACTORY,
        "TileConfig().tiles[0]",
        (N, "[64, 128, 256]", "[32, 128, 256]"),
        "change",
    ),
    Case(2, "dataclass default", _FACTORY, "TileConfig().block_threads", (N, "int = 256", "int = 512"), "change"),
    Case(
        2,
        "class comprehension helper",
        _COMPREHENSION_HELPER,
        "DTypes.BITS[dtype_str]",
        (N, '"bf16": 16}', '"bf16": 15}'),
        "change",
    ),
    Case(
        2,
        "class comprehension global",
        _COMPREHENSION_CONST,
        "Vec.CHOICES",
        (N, "(1, 2, 4, 8)", "(1, 2, 4, 16)"),
        "change",
    ),
    Case(
        2,
        "class body calls a helper",
        _CLASS_CALL,
        "WaveConfig.LANES",
        ("fk/common.py", "return 64", "return 65"),
        "change",
    ),
    Case(2, "metaclass __new__", _META_NEW, "LayerNormConfig.VEC", (N, '"VEC", 8', '"VEC", 16'), "change"),
    Case(
        2, "metaclass __init__", _META_INIT, "LayerNormConfig.ALIGN", (N, "cls.ALIGN = 16", "cls.ALIGN = 32"), "change"
    ),
    Case(2, "metaclass __call__", _META_CALL, "Tuning(N).unroll", (N, "inst.unroll = 4", "inst.unroll = 8"), "change"),
    Case(
        2,
        "patched class data",
        _PATCHED,
        "NormConfig.EPS",
        (N, "NormConfig.EPS = 1e-6", "NormConfig.EPS = 1e-7"),
        "change",
    ),
    Case(2, "setattr on a class", _SETATTR, "NormConfig.EPS", (N, "1e-6)", "1e-7)"), "change"),
    Case(
        2,
        "patched imported class",
        _PATCHED_IMPORTED,
        "LaunchDefaults.WAVES",
        (N, "LaunchDefaults.WAVES = 4", "LaunchDefaults.WAVES = 8"),
        "change",
        extra={"fk/defaults.py": _DEFAULTS},
    ),
    Case(2, "__init_subclass__ body", _INIT_SUBCLASS, "LNConfig.WIDTH", (N, "width * 2", "width * 4"), "change"),
    Case(2, "__init_subclass__ keyword", _INIT_SUBCLASS, "LNConfig.WIDTH", (N, "width=8)", "width=16)"), "change"),
    Case(2, "class decorator body", _CLASS_DECORATOR, "Cfg.UNROLL", (N, "cls.UNROLL = 4", "cls.UNROLL = 8"), "change"),
    Case(2, "patch of an unread class", _UNREAD_PATCH, "NormConfig.EPS", (N, "Unused.X = 2", "Unused.X = 3"), "same"),
    Case(
        2,
        "comment in a metaclass",
        _META_NEW,
        "LayerNormConfig.VEC",
        (N, "        ns.setdefault", "        # default width\n        ns.setdefault"),
        "same",
    ),
]

# ---------------------------------------------------------------- 3. registrations and computed lookups
_FILLED = """
_ELEM_BITS = {}
_ELEM_BITS["f32"] = 32
_ELEM_BITS["bf16"] = 16
"""
_REGISTER = """
_REDUCERS = {}


def register_reducer(name):
    def wrap(fn):
        _REDUCERS[name] = fn
        return fn

    return wrap


@register_reducer("sum")
def _reduce_sum(a, b):
    return a + b


@register_reducer("max")
def _reduce_max(a, b):
    return fx.maximum(a, b)


def _reduce_min(a, b):
    return fx.minimum(a, b)
"""
# A registry in one module, filled by a decorator that other modules import (the registry
# pattern of kernel libraries: kernels/__init__ imports each kernel module to register it).
_REGISTRY_MODULE = """
REDUCERS = {}


def register_reducer(name):
    def wrap(fn):
        REDUCERS[name] = fn
        return fn

    return wrap
"""
_REGISTERED_ELSEWHERE = """
from fk import registry
from fk.registry import register_reducer


@register_reducer("sum")
def reduce_sum(a, b):
    return a + b


@registry.register_reducer("max")
def reduce_max(a, b):
    return fx.maximum(a, b)


def reduce_min(a, b):
    return fx.minimum(a, b)
"""
_USES_REGISTRY = """
import fk.reducers  # registers the reducers
from fk.registry import REDUCERS
"""
_REGISTRY_FILES = {
    "fk/registry.py": _REGISTRY_MODULE,
    "fk/reducers.py": "import flydsl.expr as fx\n" + _REGISTERED_ELSEWHERE,
}
_LOOP_FILL = """
def _make_cvt(bits):
    def cvt(x):
        return x.bitcast(bits)

    return cvt


CONVERTERS = {}
for _bits in (8, 16, 32):
    CONVERTERS[_bits] = _make_cvt(_bits)
"""
_UPDATE = """
_ALIASES = {"f16": "half"}
_ALIASES.update(bf16="bfloat")
"""
_GETATTR = """
import fk.common as _common

_elem_of = getattr(_common, "dtype_to_elem_type")
"""
_GETATTR_CALL = """
import fk.common as _common
"""
_DEFAULT_HELPER = """
def _detect_arch():
    return os.environ.get("FK_ARCH", "gfx942")


def _lds_bytes(arch=_detect_arch()):
    return 163840 if arch.startswith("gfx95") else 65536
"""
_DEFAULT_IMPORTED = """
def _warps(n, warp=get_warp_size()):
    return n // warp
"""
_KWONLY_DEFAULT = """
def _pick_vec():
    return 8 if BLOCK_THREADS >= 256 else 4


def _tile(n, *, vec=_pick_vec()):
    return n // vec
"""
_LAZY_INIT = '''"""Reference ops, imported on first use (PEP 562)."""

import importlib

_LAZY = {"layer_norm_ref": "fk.ops.ln_ref", "rms_norm_ref": "fk.ops.rms_ref"}


def __getattr__(name):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
'''
_LAZY_FILES = {
    "fk/ops/__init__.py": _LAZY_INIT,
    "fk/ops/ln_ref.py": "def layer_norm_ref(x, eps):\n    return (x - x.mean()) / (x.var() + eps) ** 0.5\n",
    "fk/ops/rms_ref.py": "def rms_norm_ref(x, eps):\n    return x / ((x * x).mean() + eps) ** 0.5\n",
}
_LAZY_IF = '''"""Aliases resolved on first use (PEP 562)."""


def __getattr__(name):
    if name == "fast_exp2":
        from fk.fastmath import exp2

        return exp2
    raise AttributeError(name)
'''

FAMILY_3 = [
    Case(
        3,
        "dict filled after creation",
        _FILLED,
        "_ELEM_BITS[dtype_str]",
        (N, '["bf16"] = 16', '["bf16"] = 8'),
        "change",
    ),
    Case(3, "registering decorator", _REGISTER, '_REDUCERS["sum"]', (N, "return a + b", "return b + a"), "change"),
    Case(
        3,
        "registered under another key",
        _REGISTER,
        '_REDUCERS["sum"]',
        (N, "fx.maximum(a, b)", "fx.maximum(b, a)"),
        "conservative",
        "a registry is followed as a whole, not key by key",
    ),
    Case(
        3, "unregistered neighbour", _REGISTER, '_REDUCERS["sum"]', (N, "fx.minimum(a, b)", "fx.minimum(b, a)"), "same"
    ),
    Case(
        3,
        "registering decorator body",
        _REGISTER,
        '_REDUCERS["sum"]',
        (N, "_REDUCERS[name] = fn", "_REDUCERS[name] = fx.inline(fn)"),
        "change",
    ),
    Case(
        3,
        "registering decorator imported from another module",
        _USES_REGISTRY,
        'REDUCERS["sum"]',
        ("fk/reducers.py", "return a + b", "return b + a"),
        "change",
        extra=_REGISTRY_FILES,
        written="after-tuning",
    ),
    Case(
        3,
        "registered elsewhere through the module's attribute",
        _USES_REGISTRY,
        'REDUCERS["max"]',
        ("fk/reducers.py", "fx.maximum(a, b)", "fx.maximum(b, a)"),
        "change",
        extra=_REGISTRY_FILES,
        written="after-tuning",
    ),
    Case(
        3,
        "unregistered neighbour of registered code elsewhere",
        _USES_REGISTRY,
        'REDUCERS["sum"]',
        ("fk/reducers.py", "fx.minimum(a, b)", "fx.minimum(b, a)"),
        "same",
        extra=_REGISTRY_FILES,
        written="after-tuning",
    ),
    Case(3, "filled in a loop", _LOOP_FILL, "CONVERTERS[16]", (N, "x.bitcast(bits)", "x.bitcast(bits * 2)"), "change"),
    Case(3, "dict.update", _UPDATE, "_ALIASES[dtype_str]", (N, '"bfloat"', '"bfloat16"'), "change"),
    Case(
        3,
        "getattr(module, name)",
        _GETATTR,
        "_elem_of(dtype_str)",
        ("fk/common.py", "return fx.Float16", "return fx.Float32"),
        "change",
    ),
    Case(
        3,
        "getattr(module, name) in the builder",
        _GETATTR_CALL,
        'getattr(_common, "pick_block")(N)',
        ("fk/common.py", "256 if n > 4096", "512 if n > 4096"),
        "change",
    ),
    Case(
        3,
        "getattr: another function",
        _GETATTR,
        "_elem_of(dtype_str)",
        ("fk/common.py", "256 if n > 4096", "512 if n > 4096"),
        "same",
    ),
    Case(3, "default calls a helper", _DEFAULT_HELPER, "_lds_bytes()", (N, '"gfx942"', '"gfx950"'), "change"),
    Case(
        3,
        "default calls an imported helper",
        _DEFAULT_IMPORTED,
        "_warps(N)",
        ("fk/common.py", "return 64", "return 65"),
        "change",
    ),
    Case(
        3,
        "keyword-only default helper",
        _KWONLY_DEFAULT,
        "_tile(N)",
        (N, "8 if BLOCK_THREADS", "16 if BLOCK_THREADS"),
        "change",
    ),
    Case(
        3,
        "PEP 562 re-export",
        "from fk.ops import layer_norm_ref",
        "layer_norm_ref",
        ("fk/ops/ln_ref.py", "** 0.5", "** 0.25"),
        "change",
        extra=_LAZY_FILES,
    ),
    Case(
        3,
        "PEP 562 module attribute",
        "import fk.ops as ops",
        "ops.layer_norm_ref",
        ("fk/ops/ln_ref.py", "** 0.5", "** 0.25"),
        "change",
        extra=_LAZY_FILES,
    ),
    Case(
        3,
        "PEP 562 other table entry",
        "from fk.ops import layer_norm_ref",
        "layer_norm_ref",
        ("fk/ops/rms_ref.py", "** 0.5", "** 0.25"),
        "conservative",
        "__getattr__'s body and the table it reads are followed as a whole",
        extra=_LAZY_FILES,
    ),
    Case(
        3,
        "PEP 562 if chain",
        "from fk.ops import fast_exp2",
        "fast_exp2",
        ("fk/fastmath.py", "math.pow(2.0, x)", "math.pow(2.0, x + 1)"),
        "change",
        extra={"fk/ops/__init__.py": _LAZY_IF, "fk/fastmath.py": FASTMATH},
    ),
    Case(
        3,
        "comment in a registry",
        _REGISTER,
        '_REDUCERS["sum"]',
        (N, "    return wrap", "    # registered\n    return wrap"),
        "same",
    ),
]

# Written after the analyzer was changed for the cases above: the precision it must keep.
_MODULE_COMPREHENSION = """
def _bits(dtype):
    return 16 if dtype.endswith("16") else 32


ELEM_BITS = {d: _bits(d) for d in ("f32", "f16", "bf16")}
"""
_TWO_FIELDS = """
class Tiles:
    BLOCK = 256
    UNROLL = 4


Tiles.UNROLL = 8
"""
AFTER_TUNING = [
    Case(
        1,
        "module comprehension helper",
        _MODULE_COMPREHENSION,
        "ELEM_BITS[dtype_str]",
        (N, '"16") else 32', '"16") else 64'),
        "change",
        written="after-tuning",
    ),
    Case(
        2,
        "another field of the class",
        _TWO_FIELDS,
        "Tiles.BLOCK",
        (N, "UNROLL = 4", "UNROLL = 2"),
        "same",
        written="after-tuning",
    ),
    Case(
        2,
        "patch of another field",
        _TWO_FIELDS,
        "Tiles.BLOCK",
        (N, "Tiles.UNROLL = 8", "Tiles.UNROLL = 16"),
        "conservative",
        "patches are followed per class, not per attribute",
        written="after-tuning",
    ),
    Case(
        2,
        "class field read through the class body",
        _CLASS_CALL,
        "WaveConfig.LANES",
        (N, "BLOCK_THREADS // WARP", "BLOCK_THREADS // WARP // 2"),
        "change",
        written="after-tuning",
    ),
    Case(
        1,
        "library star import after a def",
        "def rsqrt(x):\n    return 1.0 / math.sqrt(x)\n\n\nfrom math import *  # noqa: E402,F403",
        "rsqrt",
        (N, "1.0 / math.sqrt(x)", "2.0 / math.sqrt(x)"),
        "change",
        written="after-tuning",
    ),
]

CASES: list[Case] = [*FAMILY_1, *FAMILY_2, *FAMILY_3, *AFTER_TUNING]

# Written by a red team (cases invented from FlyDSL-shaped code, answers from Python's
# semantics): registries and bindings spanning several modules of a package.
_PKG_REGISTRY_INIT = '''"""Kernel pieces: importing the package registers every piece."""

from .registry import KERNELS, register
from . import configs, reducers  # noqa: E402,F401  (registers)
'''
_PKG_REGISTRY = '''"""Name -> kernel piece registry."""

import functools

KERNELS = {}


def register(name, *, arch=None):
    def wrap(obj):
        key = name if arch is None else f"{name}@{arch}"
        KERNELS[key] = obj
        return obj

    return wrap


def add(name, obj):
    KERNELS[name] = obj


def checked(fn):
    @functools.wraps(fn)
    def inner(a, b):
        assert a.dtype == b.dtype
        return fn(a, b)

    return inner
'''
_PKG_REDUCERS = '''"""Reductions, registered at import."""

import functools

import flydsl.expr as fx

from .registry import add, checked, register


@register("sum")
def reduce_sum(a, b):
    return a + b


@register("max", arch="gfx942")
@checked
def reduce_max(a, b):
    return fx.maximum(a, b)


def reduce_prod(a, b, acc="f32"):
    return (a * b).to(acc)


add("prod", functools.partial(reduce_prod, acc="f32"))


def _unused_mean(a, b):
    return (a + b) / 2
'''
_PKG_CONFIGS = '''"""Per-kernel launch configurations, registered at import."""

from fk.kernels import registry


@registry.register("ln_config")
class LNConfig:
    BLOCK = 256
    VEC = 8
'''
_PKG_REGISTRY_FILES = {
    "fk/kernels/__init__.py": _PKG_REGISTRY_INIT,
    "fk/kernels/registry.py": _PKG_REGISTRY,
    "fk/kernels/reducers.py": _PKG_REDUCERS,
    "fk/kernels/configs.py": _PKG_CONFIGS,
}
_USES_PKG_REGISTRY = "from fk.kernels import KERNELS"
_UTILS_INIT = '''"""Utilities re-exported for the kernels."""

from flydsl.expr import maximumf as vmax

from .vec import *  # noqa: F401,F403
from . import mem  # noqa: E402
'''
_UTILS_VEC = '''"""Vector widths."""

__all__ = ["vec_width", "LANES"]

LANES = 64


def vec_width(bits):
    return 128 // bits


def lanes(n):
    return n // 32
'''
_UTILS_MEM = '''"""Memory access helpers."""

import flydsl.expr as fx


def load(ptr):
    return fx.load(ptr)


def load_nt(ptr):
    return fx.load(ptr, nontemporal=True)
'''
_UTILS_FILES = {"fk/utils/__init__.py": _UTILS_INIT, "fk/utils/vec.py": _UTILS_VEC, "fk/utils/mem.py": _UTILS_MEM}
_LANES_THEN_STAR = "def lanes(n):\n    return n // 64\n\n\nfrom fk.utils import *  # noqa: E402,F403"
_KR = "fk/kernels/reducers.py"
_KG = "fk/kernels/registry.py"

RED_TEAM = [
    Case(
        3,
        "decorator factory from a package's registry module",
        _USES_PKG_REGISTRY,
        'KERNELS["sum"]',
        (_KR, "return a + b", "return b + a"),
        "change",
        extra=_PKG_REGISTRY_FILES,
        written="red-team",
    ),
    Case(
        3,
        "keyword argument of a registering decorator factory",
        _USES_PKG_REGISTRY,
        'KERNELS["max@gfx942"]',
        (_KR, 'arch="gfx942"', 'arch="gfx950"'),
        "change",
        extra=_PKG_REGISTRY_FILES,
        written="red-team",
    ),
    Case(
        3,
        "key computed inside the registering decorator",
        _USES_PKG_REGISTRY,
        'KERNELS["max@gfx942"]',
        (_KG, 'f"{name}@{arch}"', 'f"{name}:{arch}"'),
        "change",
        extra=_PKG_REGISTRY_FILES,
        written="red-team",
    ),
    Case(
        3,
        "stacked decorator: the wrapper the registry holds",
        _USES_PKG_REGISTRY,
        'KERNELS["max@gfx942"]',
        (_KG, "assert a.dtype == b.dtype", "assert a.shape == b.shape"),
        "change",
        extra=_PKG_REGISTRY_FILES,
        written="red-team",
    ),
    Case(
        3,
        "registering decorator applied to a class",
        _USES_PKG_REGISTRY,
        'KERNELS["ln_config"].VEC',
        ("fk/kernels/configs.py", "VEC = 8", "VEC = 16"),
        "change",
        extra=_PKG_REGISTRY_FILES,
        written="red-team",
    ),
    Case(
        3,
        "module-level registration call with functools.partial",
        _USES_PKG_REGISTRY,
        'KERNELS["prod"]',
        (_KR, 'acc="f32"))', 'acc="f16"))'),
        "change",
        extra=_PKG_REGISTRY_FILES,
        written="red-team",
    ),
    # The red team's probes of the one false negative above, kept after the fix (issue 37).
    Case(
        3,
        "function a module-level registration call passes, edited",
        _USES_PKG_REGISTRY,
        'KERNELS["prod"]',
        (_KR, "return (a * b).to(acc)", "return (b * a).to(acc)"),
        "change",
        extra=_PKG_REGISTRY_FILES,
        written="after-tuning",
    ),
    Case(
        3,
        "key of a module-level registration call, edited",
        _USES_PKG_REGISTRY,
        'KERNELS["prod"]',
        (_KR, 'add("prod"', 'add("product"'),
        "change",
        extra=_PKG_REGISTRY_FILES,
        written="after-tuning",
    ),
    Case(
        3,
        "unregistered function beside registrations in a package",
        _USES_PKG_REGISTRY,
        'KERNELS["sum"]',
        (_KR, "return (a + b) / 2", "return (a + b) * 0.5"),
        "same",
        extra=_PKG_REGISTRY_FILES,
        written="red-team",
    ),
    Case(
        1,
        "star import through a package __init__",
        "from fk.utils import *  # noqa: F403",
        "vec_width(16)",
        ("fk/utils/vec.py", "128 // bits", "256 // bits"),
        "change",
        extra=_UTILS_FILES,
        written="red-team",
    ),
    Case(
        1,
        "__all__ of a star-imported submodule leaves the def",
        _LANES_THEN_STAR,
        "lanes(N)",
        ("fk/utils/vec.py", "n // 32", "n // 16"),
        "same",
        extra=_UTILS_FILES,
        written="red-team",
    ),
    Case(
        1,
        "def kept by an __all__-limited star import through a package",
        _LANES_THEN_STAR,
        "lanes(N)",
        (N, "n // 64", "n // 128"),
        "change",
        extra=_UTILS_FILES,
        written="red-team",
    ),
    Case(
        1,
        "__all__ edit makes a star import replace the def",
        _LANES_THEN_STAR,
        "lanes(N)",
        ("fk/utils/vec.py", '"vec_width", "LANES"]', '"vec_width", "LANES", "lanes"]'),
        "change",
        extra=_UTILS_FILES,
        written="red-team",
    ),
    Case(
        1,
        "library name re-exported by a package __init__",
        "from fk.utils import vmax",
        "vmax",
        ("fk/utils/__init__.py", "import maximumf as vmax", "import minimumf as vmax"),
        "change",
        extra=_UTILS_FILES,
        written="red-team",
    ),
    Case(
        1,
        "module-level alias of another module's function",
        "from fk.utils import mem\n\nload = mem.load",
        "load",
        ("fk/utils/mem.py", "fx.load(ptr)", 'fx.load(ptr, cache="cg")'),
        "change",
        extra=_UTILS_FILES,
        written="red-team",
    ),
    Case(
        1,
        "star import of the project's common module",
        "from fk.common import *  # noqa: F403",
        "pick_block(N)",
        ("fk/common.py", "256 if n > 4096", "512 if n > 4096"),
        "change",
        written="red-team",
    ),
]

CASES += RED_TEAM
