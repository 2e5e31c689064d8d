"""Golden outputs of ``flydeps graph`` on the fixture repository, one per format.

Digests depend on the Python bytecode and on installed library versions, so goldens live
per interpreter (``golden/<cache_tag>/``). Regenerate with ``FLYDEPS_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from flydeps.cli import main

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"

GOLDEN = HERE / "golden" / sys.implementation.cache_tag
FORMATS = ["tree", "json", "dot", "mermaid", "pycg"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_graph_matches_golden(fmt: str, tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(FIXTURES)
    out = tmp_path / f"graph.{fmt}"
    assert main(["graph", "kernelrepo", "--format", fmt, "-o", str(out)]) == 0
    text = out.read_text()
    golden = GOLDEN / f"kernelrepo.{fmt}"
    if os.environ.get("FLYDEPS_UPDATE_GOLDEN") == "1":
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    if not golden.exists():
        pytest.skip(f"no golden for {sys.implementation.cache_tag}; run with FLYDEPS_UPDATE_GOLDEN=1")
    assert text == golden.read_text()


def test_output_has_no_absolute_paths(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(FIXTURES)
    out = tmp_path / "graph.json"
    main(["graph", "kernelrepo", "--format", "json", "-o", str(out)])
    assert str(FIXTURES) not in out.read_text()


def test_json_text_is_the_documented_document(monkeypatch) -> None:
    """The fast JSON writer and ``graph_document`` (the schema in docs/cli.md) agree."""
    import json

    from flydeps.fingerprint import transitive_digests
    from flydeps.static.analyze import analyze
    from flydeps.static.report import ReportOptions, format_json, graph_document

    monkeypatch.chdir(FIXTURES)
    result = analyze(["kernelrepo", "missing.py"], use_cache=False)
    digests = transitive_digests(result.graph)
    text = format_json(result.graph, digests, result.diagnostics, ReportOptions())
    assert json.loads(text) == graph_document(result.graph, digests, result.diagnostics)
    assert json.loads(text)["diagnostics"] == [
        {"path": "missing.py", "line": 1, "message": "no such file or directory"}
    ]


def test_dot_output_renders_with_graphviz(tmp_path) -> None:
    import shutil
    import subprocess

    if shutil.which("dot") is None:
        pytest.skip("Graphviz is not installed")
    golden = GOLDEN / "kernelrepo.dot"
    if not golden.exists():
        pytest.skip("no dot golden for this interpreter")
    done = subprocess.run(["dot", "-Tsvg", str(golden)], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert b"compile_decode" in done.stdout
