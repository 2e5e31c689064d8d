"""State a build reads that no name in its bytecode spells (issue 35, classes 1-3 and 5).

Each case: the function's fingerprint and guard are taken, the state is changed the way a
user would (live, or by editing a module and reloading it), and both the guard (the warm
check) and a fresh fingerprint (the key) must see it; an unchanged state must keep both.
"""

from __future__ import annotations

import contextvars
import functools
import importlib
import sys
import threading
import types
from collections.abc import Callable

import pytest

from flydeps import fingerprint
from flydeps.graph import NodeKind
from flydeps.values.bindings import BindingKind


def _sees(fn: Callable, change: Callable[[], object]) -> None:
    """``change()`` must fail ``fn``'s guard and move its digest; nothing before it may."""
    fp = fingerprint(fn)
    guard = fp.guard()
    assert guard.check() and guard.check(), "the guard must hold before the change"
    assert fingerprint(fn).digest == fp.digest, "the digest must be stable before the change"
    change()
    assert guard.check() is False, "the guard did not see the change"
    assert fingerprint(fn).digest != fp.digest, "the key did not change"


# --- 1. state reached through objects held in globals ------------------------------------

CONFIG = """
class Base:
    SCALE = 2
    def factor(self):
        return 3

class Cfg(Base):
    __slots__ = ("tile",)
    BLOCK = 64
    def __init__(self):
        self.tile = 4
    @property
    def width(self):
        return self.BLOCK * 2

class Wide(Base):
    __slots__ = ("tile",)
    BLOCK = 256

class Plain:
    MODE = "fast"
    def __init__(self):
        self.depth = 1

CFG = Cfg()
PLAIN = Plain()
TABLE = {"a": Plain()}

def block():
    return CFG.BLOCK

def scale():
    return CFG.SCALE

def factor():
    return CFG.factor()

def width():
    return CFG.width

def tile():
    return CFG.tile

def mode():
    return PLAIN.MODE

def nested_mode():
    return TABLE["a"].MODE
"""


@pytest.mark.parametrize(
    ("reader", "change"),
    [
        ("block", lambda m: setattr(m.Cfg, "BLOCK", 32)),  # a class constant
        ("scale", lambda m: setattr(m.Base, "SCALE", 5)),  # a base class's constant
        ("factor", lambda m: setattr(m.Base, "factor", lambda self: 9)),  # a method replaced
        ("width", lambda m: setattr(m.Cfg, "width", property(lambda self: 1))),  # a property
        ("tile", lambda m: setattr(m.CFG, "tile", 8)),  # a __slots__ member
        ("block", lambda m: setattr(m.CFG, "__class__", m.Wide)),  # a reassigned __class__
        ("mode", lambda m: setattr(m.Plain, "MODE", "safe")),  # a plain instance's class
        ("factor", lambda m: setattr(m.Cfg, "factor", lambda self: 7)),  # an override added to the subclass
        ("nested_mode", lambda m: setattr(m.Plain, "MODE", "safe")),  # an instance inside a table
    ],
)
def test_instance_depends_on_its_class(pkg, reader, change) -> None:
    pkg.write("cfg", CONFIG)
    m = pkg.load("cfg")
    _sees(getattr(m, reader), lambda: change(m))


def test_method_body_edit_by_reload_of_the_class_module(pkg) -> None:
    pkg.write("shapes", "TILE = 4\n\nclass Shape:\n    def tile(self):\n        return TILE\n")
    pkg.write(
        "use", f"from {pkg.name}.shapes import Shape\n\nSHAPE = Shape()\n\ndef tile():\n    return SHAPE.tile()\n"
    )
    use = pkg.load("use")
    _sees(use.tile, lambda: pkg.edit("shapes", "TILE = 4", "TILE = 8"))


def test_class_level_table_edited_in_place(pkg) -> None:
    pkg.write("reg", "class Reg:\n    SIZES = {'m': 64}\n\nREG = Reg()\n\ndef size():\n    return REG.SIZES['m']\n")
    m = pkg.load("reg")
    _sees(m.size, lambda: m.Reg.SIZES.__setitem__("m", 128))


def test_slotted_instance_unchanged_keeps_the_guard(pkg) -> None:
    pkg.write("cfg", CONFIG)
    m = pkg.load("cfg")
    guard = fingerprint(m.tile).guard()
    m.CFG.tile = m.CFG.tile  # the same object stored again
    assert guard.check() and guard.check()


