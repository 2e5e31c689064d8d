"""Family ``imports``: imports the trace itself runs.

``import`` / ``from ... import`` inside a helper's body (the imported module edited and
reloaded), ``importlib.import_module`` with a constant name (the module edited, or replaced
in ``sys.modules``), and a PEP 562 lazy package: a module ``__getattr__`` resolving public
names through a ``_LAZY`` table, exactly as FlyDSL's ``kernels/mega_moe/__init__.py`` does
(the submodule edited, the table changed).
"""

from __future__ import annotations

from families.kernels import rmsnorm
from families.model import Case

FAMILY = "imports"

TILING = '''\
"""Tile constants of the target."""

VEC = 4
SCALE = 0.5


def unrelated():
    return VEC * 2
'''

LAZY_INIT = '''\
"""Scale ops with lazy public imports."""

import importlib

_LAZY = {
    "post_scale": "scales",
    "fast_scale": "fast",
}

__all__ = list(_LAZY)


def __getattr__(name):
    sub = _LAZY.get(name)
    if sub is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{sub}"), name)


def __dir__():
    return sorted(list(globals()) + __all__)
'''

SCALES = """\
def post_scale(v):
    return v * 0.5
"""

FAST = """\
def fast_scale(v):
    return v * 0.5


def post_scale(v):
    return v * 0.75
"""

HELPER_IMPORT = """
def post_scale():
    from . import tiling

    return tiling.SCALE
"""

HELPER_FROM_IMPORT = """
def post_scale():
    from .tiling import SCALE

    return SCALE
"""

HELPER_ABSOLUTE = """
def post_scale():
    import {PKG}.tiling

    return {PKG}.tiling.SCALE
"""

HELPER_IMPORTLIB = """
def post_scale():
    return importlib.import_module("{PKG}.tiling").SCALE
"""

CACHING_INIT = LAZY_INIT.replace(
    '    return getattr(importlib.import_module(f"{__name__}.{sub}"), name)',
    '    value = getattr(importlib.import_module(f"{__name__}.{sub}"), name)\n'
    "    globals()[name] = value  # cached: __getattr__ runs once per name\n"
    "    return value",
)
EXTRA = {
    "tiling.py": TILING,
    "ops/__init__.py": LAZY_INIT,
    "ops/scales.py": SCALES,
    "ops/fast.py": FAST,
    "cops/__init__.py": CACHING_INIT,
    "cops/scales.py": SCALES,
    "cops/fast.py": FAST,
}
EDIT = 'pkg.edit("tiling.py", "SCALE = 0.5", "SCALE = 0.25")'
ATTR_REPLACED = """\
alt = types.ModuleType(pkg.name + ".tiling")
alt.SCALE, alt.VEC = 0.25, 4
sys.modules[alt.__name__] = alt
setattr(importlib.import_module(pkg.name), "tiling", alt)
"""
REPLACED = """\
alt = types.ModuleType(pkg.name + ".tiling")
alt.SCALE, alt.VEC = 0.25, 4
sys.modules[alt.__name__] = alt
"""


def _case(name: str, prelude: str, post: str, mutate: str, reaches: bool | None, what: str, **kw: object) -> Case:
    files = rmsnorm(post, imports="import importlib\n\nfrom . import cops, ops", prelude=prelude, extra=EXTRA)
    return Case(FAMILY, name, files, mutate, reaches, what, **kw)  # type: ignore[arg-type]


CASES: tuple[Case, ...] = (
    _case(
        "import_in_helper_edited",
        HELPER_IMPORT,
        "v * post_scale()",
        EDIT,
        True,
        "`from . import tiling` inside a helper; tiling.py edited and reloaded",
        startup="",
    ),
    _case(
        "from_import_in_helper_edited",
        HELPER_FROM_IMPORT,
        "v * post_scale()",
        EDIT,
        True,
        "`from .tiling import SCALE` inside a helper; tiling.py edited and reloaded",
        startup="",
    ),
    _case(
        "absolute_import_in_helper_edited",
        HELPER_ABSOLUTE,
        "v * post_scale()",
        EDIT,
        True,
        "`import pkg.tiling` inside a helper; tiling.py edited and reloaded",
        startup="",
    ),
    _case(
        "import_module_edited",
        HELPER_IMPORTLIB,
        "v * post_scale()",
        EDIT,
        True,
        "importlib.import_module('pkg.tiling') inside a helper; tiling.py edited and reloaded",
        startup="",
    ),
    _case(
        "import_module_replaced",
        HELPER_IMPORTLIB,
        "v * post_scale()",
        REPLACED,
        True,
        "importlib.import_module('pkg.tiling') inside a helper; the module replaced in sys.modules",
    ),
    _case(
        "lazy_submodule_edited",
        "",
        "ops.post_scale(v)",
        'pkg.edit("ops/scales.py", "v * 0.5", "v * 0.25")',
        True,
        "PEP 562 lazy package: the submodule behind ops.post_scale edited and reloaded",
        startup="",
    ),
    _case(
        "lazy_table_changed",
        "",
        "ops.post_scale(v)",
        'mod("ops")._LAZY["post_scale"] = "fast"',
        True,
        "PEP 562 lazy package: the _LAZY table entry pointed at another submodule",
    ),
    _case(
        "lazy_init_edited",
        "",
        "ops.post_scale(v)",
        'pkg.edit("ops/__init__.py", \'"post_scale": "scales"\', \'"post_scale": "fast"\')',
        True,
        "PEP 562 lazy package: its __init__ (the table) edited and reloaded",
        startup="",
    ),
    _case(
        "package_attribute_replaced",
        HELPER_IMPORT,
        "v * post_scale()",
        ATTR_REPLACED,
        True,
        "`from . import tiling` inside a helper; the submodule replaced in sys.modules and on the package",
    ),
    _case(
        "lazy_cached_submodule_edited",
        "",
        "cops.post_scale(v)",
        'pkg.edit("cops/scales.py", "v * 0.5", "v * 0.25")',
        None,
        "PEP 562 lazy package that caches into globals(): the submodule edited and reloaded (the cached name stays)",
        startup="",
    ),
    _case(
        "neutral_lazy_table_unrelated",
        "",
        "ops.post_scale(v)",
        'mod("ops")._LAZY["other_scale"] = "scales"',
        False,
        "NEUTRAL: PEP 562 lazy package: an entry the trace never resolves added to _LAZY",
    ),
    _case(
        "neutral_reload_no_edit",
        HELPER_IMPORT,
        "v * post_scale()",
        'importlib.reload(mod("tiling"))',
        False,
        "NEUTRAL: the module a helper imports reloaded without an edit",
        startup="",
    ),
    _case(
        "neutral_unrelated_function_edit",
        HELPER_FROM_IMPORT,
        "v * post_scale()",
        'pkg.edit("tiling.py", "return VEC * 2", "return VEC * 3")',
        False,
        "NEUTRAL: a function of the imported module the trace never calls edited and reloaded",
        startup="",
    ),
)
