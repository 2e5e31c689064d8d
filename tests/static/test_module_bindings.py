"""What the summary records besides a name's last binding (issue 37), on odd and bad inputs.

The construct families (``test_mutation_families.py``) check digests end to end; these
check the records themselves (``FileSummary.alternatives``, ``lazy``, ``star_after``) and
that forms the rules do not cover are ignored, never misread and never a crash.
"""

from __future__ import annotations

from pathlib import Path

from flydeps.static.analyze import analyze
from flydeps.static.extract import extract
from flydeps.static.summary import DefBinding, FileSummary, ValueBinding


def _summary(source: str) -> FileSummary:
    return extract(source.encode(), "m.py")


def _alternatives(summary: FileSummary, name: str) -> list:
    return [b for n, b in summary.alternatives if n == name]


def test_unconditional_rebinding_ends_earlier_bindings() -> None:
    summary = _summary("if c:\n    X = 1\nelse:\n    X = 2\nX = 3\n")
    assert _alternatives(summary, "X") == []
    summary = _summary("X = 1\nif c:\n    X = 2\n")
    texts = [b.text for b in _alternatives(summary, "X") if isinstance(b, ValueBinding)]
    assert "1" in texts and any(t.startswith("if:") for t in texts)


def test_forms_outside_the_rules_are_ignored_not_misread() -> None:
    source = (
        "import os\n"
        "T = {}\n"
        "getattr(os)\n"  # one argument: no constant name
        "name = 'path'\n"
        "P = getattr(os, name)\n"  # computed name: not followed
        "Q = getattr(os(), 'path')\n"  # not a dotted object
        "setattr(T, name, 1)\n"  # computed attribute: not a patch
        "T[0] += 1\n"  # an item changed in place: a statement of T
        "def g():\n    (y := 1)\n    return y\n"
    )
    summary = _summary(source)
    assert summary.patches == ()
    assert "y" not in dict(summary.scope)  # a walrus inside a function binds a local
    assert not any(
        "getattr" in r for _, b in summary.scope if isinstance(b, ValueBinding) for _, r in b.refs if "." in r
    )
    assert [b.text.partition(":")[0] for b in _alternatives(summary, "T")] == ["augmented item"]


def test_a_global_writer_and_the_defs_it_registers_are_bindings() -> None:
    source = (
        "R = {}\n"
        "def reg(name):\n"
        "    def wrap(fn):\n"
        "        R[name] = fn\n"
        "        return fn\n"
        "    return wrap\n"
        "@reg('a')\n"
        "def a():\n"
        "    return 1\n"
        "def b():\n"
        "    return 2\n"
    )
    quals = {b.qualname for b in _alternatives(_summary(source), "R") if isinstance(b, DefBinding)}
    assert quals == {"reg.<locals>.wrap", "a"}


def test_pep562_sources_and_a_getattr_that_is_not_a_function(tmp_path: Path) -> None:
    summary = _summary("def __getattr__(name):\n    from .impl import thing\n    return {'x': 'pkg.other'}[name]\n")
    assert {(b.module, b.name, b.level) for b in summary.lazy} == {("impl", "thing", 1), ("pkg.other", "", 0)}
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("__getattr__ = dict().get\n")
    (pkg / "use.py").write_text("from pkg import missing\n\ndef run():\n    return missing, len\n")
    result = analyze([f"{pkg / 'use.py'}::run"], use_cache=False)
    ids = set(result.graph.nodes)
    assert "external:builtins.len" in ids
    assert not any(i.startswith("pkg:__getattr__") for i in ids)


def test_a_library_star_import_does_not_replace_an_earlier_def(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text("def sqrt(x):\n    return x\n\nfrom math import *\n\ndef run():\n    return sqrt(2)\n")
    result = analyze([f"{pkg / 'm.py'}::run"], use_cache=False)
    targets = {e.dst for e in result.graph.successors("pkg.m:run")}
    assert "pkg.m:sqrt" in targets


def test_alternatives_that_import_each_other_end(tmp_path: Path) -> None:
    """Two modules each binding ``f`` conditionally from the other: every binding is
    linked once and the walk ends."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from pkg.b import f\nif X:\n    def f():\n        return 'a'\n")
    (pkg / "b.py").write_text("from pkg.a import f\nif Y:\n    def f():\n        return 'b'\n")
    (pkg / "m.py").write_text("from pkg.a import f\n\ndef run():\n    return f()\n")
    result = analyze([f"{pkg / 'm.py'}::run"], use_cache=False)
    targets = {e.dst for e in result.graph.successors("pkg.m:run")}
    assert {"pkg.a:f", "pkg.b:f"} <= targets
