"""The call graph and the caches: the flow facts of each file in the parse cache, the
solved call graph in the result cache. A warm run reads them instead of parsing or solving
again and gives the same bytes; a damaged entry is a miss (and gets rewritten), never an
error nor another answer.

Oracles: the call graph written by hand for a small two-module package, and the output of
``flydeps graph --format pycg --no-cache`` (no cache read or written).
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from blake3 import blake3

from flydeps.cli import main
from flydeps.static import parse
from flydeps.static.calls import collect as callgraph
from flydeps.static.calls.collect import flow_facts
from flydeps.static.calls.facts import FACTS_SHAPE, FlowFacts

HELPERS = """\
def helper(n):
    return n + 1


class Act:
    def __init__(self):
        self.fn = helper

    def run(self, x):
        return self.fn(x)
"""
MAIN = """\
from pkg.helpers import Act, helper


def apply(cb, x):
    return cb(x)


def go():
    a = Act()
    return apply(helper, a.run(1))


go()
"""
# Written by hand: module code calls go(); go constructs Act and calls run and apply;
# apply calls the callback it is given (helper); run calls what __init__ stored in self.fn.
EXPECTED = {
    "pkg": [],
    "pkg.helpers": [],
    "pkg.helpers.Act.__init__": [],
    "pkg.helpers.Act.run": ["pkg.helpers.helper"],
    "pkg.helpers.helper": [],
    "pkg.main": ["pkg.main.go"],
    "pkg.main.apply": ["pkg.helpers.helper"],
    "pkg.main.go": ["pkg.helpers.Act.__init__", "pkg.helpers.Act.run", "pkg.main.apply"],
}


@pytest.fixture()
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "helpers.py").write_text(HELPERS)
    (root / "main.py").write_text(MAIN)
    return root


def _pycg(out: Path, *flags: str) -> bytes:
    assert main(["graph", "pkg", "--format", "pycg", *flags, "-o", str(out)]) == 0
    return out.read_bytes()


def _facts_entries() -> list[Path]:
    return sorted(parse.cache_dir().rglob("*-facts.json"))


def _count_extractions(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every tree the flow-facts extractor is run on from now on (in this process)."""
    seen: list[object] = []

    def counted(tree: ast.Module) -> FlowFacts:
        seen.append(tree)
        return flow_facts(tree)

    monkeypatch.setattr(callgraph, "flow_facts", counted)
    return seen


def _result_entries() -> list[Path]:
    """Result-cache entries of ``calls=True`` requests (directories ``g?``)."""
    return sorted(p for p in parse.cache_dir().rglob("*.json") if p.parent.name.startswith("g"))