# --- 2. library callables that carry user state ------------------------------------------

CALLABLES = """
import functools
import operator

def body(x, scale=1):
    return x * scale

PART = functools.partial(body, scale=2)

@functools.singledispatch
def pick(x):
    return 1

@pick.register
def _(x: int):
    return 2

class Obj:
    def __init__(self):
        self.k = 1
    def meth(self):
        return self.k

OBJ = Obj()
BOUND = OBJ.meth
GET = operator.attrgetter("k")

def use_partial():
    return PART(3)

def use_dispatch():
    return pick(1.0)

def use_bound():
    return BOUND()

def use_getter():
    return GET(OBJ)
"""


@pytest.mark.parametrize(
    ("reader", "change"),
    [
        ("use_partial", lambda m: m.PART.keywords.__setitem__("scale", 5)),  # keywords edited in place
        ("use_partial", lambda m: m.PART.__setstate__((m.body, (), {"scale": 7}, None))),
        ("use_dispatch", lambda m: m.pick.register(float, lambda x: 7)),  # a register after the build
        ("use_bound", lambda m: setattr(m.OBJ, "k", 3)),  # the bound instance's state
        ("use_bound", lambda m: setattr(m.Obj, "meth", lambda self: 0)),  # ... and its class
        ("use_getter", lambda m: setattr(m.OBJ, "k", 3)),  # what attrgetter reads
    ],
)
def test_library_callable_walked_through_its_state(pkg, reader, change) -> None:
    pkg.write("calls", CALLABLES)
    m = pkg.load("calls")
    _sees(getattr(m, reader), lambda: change(m))


def test_singledispatch_cache_filling_is_no_change(pkg) -> None:
    pkg.write("calls", CALLABLES)
    m = pkg.load("calls")
    guard = fingerprint(m.use_dispatch).guard()
    assert m.pick("text") == 1 and m.pick(b"x") == 1  # dispatch_cache fills: the library's own
    assert guard.check()


# --- 3. imports the trace itself runs ------------------------------------------------------


def test_import_reads_statements_and_constant_import_module() -> None:
    from flydeps.code.bytecode import ImportRead, import_reads  # noqa: PLC0415 - the function under test

    def helper():
        import a.b as c  # noqa: F401
        import x  # noqa: F401
        from p import q as r  # noqa: F401

        m = importlib.import_module("mm")  # noqa: F841
        return importlib.import_module("nn").VAL

    reads = import_reads(helper.__code__)
    assert ImportRead("c", "a", ("b",), 0) in reads  # IMPORT_FROM: the package's attribute
    assert ImportRead("x", "x", (), 0) in reads
    assert ImportRead("r", "p", ("q",), 0) in reads
    assert ImportRead("m", "mm", (), 0, ("importlib", "import_module")) in reads
    assert ImportRead("", "nn", ("VAL",), 0, ("importlib", "import_module")) in reads
    assert import_reads((lambda: importlib.import_module(NAME)).__code__) == ()  # type: ignore[name-defined]  # noqa: F821 - not constant

    def lookups():
        a = sys.modules["ss"].VAL
        b = __import__("dd.ee", fromlist=["VAL"]).VAL
        return a, b, __import__("ff.gg").gg

    reads = import_reads(lookups.__code__)
    assert ImportRead("", "ss", ("VAL",), 0, ("sys", "modules")) in reads
    assert ImportRead("", "dd.ee", ("VAL",), 0, ("__import__",)) in reads
    assert ImportRead("", "ff", ("gg",), 0, ("__import__",)) in reads


def _dep_and_user(pkg, body: str) -> tuple[types.ModuleType, types.ModuleType]:
    pkg.write("dep", "VAL = 1\n")
    pkg.write("use", f"import importlib\nimport sys\n\ndef helper():\n{body}\n")
    return pkg.load("dep"), pkg.load("use")


