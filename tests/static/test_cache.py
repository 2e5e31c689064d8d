"""Parse cache and result cache: reused when nothing changed, never stale when something did."""

from __future__ import annotations

from pathlib import Path

import pytest

from flydeps.static import parse
from flydeps.static.analyze import analyze
from flydeps.static.parse import scan_imports

FACTORY = """import functools
from .helpers import helper


@functools.lru_cache
def compile_k(n):
    def kernel():
        return helper(n)
    return kernel
"""


@pytest.fixture()
def pkg(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / "cache"))
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "factory.py").write_text(FACTORY)
    (root / "helpers.py").write_text("def helper(n):\n    return n + 1\n")
    return root


def _count_extractions(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    seen: list[str] = []
    original = parse.extract

    def counting(source: bytes, filename: str):
        seen.append(Path(filename).name)
        return original(source, filename)

    monkeypatch.setattr(parse, "extract", counting)
    return seen


def test_warm_run_parses_nothing_and_gives_the_same_graph(pkg: Path, monkeypatch) -> None:
    first = analyze([str(pkg / "factory.py")]).graph
    seen = _count_extractions(monkeypatch)
    assert analyze([str(pkg / "factory.py")]).graph == first
    assert seen == []


def test_edit_of_an_imported_helper_is_seen_through_the_result_cache(pkg: Path, monkeypatch) -> None:
    before = analyze([str(pkg / "factory.py")]).graph
    (pkg / "helpers.py").write_text("def helper(n):\n    return n + 2\n")
    seen = _count_extractions(monkeypatch)
    after = analyze([str(pkg / "factory.py")]).graph
    assert seen == ["helpers.py"]  # only the changed file is parsed again
    assert after.nodes["pkg.helpers:helper"].digest != before.nodes["pkg.helpers:helper"].digest


def test_new_module_shadowing_a_probe_invalidates_the_result(pkg: Path) -> None:
    (pkg / "factory.py").write_text(FACTORY.replace("from .helpers import helper", "from . import helper"))
    before = analyze([str(pkg / "factory.py")]).graph
    assert any(n.startswith("unresolved:") for n in before.nodes)  # pkg has no `helper` yet
    (pkg / "helper.py").write_text("def __call__():\n    pass\n")
    after = analyze([str(pkg / "factory.py")]).graph
    assert "pkg.helper:" in after.nodes


def test_comment_edit_reparses_but_keeps_digests(pkg: Path) -> None:
    before = analyze([str(pkg / "factory.py")]).graph
    (pkg / "helpers.py").write_text("# a comment\ndef helper(n):\n    '''doc'''\n    return n + 1\n")
    after = analyze([str(pkg / "factory.py")]).graph
    assert {k: n.digest for k, n in after.nodes.items()} == {k: n.digest for k, n in before.nodes.items()}


def test_scan_imports_over_approximates() -> None:
    source = (
        b"import a.b as c, d\nfrom ..x import (y,\n   z as w)\nfrom . import q\n  from .m import *\ns = 'import s'\n"
    )
    assert scan_imports(source) == [
        (0, "a.b", ()),
        (0, "d", ()),
        (2, "x", ("y", "z")),
        (1, "", ("q",)),
        (1, "m", ("*",)),
    ]


def test_pool_and_in_process_extraction_agree(pkg: Path) -> None:
    for i in range(6):
        (pkg / f"extra_{i}.py").write_text(
            f"from .helpers import helper\n\ndef f{i}(n):\n    return helper(n) * {i}\n" * 400
        )
    serial = analyze([str(pkg)], use_cache=False, workers=1).graph
    old = (parse.POOL_MIN_BYTES, parse.POOL_MIN_FILES)
    parse.POOL_MIN_BYTES, parse.POOL_MIN_FILES = 0, 2
    try:
        pooled = analyze([str(pkg)], use_cache=False, workers=2).graph
    finally:
        parse.POOL_MIN_BYTES, parse.POOL_MIN_FILES = old
    assert pooled == serial


def test_well_formed_but_wrong_result_entries_are_misses(pkg: Path) -> None:
    import json

    first = analyze([str(pkg / "factory.py")]).graph
    entries = [p for p in (pkg.parent / "cache").rglob("*.json") if p.parent.name.startswith("r")]
    assert entries
    for entry in entries:  # right header and container, wrong content: every field an int
        header, _, body = entry.read_bytes().partition(b"\n")
        entry.write_bytes(header + b"\n" + json.dumps(list(range(len(json.loads(body))))).encode())
    assert analyze([str(pkg / "factory.py")]).graph == first