def test_a_warm_run_gives_the_same_bytes_without_solving(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clean = _pycg(project.parent / "clean.json", "--no-cache")
    assert json.loads(clean) == EXPECTED
    assert not _facts_entries()  # --no-cache writes nothing
    cold = _pycg(project.parent / "cold.json")
    assert len(_facts_entries()) == 3 and len(_result_entries()) == 1  # facts: one per module
    extracted = _count_extractions(monkeypatch)
    warm = _pycg(project.parent / "warm.json")
    assert cold == clean and warm == clean
    assert extracted == []


def test_after_an_edit_only_the_edited_file_is_parsed_again(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _pycg(project.parent / "cold.json")
    (project / "main.py").write_text(MAIN + "# edited\n")
    clean = _pycg(project.parent / "clean.json", "--no-cache")
    extracted = _count_extractions(monkeypatch)
    assert _pycg(project.parent / "warm.json") == clean
    assert len(extracted) == 1  # main.py; the facts of helpers.py and __init__.py are read


@pytest.mark.parametrize("fmt", ["json", "tree"])
def test_the_calls_option_answered_from_the_cache_gives_the_same_bytes(project: Path, fmt: str) -> None:
    def run(*flags: str) -> bytes:
        out = project.parent / f"out.{fmt}"
        assert main(["graph", "pkg", "--calls", "--format", fmt, *flags, "-o", str(out)]) == 0
        return out.read_bytes()

    clean = run("--no-cache")
    assert run() == clean and _result_entries()
    assert run() == clean


def test_runs_without_the_call_graph_extract_facts_only_for_instance_attributes(project: Path) -> None:
    # The default path solves value flow only for the modules of classes whose ``self.x``
    # it must name (here ``Act.fn`` in helpers.py), and caches those facts alone.
    assert main(["graph", "pkg", "--format", "json", "-o", str(project.parent / "g.json")]) == 0
    digest = blake3((project / "helpers.py").read_bytes()).hexdigest()
    assert [p.name for p in _facts_entries()] == [f"{digest[2:]}-facts.json"]


def _damage(entry: Path, how: str) -> None:
    data = entry.read_bytes()
    header, _, body = data.partition(b"\n")
    document = json.loads(body)
    if how == "truncated":
        entry.write_bytes(data[: len(data) // 2])
    elif how == "field-missing":
        entry.write_bytes(header + b"\n" + json.dumps(document[:-1]).encode())
    elif how == "retyped":  # every operand index turned into a string
        exprs = [[op, text, [str(i) for i in operands]] for op, text, operands in document[0]]
        entry.write_bytes(header + b"\n" + json.dumps([exprs, *document[1:]]).encode())
    elif how == "bool-for-int":
        exprs = [[op, text, [True for _ in operands]] for op, text, operands in document[0]]
        entry.write_bytes(header + b"\n" + json.dumps([exprs, *document[1:]]).encode())
    elif how == "garbage":
        entry.write_bytes(header + b"\n\xff\xfe not json \x00")
    elif how == "other-key":  # a valid entry of another file
        other = next(p for p in _facts_entries() if p != entry)
        entry.write_bytes(other.read_bytes())
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("how", ["truncated", "field-missing", "retyped", "bool-for-int", "garbage", "other-key"])
def test_a_damaged_facts_entry_is_a_miss_and_gets_rewritten(project: Path, how: str) -> None:
    clean = _pycg(project.parent / "clean.json", "--no-cache")
    _pycg(project.parent / "cold.json")
    for entry in _result_entries():  # else the whole answer comes from the result cache
        entry.unlink()
    entries = _facts_entries()
    originals = {p: p.read_bytes() for p in entries}
    damaged = entries[:1] if how == "other-key" else entries  # keep a source to copy from
    if how in ("retyped", "bool-for-int"):  # only entries with operands to retype
        damaged = [p for p in entries if any(e[2] for e in json.loads(p.read_bytes().partition(b"\n")[2])[0])]
    assert damaged
    for entry in damaged:
        _damage(entry, how)
    assert all(p.read_bytes() != originals[p] for p in damaged)
    assert _pycg(project.parent / "again.json") == clean
    assert {p: p.read_bytes() for p in entries} == originals  # each miss rewrote its entry


@pytest.mark.parametrize("how", ["truncated", "field-missing", "unknown-callee", "short-callee", "retyped"])
def test_a_damaged_call_graph_result_is_a_miss(project: Path, how: str) -> None:
    clean = _pycg(project.parent / "clean.json", "--no-cache")
    _pycg(project.parent / "cold.json")
    [entry] = _result_entries()
    data = entry.read_bytes()
    header, _, body = data.partition(b"\n")
    analysis, (codes, calls, attributes, saturated) = json.loads(body)
    assert calls and attributes  # [module, scope, [callee, ...]]: something to damage
    if how == "truncated":
        damaged = data[: len(data) // 2]
    elif how == "field-missing":
        damaged = header + b"\n" + json.dumps([analysis, [codes, calls, attributes]]).encode()
    elif how == "unknown-callee":
        calls[0][2] = [["nonsense", "pkg.main", "go"]]
        damaged = header + b"\n" + json.dumps([analysis, [codes, calls, attributes, saturated]]).encode()
    elif how == "short-callee":
        attributes[0][3] = [["code", "pkg.helpers"]]
        damaged = header + b"\n" + json.dumps([analysis, [codes, calls, attributes, saturated]]).encode()
    else:
        codes[0] = [7, "", "module"]
        damaged = header + b"\n" + json.dumps([analysis, [codes, calls, attributes, saturated]]).encode()
    entry.write_bytes(damaged)
    assert _pycg(project.parent / "again.json") == clean
    assert entry.read_bytes() == data  # the miss rewrote it


def test_a_damaged_entry_is_a_miss_for_the_reader_itself(project: Path) -> None:
    _pycg(project.parent / "cold.json")
    source = (project / "main.py").read_bytes()
    cache = parse.SummaryCache(parse.cache_dir())
    digest = blake3(source).hexdigest()
    assert cache.get_facts(digest) == flow_facts(ast.parse(source))
    entry = next(p for p in _facts_entries() if p.name.startswith(digest[2:]))
    _damage(entry, "truncated")
    assert cache.get_facts(digest) is None


def test_every_fixture_survives_the_stored_form() -> None:
    cases = sorted((Path(__file__).parent / "callgraph").rglob("*.py"))
    assert len(cases) > 90
    for path in cases:
        facts = flow_facts(ast.parse(path.read_bytes()))
        stored = json.loads(json.dumps(FACTS_SHAPE.encode(facts)))
        assert FACTS_SHAPE.decode(stored) == facts, path
