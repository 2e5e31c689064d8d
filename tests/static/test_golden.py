"""Golden outputs of ``flydeps graph`` on the fixture repository, one per format.

Two expectations per interpreter:

* **Structure, on every interpreter**: the output with digests and ``name==version``
  details masked equals the reference goldens (``golden/cpython-311/``, the environment with
  FlyDSL installed). Nodes, edges, names, lines and layout must not depend on the version.
* **Exact digests**, per interpreter: ``golden/<cache_tag>/`` (3.10 to 3.13). Digests depend
  on the bytecode and on the interpreter's patch release (stdlib leaves digest as
  ``python==3.12.1``), so each directory records the version it was made with
  (``python-version``); another patch release skips only this exact comparison, saying so.

Regenerate with ``FLYDEPS_UPDATE_GOLDEN=1`` on every interpreter (``.ci/run`` makes the
environments): ``for v in .venv .venv310 .venv312 .venv313; do FLYDEPS_UPDATE_GOLDEN=1
$v/bin/python -m pytest -q tests/static/test_golden.py; done``.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path

import pytest

from flydeps.cli import main

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"

REFERENCE = HERE / "golden" / "cpython-311"
GOLDEN = HERE / "golden" / sys.implementation.cache_tag
FORMATS = ["tree", "json", "dot", "mermaid", "pycg"]
_DIGEST = re.compile(r"\b[0-9a-f]{8,64}\b")
_VERSION = re.compile(r"\b([A-Za-z_][\w.-]*)==[0-9][\w.+-]*")  # python==3.11.7, flydsl==0.5.0
_UPDATE = os.environ.get("FLYDEPS_UPDATE_GOLDEN") == "1"


def _graph(fmt: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.chdir(FIXTURES)
    out = tmp_path / f"graph.{fmt}"
    assert main(["graph", "kernelrepo", "--format", fmt, "-o", str(out)]) == 0
    return out.read_text()


def _structure(text: str) -> str:
    """``text`` without what legitimately differs between interpreters: digests, versions."""
    return _VERSION.sub(r"\1", _DIGEST.sub("<digest>", text))


@pytest.mark.parametrize("fmt", FORMATS)
def test_graph_matches_golden(fmt: str, tmp_path, monkeypatch) -> None:
    text = _graph(fmt, tmp_path, monkeypatch)
    golden, recorded = GOLDEN / f"kernelrepo.{fmt}", GOLDEN / "python-version"
    if _UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
        recorded.write_text(platform.python_version() + "\n")
    if not golden.exists():
        pytest.fail(f"no golden for {sys.implementation.cache_tag}; run with FLYDEPS_UPDATE_GOLDEN=1")
    made_with = recorded.read_text().strip() if recorded.exists() else "?"
    if made_with != platform.python_version():
        pytest.skip(f"exact digests recorded on Python {made_with}, this is {platform.python_version()}")
    assert text == golden.read_text()


@pytest.mark.parametrize("fmt", FORMATS)
def test_graph_structure_is_the_same_on_every_interpreter(fmt: str, tmp_path, monkeypatch) -> None:
    text = _graph(fmt, tmp_path, monkeypatch)
    reference = (REFERENCE / f"kernelrepo.{fmt}").read_text()
    assert _DIGEST.search(reference) or fmt in ("dot", "mermaid", "pycg")  # the mask has work to do
    assert _structure(text) == _structure(reference)


def test_output_has_no_absolute_paths(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(FIXTURES)
    out = tmp_path / "graph.json"
    main(["graph", "kernelrepo", "--format", "json", "-o", str(out)])
    assert str(FIXTURES) not in out.read_text()


def test_json_text_is_the_documented_document(monkeypatch) -> None:
    """The fast JSON writer and ``graph_document`` (the schema in docs/cli.md) agree."""
    import json

    from flydeps.keys.fingerprint import transitive_digests
    from flydeps.static.analyze import analyze
    from flydeps.static.report import ReportOptions, format_json, graph_document

    monkeypatch.chdir(FIXTURES)
    result = analyze(["kernelrepo", "missing.py"], use_cache=False)
    digests = transitive_digests(result.graph)
    text = format_json(result.graph, digests, result.diagnostics, ReportOptions())
    assert json.loads(text) == graph_document(result.graph, digests, result.diagnostics)
    assert json.loads(text)["diagnostics"] == [
        {"path": "missing.py", "line": 0, "message": "no such file or directory"}
    ]


def test_dot_output_renders_with_graphviz(tmp_path, monkeypatch) -> None:
    """Needs Graphviz's ``dot`` (``.ci/run`` installs it and fails when it cannot)."""
    import shutil
    import subprocess

    if shutil.which("dot") is None:
        pytest.skip("Graphviz is not installed (apt-get install graphviz)")
    source = tmp_path / "kernelrepo.dot"
    source.write_text(_graph("dot", tmp_path, monkeypatch))
    done = subprocess.run(["dot", "-Tsvg", str(source)], capture_output=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    assert b"compile_decode" in done.stdout


# -- the pictures (issue 38) ----------------------------------------------------------------
PICTURES = HERE.parents[1] / "docs" / "pictures"
EXAMPLES = HERE.parents[1] / "examples"


def _realworld_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> str:
    monkeypatch.chdir(EXAMPLES)
    out = tmp_path / "realworld.dot"
    assert main(["graph", "kernels/realworld", "--no-cache", "--format", "dot", "-o", str(out), *extra]) == 0
    return out.read_text()


def test_the_realworld_picture_is_the_rendered_golden(tmp_path, monkeypatch) -> None:
    """``docs/pictures/realworld.dot`` and its rendering ``realworld.svg`` (checked by eye
    when made: a cluster per module, fills by role, one node per library) are what the
    analyzer draws now. Regenerate with FLYDEPS_UPDATE_GOLDEN=1 on CPython 3.11."""
    import shutil
    import subprocess

    text = _realworld_dot(tmp_path, monkeypatch)
    if _UPDATE and sys.version_info[:2] == (3, 11):
        (PICTURES / "realworld.dot").write_text(text)
    assert text == (PICTURES / "realworld.dot").read_text()
    if shutil.which("dot") is None:
        pytest.skip("Graphviz is not installed (apt-get install graphviz)")
    version = subprocess.run(["dot", "-V"], capture_output=True, text=True, check=False).stderr.strip()
    svg = subprocess.run(["dot", "-Tsvg", str(tmp_path / "realworld.dot")], capture_output=True, check=True).stdout
    recorded = PICTURES / "realworld.graphviz-version"
    if _UPDATE and sys.version_info[:2] == (3, 11):
        (PICTURES / "realworld.svg").write_bytes(svg)
        recorded.write_text(version + "\n")
    if recorded.read_text().strip() != version:
        pytest.skip(f"the rendering was recorded with {recorded.read_text().strip()}, this is {version}")
    assert svg == (PICTURES / "realworld.svg").read_bytes()


def test_the_picture_groups_by_module_colours_by_role_and_collapses_libraries(tmp_path, monkeypatch) -> None:
    text = _realworld_dot(tmp_path, monkeypatch)
    clusters = re.findall(r"subgraph \"cluster_\d+\" \{\n    label=\"([^\"]+)\"", text)
    assert "kernels.realworld.norms" in clusters and "kernels.realworld.memops" in clusters
    assert 'fillcolor="#BDE8D9"' in text and 'fillcolor="#CDE9F8"' in text  # launchers, kernels
    libraries = re.findall(r'^    "external:[^"]+" \[label="([^"]+)"', text, re.M)
    assert any(label.startswith("flydsl\\n") and "names" in label for label in libraries)
    assert len(libraries) < 12  # one node per library, not one per name
    shown = _realworld_dot(tmp_path, monkeypatch, "--externals", "show")
    assert len(re.findall(r'^    "external:[^"]+" \[label=', shown, re.M)) > 3 * len(libraries)
    hidden = _realworld_dot(tmp_path, monkeypatch, "--externals", "hide")
    assert "external:" not in hidden and "cluster_libraries" not in hidden


def test_externals_hide_in_the_tree(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(FIXTURES)
    assert main(["graph", "kernelrepo", "--no-cache", "--externals", "hide"]) == 0
    assert "external:" not in capsys.readouterr().out
    assert main(["graph", "kernelrepo", "--no-cache"]) == 0
    folded = capsys.readouterr().out
    assert main(["graph", "kernelrepo", "--no-cache", "--externals"]) == 0  # alone: one per line, as before
    shown = capsys.readouterr().out
    assert "external: " in folded and shown.count("\n") > folded.count("\n")
