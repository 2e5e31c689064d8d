"""Resolution corner cases found by running the analyzer over real packages (FlyDSL 0.5,
its MLIR bindings, sympy, the standard library): each once crashed, looped or left a
name unresolved."""

from __future__ import annotations

from pathlib import Path

from flydeps.graph import DepGraph, EdgeKind, NodeKind
from flydeps.static.analyze import Analysis, analyze


def _analyze(tmp_path: Path, files: dict[str, str], target: str, package: str = "pkg") -> Analysis:
    """Write ``files`` as package ``package`` (an empty ``__init__.py`` unless given) and
    analyse ``target`` (``m.py::run``) inside it."""
    root = tmp_path / package
    for name, text in {"__init__.py": "", **files}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return analyze([f"{root}/{target}"], use_cache=False)


def _graph(tmp_path: Path, files: dict[str, str], target: str) -> DepGraph:
    return _analyze(tmp_path, files, target).graph


def _edges(graph: DepGraph, src: str) -> set[tuple[str, EdgeKind, str]]:
    return {(e.dst, e.kind, e.label) for e in graph.successors(src)}


def test_class_body_aliases_resolve_in_the_class_and_cycles_end(tmp_path: Path) -> None:
    source = (
        "class A:\n    def __add__(self, o):\n        return o\n    __radd__ = __add__\n\n"
        "class B:\n    x = B.y\n    y = B.x\n\ndef run(a, b):\n    return A.__radd__(a, 1), B.x\n"
    )
    edges = _edges(_graph(tmp_path, {"m.py": source}, "m.py::run"), "pkg.m:run")
    assert ("pkg.m:A.__add__", EdgeKind.CALLS, "A.__radd__") in edges
    assert any(label == "B.x" and dst.startswith("unresolved:") for dst, _, label in edges)


def test_package_importing_its_own_submodule(tmp_path: Path) -> None:
    files = {
        "__init__.py": "from . import env\n",
        "env.py": "def flag():\n    return 1\n",
        "user.py": "from . import env\n\ndef run():\n    return env.flag()\n",
    }
    graph = _graph(tmp_path, files, "user.py::run")
    assert ("pkg.env:flag", EdgeKind.CALLS, "env.flag") in _edges(graph, "pkg.user:run")


def test_compiled_extension_modules_are_leaves(tmp_path: Path) -> None:
    from importlib.machinery import EXTENSION_SUFFIXES

    (tmp_path / "pkg" / "_libs").mkdir(parents=True)
    (tmp_path / "pkg" / "_libs" / f"_core{EXTENSION_SUFFIXES[0]}").write_bytes(b"\x7fELF")
    ops = (
        "from .ir import *\n\nclass ConstantOp(ConstantOp):\n    def value(self):\n        return self.operation\n\n"
        "def run(op):\n    return Attribute(op), ConstantOp().value()\n"
    )
    files = {"ir.py": "from ._libs._core.ir import *\n", "_libs/__init__.py": "", "ops.py": ops}
    graph = _graph(tmp_path, files, "ops.py::run")
    assert graph.nodes["external:pkg._libs._core.ir.Attribute"].kind is NodeKind.EXTERNAL
    # `class ConstantOp(ConstantOp)` refines the compiled class of the same name
    assert ("external:pkg._libs._core.ir.ConstantOp", EdgeKind.CALLS, "base") in _edges(graph, "pkg.ops:ConstantOp")
    # an attribute the compiled base class provides is that library's leaf
    value = {(dst, label) for dst, _, label in _edges(graph, "pkg.ops:ConstantOp.value")}
    assert ("external:pkg._libs._core.ir.ConstantOp.operation", "self.operation") in value


def test_property_setters_resolve_in_the_class_body(tmp_path: Path) -> None:
    source = "class P:\n    @property\n    def v(self):\n        return 1\n"
    source += "    @v.setter\n    def v(self, x):\n        pass\n"
    graph = _graph(tmp_path, {"m.py": source}, "m.py::P")
    # `@v.setter` reads the getter's property (the earlier `v`), not the setter itself
    assert ("pkg.m:P.v", EdgeKind.DECORATES, "@v.setter") in _edges(graph, "pkg.m:P.v#2")
    assert not [n for n in graph.nodes.values() if n.kind is NodeKind.UNRESOLVED]


def test_unpacked_literals_module_dunders_and_deep_expressions(tmp_path: Path) -> None:
    deep = " + ".join(["x"] * 800)  # CPython compiles it; ast.unparse recurses too deep
    source = f"import os\nA, B = 1, (2, 3)\nx = 1\nDEEP = {deep}\n\n"
    source += "def run():\n    return A, B, DEEP, os.path.dirname(__file__)\n"
    result = _analyze(tmp_path, {"m.py": source}, "m.py::run")
    assert result.diagnostics == ()
    nodes = result.graph.nodes
    assert nodes["pkg.m:A"].detail == "1" and "static-expression" not in nodes["pkg.m:A"].tags
    assert nodes["pkg.m:B"].detail == "(2, 3)"
    assert nodes["pkg.m:DEEP"].detail == "<deeply nested binop>"
    assert nodes["pkg.m:__file__"].detail.startswith("bound by the import system")
    assert "static-expression" in nodes["pkg.m:__file__"].tags


def test_other_installed_packages_stay_external_under_site_packages(tmp_path: Path) -> None:
    site = tmp_path / "lib" / "site-packages"
    _analyze(site, {"core.py": "def helper():\n    return 1\n"}, "core.py", package="otherlib")
    source = "import functools\nfrom otherlib.core import helper\n\n"
    source += "@functools.cache\ndef compile_k():\n    return helper()\n"
    _analyze(site, {"k.py": source}, "k.py", package="mylib")
    graph = analyze([str(site / "mylib")], use_cache=False).graph
    assert graph.roots == ("mylib.k:compile_k",)
    assert ("external:otherlib.core.helper", EdgeKind.CALLS, "helper") in _edges(graph, "mylib.k:compile_k")


def test_self_alias_is_the_name_before_the_assignment(tmp_path: Path) -> None:
    source = "TimeoutError = TimeoutError\n\ndef run():\n    raise TimeoutError\n"
    graph = _graph(tmp_path, {"m.py": source}, "m.py::run")
    assert ("external:builtins.TimeoutError", EdgeKind.CALLS, "TimeoutError") in _edges(graph, "pkg.m:run")


def test_library_star_import_provides_attributes_but_not_builtin_globals(tmp_path: Path) -> None:
    files = {
        "osish.py": "from posix import *\n",
        "m.py": "from . import osish\nfrom posix import *\n\ndef run():\n    return osish.open, len\n",
    }
    edges = _edges(_graph(tmp_path, files, "m.py::run"), "pkg.m:run")
    assert ("external:posix.open", EdgeKind.CALLS, "osish.open") in edges
    assert ("external:builtins.len", EdgeKind.CALLS, "len") in edges


def test_method_defaults_resolve_in_the_class_body(tmp_path: Path) -> None:
    source = "class M:\n    __marker = object()\n    def pop(self, key, default=__marker):\n        return default\n"
    graph = _graph(tmp_path, {"m.py": source}, "m.py::M.pop")
    (default,) = [e for e in graph.successors("pkg.m:M.pop") if e.kind is EdgeKind.DEFAULT]
    assert default.dst == "pkg.m:M.pop#default.default"
    assert "static-expression" in graph.nodes[default.dst].tags  # object(): not evaluated statically
