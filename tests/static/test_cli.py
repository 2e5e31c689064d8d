"""The command line: default example, hash, diff, formats, exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from flydeps.cli import main
from flydeps.fingerprint import transitive_digests
from flydeps.static.analyze import analyze

ROOT = Path(__file__).resolve().parents[2]


def test_default_path_is_the_bundled_example(capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["graph", "--color", "never"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("kernels.attention.flash:compile_flash_attention  [factory]")
    assert "[kernel]" in out and "[launcher]" in out and "\x1b[" not in out


def test_python_dash_m_runs_the_cli() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "flydeps", "graph", "examples/kernels/norm", "--format", "json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["schema"] == "flydeps.graph/1"
    assert "kernels.norm.rmsnorm:NormKernelBase.build@kernels.norm.rmsnorm:RMSNormKernel" in doc["roots"]


def test_hash_is_the_transitive_digest_of_the_root(capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    target = "examples/kernels/attention/flash.py::compile_row_reduce"
    assert main(["hash", target]) == 0
    printed = capsys.readouterr().out.strip()
    graph = analyze([target]).graph
    assert printed == transitive_digests(graph)[graph.roots[0]]


def test_unknown_qualname_is_an_analysis_error(capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["hash", "examples/kernels/attention/flash.py::nope"]) == 1
    assert "no function or class 'nope' here; try one of: " in capsys.readouterr().err


def test_pycg_names_builtins_and_nested_functions(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    out = tmp_path / "cg.json"
    assert (
        main(
            [
                "graph",
                "examples/kernels/attention/flash.py::compile_flash_attention",
                "--format",
                "pycg",
                "-o",
                str(out),
            ]
        )
        == 0
    )
    cg = json.loads(out.read_text())
    mask = cg["kernels.attention.flash.compile_flash_attention._mask"]
    assert "<builtin>.enumerate" in mask and "flydsl.expr.select" in mask
    kernel = cg["kernels.attention.flash.compile_flash_attention.flash_attention_kernel"]
    assert "kernels.common.mem.load_tile" in kernel


def test_diff_outside_a_git_repository_is_a_usage_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "HEAD"]) == 2
    assert "flydeps diff: git" in capsys.readouterr().err


def test_call_cycles_are_marked_in_the_tree(tmp_path, capsys) -> None:
    pkg = tmp_path / "cyc"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "m.py").write_text(
        "def even(n):\n    return n == 0 or odd(n - 1)\n\n\ndef odd(n):\n    return n != 0 and even(n - 1)\n"
    )
    assert main(["graph", f"{pkg}/m.py::even", "--no-cache", "--color", "never"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("cyc.m:even  cyc/m.py:1  ")
    assert lines[1].startswith("└── odd  cyc/m.py:5  ")
    assert lines[2].startswith("    └── even  cyc/m.py:1  ") and lines[2].endswith("(cycle)")


def test_unwritable_output_is_a_usage_error(tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["graph", "examples/kernels/norm", "-o", str(tmp_path / "missing-dir" / "out.txt")]) == 2
    assert "cannot write" in capsys.readouterr().err


def test_colour_marks_roles_only_when_asked(capsys, monkeypatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["graph", "examples/kernels/norm", "--color", "always"]) == 0
    out = capsys.readouterr().out
    assert "\x1b[1;35m[kernel]\x1b[0m" in out and "\x1b[m" not in out
