"""Bad input is reported as ``path:line: message``; the rest of the graph is still built."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flydeps.cli import main
from flydeps.static import parse
from flydeps.static.analyze import analyze


def _pkg(tmp_path: Path, files: dict[str, bytes | str]) -> Path:
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    for name, body in files.items():
        data = body.encode() if isinstance(body, str) else body
        (root / name).write_bytes(data)
    return root


GOOD = "import functools\n\n@functools.lru_cache\ndef compile_ok(n):\n    def k():\n        return n\n    return k\n"


def test_syntax_error_is_reported_and_others_analysed(tmp_path: Path, capsys) -> None:
    root = _pkg(tmp_path, {"good.py": GOOD, "bad.py": "def broken(:\n    pass\n"})
    result = analyze([str(root)], use_cache=False)
    assert [(Path(d.path).name, d.line) for d in result.diagnostics] == [("bad.py", 1)]
    assert "syntax error" in result.diagnostics[0].message
    assert "pkg.good:compile_ok" in result.graph.roots
    assert main(["graph", str(root), "--no-cache"]) == 1
    err = capsys.readouterr().err
    assert f"{root}/bad.py:1: syntax error" in err


def test_undecodable_bytes(tmp_path: Path) -> None:
    root = _pkg(tmp_path, {"latin.py": b"# -*- coding: utf-8 -*-\nX = '\xff\xfe'\n", "good.py": GOOD})
    result = analyze([str(root)], use_cache=False)
    assert len(result.diagnostics) == 1 and result.diagnostics[0].path.endswith("latin.py")
    assert result.graph.roots == ("pkg.good:compile_ok",)


def test_missing_file_and_usage_errors(tmp_path: Path) -> None:
    result = analyze([str(tmp_path / "nope.py")], use_cache=False)
    assert result.diagnostics[0].message == "no such file or directory"
    assert main(["graph", str(tmp_path / "nope.py"), "--no-cache"]) == 1
    assert main(["graph", "--format", "svg"]) == 2
    assert main(["hash", "no_qualname.py"]) == 2


def test_path_outside_every_root(tmp_path: Path) -> None:
    root = _pkg(tmp_path, {"good.py": GOOD})
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    (elsewhere / "x.py").write_text("def f():\n    pass\n")
    result = analyze([str(elsewhere / "x.py")], roots=[str(root)], use_cache=False)
    assert "outside every root" in result.diagnostics[0].message


def test_import_cycle_terminates(tmp_path: Path) -> None:
    root = _pkg(
        tmp_path,
        {
            "a.py": "from .b import g as f\nfrom .b import h\n\ndef run():\n    return f() + h()\n",
            "b.py": "from .a import f as g\nfrom .a import run as h\n",
        },
    )
    result = analyze([f"{root}/a.py::run"], use_cache=False)
    assert result.diagnostics == ()
    unresolved = [n for n in result.graph.nodes.values() if n.kind.value == "unresolved"]
    assert any("import cycle" in n.detail for n in unresolved)
    assert "pkg.a:run" in {e.dst for e in result.graph.edges} | set(result.graph.roots)


def test_pathological_nesting_does_not_escape(tmp_path: Path) -> None:
    deep = "X = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    nested = "".join("    " * i + f"def f{i}():\n" for i in range(120)) + "    " * 120 + "pass\n"
    root = _pkg(tmp_path, {"deep.py": deep, "nested.py": nested, "good.py": GOOD})
    result = analyze([str(root)], use_cache=False)
    assert {Path(d.path).name for d in result.diagnostics} <= {"deep.py", "nested.py"}
    assert any(Path(d.path).name == "deep.py" for d in result.diagnostics)
    assert "pkg.good:compile_ok" in result.graph.roots


def test_very_large_file_is_skipped_with_a_reason(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(parse, "MAX_FILE_BYTES", 1000)
    root = _pkg(tmp_path, {"big.py": "X = 1\n" * 1000, "good.py": GOOD})
    result = analyze([str(root)], use_cache=False)
    assert [Path(d.path).name for d in result.diagnostics] == ["big.py"]
    assert "FLYDEPS_MAX_FILE_BYTES" in result.diagnostics[0].message


def test_corrupted_cache_entries_are_ignored(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / "cache"))
    root = _pkg(tmp_path, {"good.py": GOOD})
    first = analyze([str(root)]).graph
    entries = [p for p in (tmp_path / "cache").rglob("*") if p.is_file()]  # summaries and results
    assert entries
    for entry in entries:
        entry.write_bytes(b"not a pickle")
    assert analyze([str(root)]).graph == first
    assert all(p.read_bytes() != b"not a pickle" for p in entries)


def test_unknown_statement_fails_loudly_only_in_strict_mode(monkeypatch) -> None:
    import ast

    from flydeps.static.extract import _ScopeBuilder

    class FutureStatement(ast.stmt):  # a statement type this flydeps does not know
        _fields = ()

    tree = ast.Module(body=[FutureStatement(), ast.parse("x = 1").body[0]], type_ignores=[])
    assert os.environ["FLYDEPS_STRICT_AST"] == "1"
    with pytest.raises(NotImplementedError, match="FutureStatement"):
        _ScopeBuilder().module(tree)
    monkeypatch.delenv("FLYDEPS_STRICT_AST")
    users = _ScopeBuilder()
    users.module(tree)  # users: ignored, the rest of the module is still read
    assert "x" in users.scopes[""]


def test_long_reexport_and_inheritance_chains_do_not_overflow(tmp_path: Path) -> None:
    files: dict[str, bytes | str] = {
        "m0.py": "def f():\n    return 0\n\nclass C0:\n    def g(self):\n        return 0\n"
    }
    for i in range(1, 1500):
        files[f"m{i}.py"] = f"from .m{i - 1} import f, C{i - 1}\n\nclass C{i}(C{i - 1}):\n    pass\n"
    files["top.py"] = (
        "import functools\nfrom .m1499 import f, C1499\n\n@functools.lru_cache\n"
        "def compile_top():\n    return f() + C1499().g()\n"
    )
    root = _pkg(tmp_path, files)
    result = analyze([f"{root}/top.py"], use_cache=False)
    assert result.graph.roots == ("pkg.top:compile_top",)
    reasons = {n.detail for n in result.graph.nodes.values() if n.kind.value == "unresolved"}
    assert any("re-export chain longer than" in r for r in reasons)