@pytest.mark.parametrize(
    "body",
    [
        "    import {p}.dep\n    return {p}.dep.VAL",
        "    import {p}.dep as dep\n    return dep.VAL",
        "    from {p} import dep\n    return dep.VAL",
        "    return importlib.import_module('{p}.dep').VAL",
        "    mod = importlib.import_module('{p}.dep')\n    return mod.VAL",
        "    return sys.modules['{p}.dep'].VAL",  # the module imported at the top (red team: stale)
        "    mod = sys.modules['{p}.dep']\n    return mod.VAL",
        "    return __import__('{p}.dep', fromlist=['VAL']).VAL",
        "    return __import__('{p}.dep').dep.VAL",  # no fromlist: the package, then its attribute
    ],
)
def test_import_in_body_sees_reload(pkg, body) -> None:
    _dep, use = _dep_and_user(pkg, body.format(p=pkg.name))
    _sees(use.helper, lambda: pkg.edit("dep", "VAL = 1", "VAL = 2"))


def test_import_in_body_sees_sys_modules_replacement(pkg, monkeypatch) -> None:
    _dep, use = _dep_and_user(pkg, f"    import {pkg.name}.dep as dep\n    return dep.VAL")
    bindings = fingerprint(use.helper)._discovery.bindings  # type: ignore[union-attr]
    assert any(b.kind is BindingKind.ENTRY and b.container is sys.modules for b in bindings)
    _sees(use.helper, lambda: monkeypatch.setitem(sys.modules, f"{pkg.name}.dep", types.ModuleType("other")))


def test_other_imports_keep_the_guard(pkg) -> None:
    _dep, use = _dep_and_user(pkg, f"    import {pkg.name}.dep as dep\n    return dep.VAL")
    guard = fingerprint(use.helper).guard()
    pkg.write("unrelated", "X = 1\n")
    pkg.load("unrelated")  # sys.modules grows: no entry the helper reads changed
    assert guard.check()


LAZY_INIT = """
import importlib

_LAZY = {"Op": "impl"}

def __getattr__(name):
    sub = _LAZY.get(name)
    if sub is None:
        raise AttributeError(name)
    return getattr(importlib.import_module(f"{__name__}.{sub}"), name)
"""


def test_pep562_lazy_package(pkg) -> None:
    (pkg.root / pkg.name / "lazy").mkdir()
    (pkg.root / pkg.name / "lazy" / "__init__.py").write_text(LAZY_INIT)
    (pkg.root / pkg.name / "lazy" / "impl.py").write_text("Op = 1\n")
    (pkg.root / pkg.name / "lazy" / "impl2.py").write_text("Op = 2\n")
    lazy = pkg.load("lazy")
    pkg.write("use", f"from {pkg.name} import lazy\n\ndef helper():\n    return lazy.Op\n")
    use = pkg.load("use")
    assert use.helper() == 1  # the first build ran the lazy import
    impl = sys.modules[f"{pkg.name}.lazy.impl"]
    _sees(use.helper, lambda: setattr(impl, "Op", 5))  # the target edited (as a reload would)
    _sees(use.helper, lambda: lazy._LAZY.__setitem__("Op", "impl2"))  # the table it reads
    assert "__getattr__" in {e.label.rpartition("<")[2].rstrip(">") for e in fingerprint(use.helper).graph.edges}


# --- 5. per-thread and per-context values, library data ----------------------------------

PER_THREAD = """
import contextvars
import threading

MODE = contextvars.ContextVar("mode", default=1)
LOCAL = threading.local()
LOCAL.tile = 1

def mode():
    return MODE.get()

def tile():
    return LOCAL.tile
"""


def test_contextvar_keyed_by_current_value(pkg) -> None:
    pkg.write("ctx", PER_THREAD)
    m = pkg.load("ctx")
    fp = fingerprint(m.mode)
    guard = fp.guard()
    assert guard.check()
    # Another context with another value: the same guard fails there, holds here.
    other = contextvars.copy_context()
    other.run(m.MODE.set, 2)
    assert other.run(guard.check) is False
    assert other.run(lambda: fingerprint(m.mode).digest) != fp.digest
    assert guard.check()
    token = m.MODE.set(3)
    try:
        assert guard.check() is False
    finally:
        m.MODE.reset(token)
    assert guard.check()


def test_contextvar_in_another_thread_with_a_fresh_context(pkg) -> None:
    pkg.write("ctx", PER_THREAD)
    m = pkg.load("ctx")
    token = m.MODE.set(7)  # this thread's value; a new thread starts from the default
    try:
        guard = fingerprint(m.mode).guard()
        seen: list[bool] = []
        worker = threading.Thread(target=lambda: seen.append(guard.check()))
        worker.start()
        worker.join()
        assert seen == [False] and guard.check()
    finally:
        m.MODE.reset(token)


