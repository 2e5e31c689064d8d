"""Bad input to the call graph (issue 13): ``flydeps graph --format pycg`` / ``--calls``.

Every broken file is one ``path:line: message`` problem (exit 1) and the call graph of the
files that do parse is still exported, with the edges a reader expects from the source;
options that cannot go together are a usage error (exit 2) naming both. Nothing here is
compared with flydeps's own analysis: the expected edges are written by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flydeps.cli import main


def _package(root: Path) -> Path:
    pkg = root / "p"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "syntax.py").write_text("def broken(:\n    pass\n")
    (pkg / "nul.py").write_bytes(b"def x(): pass\n\x00\n")
    (pkg / "latin.py").write_bytes(b"# no coding line\nNAME = '\xe9'\n")
    # 250 nested parentheses: over the parser's limit (200) on every version.
    (pkg / "deep.py").write_text("def f(a):\n    return " + "(" * 250 + "a" + ")" * 250 + "\n")
    # 3,000-term sum: too deep for the compiler up to 3.12 (a problem), fine on 3.13 (analysed);
    # either way one line or nothing, never a RecursionError from the call-graph walk.
    (pkg / "long.py").write_text("def s(a):\n    return " + "+".join(["a"] * 3000) + "\n")
    (pkg / "nested.py").write_text("def h(x):\n    return " + "[" * 150 + "x" + "]" * 150 + "\n")
    (pkg / "good.py").write_text(
        "from p.nested import h\ndef k():\n    return h(1)\ndef pick():\n    return k\nop = pick()\nop()\n"
    )
    return pkg


def test_broken_files_are_problems_and_the_rest_is_exported(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _package(tmp_path)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "cg.json"
    assert main(["graph", "p", "--format", "pycg", "--no-cache", "-o", str(out)]) == 1
    err = capsys.readouterr().err
    for where in ("p/syntax.py:1:", "p/nul.py:", "p/latin.py:", "p/deep.py:2:"):
        assert where in err, err
    assert "Traceback" not in err
    graph = json.loads(out.read_text())
    assert graph["p.good"] == ["p.good.k", "p.good.pick"]  # op = pick(); op() calls k
    assert graph["p.good.k"] == ["p.nested.h"]
    assert graph["p.good.pick"] == []  # ``return k`` is a reference, not a call
    assert graph["p.nested.h"] == []
    assert not any(name.startswith(("p.syntax.", "p.nul.")) for name in graph)


def test_the_calls_option_refuses_formats_it_cannot_label(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "main.py").write_text("def f(): pass\nf()\n")
    monkeypatch.chdir(tmp_path)
    for fmt in ("dot", "mermaid"):
        assert main(["graph", "main.py", "--calls", "--format", fmt]) == 2
        err = capsys.readouterr().err
        assert "--calls" in err and fmt in err and "Traceback" not in err