def test_thread_local_keyed_by_the_threads_values(pkg) -> None:
    pkg.write("ctx", PER_THREAD)
    m = pkg.load("ctx")
    fp = fingerprint(m.tile)
    guard = fp.guard()
    seen: dict[str, object] = {}

    def other() -> None:
        m.LOCAL.tile = 2
        seen["check"], seen["digest"] = guard.check(), fingerprint(m.tile).digest

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert seen == {"check": False, "digest": seen["digest"]} and seen["digest"] != fp.digest
    assert guard.check()  # this thread's value is unchanged
    _sees(m.tile, lambda: setattr(m.LOCAL, "tile", 3))


def test_thread_local_subclass_init_never_runs(pkg) -> None:
    pkg.write(
        "ctx",
        "import threading\nRAN = []\n\nclass Local(threading.local):\n"
        "    def __init__(self):\n        RAN.append(1)\n        self.tile = 1\n\n"
        "LOCAL = Local()\n\ndef tile():\n    return LOCAL.tile\n",
    )
    m = pkg.load("ctx")
    del m.RAN[:]
    seen: list[bool] = []
    guard = fingerprint(m.tile).guard()
    worker = threading.Thread(target=lambda: seen.append(guard.check()))
    worker.start()
    worker.join()
    assert m.RAN == [] and seen == [True]


def test_library_data_attribute_bound_by_value(pkg, monkeypatch) -> None:
    pkg.write("ver", "import json\nimport os\n\ndef version():\n    return json.__version__, os.path.sep\n")
    m = pkg.load("ver")
    graph = fingerprint(m.version).graph
    value_node = graph.nodes["external:json.__version__"]
    assert value_node.kind is NodeKind.EXTERNAL and "__version__=" in value_node.detail
    assert "external:posixpath.sep" in graph.nodes
    _sees(m.version, lambda: monkeypatch.setattr(sys.modules["json"], "__version__", "99.0"))
    _sees(m.version, lambda: monkeypatch.setattr(sys.modules["posixpath"], "sep", "\\"))


def test_library_callable_stays_a_leaf(pkg) -> None:
    pkg.write("lib", "import json\n\ndef dump():\n    return json.dumps\n")
    m = pkg.load("lib")
    assert "external:json.dumps" in fingerprint(m.dump).graph.nodes


# --- bad inputs ---------------------------------------------------------------------------


def test_hostile_instance_class_never_runs(pkg) -> None:
    pkg.write(
        "hostile",
        "RAN = []\n\nclass Meta(type):\n    def __getattribute__(cls, name):\n        RAN.append(name)\n"
        "        return type.__getattribute__(cls, name)\n\n"
        "class H(metaclass=Meta):\n    K = 1\n    __slots__ = ('a',)\n"
        "    def __getattribute__(self, name):\n        RAN.append(name)\n        raise RuntimeError(name)\n"
        "    @property\n    def __class__(self):\n        RAN.append('__class__')\n        return int\n\n"
        "OBJ = H.__new__(H)\n\ndef read():\n    return OBJ.K\n",
    )
    m = pkg.load("hostile")
    del m.RAN[:]
    _sees(m.read, lambda: type.__setattr__(m.H, "K", 2))
    assert m.RAN == []


def test_partial_subclass_hooks_never_run(pkg) -> None:
    pkg.write(
        "part",
        "import functools\nRAN = []\n\nclass P(functools.partial):\n"
        "    def __getattribute__(self, name):\n        RAN.append(name)\n        return 0\n\n"
        "def body(x, k=1):\n    return x * k\n\nPART = P(body, k=2)\n\ndef use():\n    return PART(1)\n",
    )
    m = pkg.load("part")
    del m.RAN[:]
    _sees(m.use, lambda: functools.partial.__dict__["keywords"].__get__(m.PART).__setitem__("k", 3))
    assert m.RAN == []


def test_getattr_with_a_constant_name_is_a_chain(pkg) -> None:
    """``getattr(mod, "helper")(...)``: the helper's code is a dependency, as ``mod.helper``'s."""
    pkg.write("dep", "def helper():\n    return 1\n")
    pkg.write("use", f"from {pkg.name} import dep\n\ndef run():\n    return getattr(dep, 'helper')()\n")
    pkg.load("dep")
    use = pkg.load("use")
    _sees(use.run, lambda: pkg.edit("dep", "return 1", "return 2"))
