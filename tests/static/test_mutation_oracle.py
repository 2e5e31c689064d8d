"""The static mutation oracle: systematic edits against what the edited code can run.

For every example package (``examples/kernels``: attention, norm, common, the builder
shapes and realworld; the fixture repositories; the src-layout fixture), each file gets
single edits (:mod:`mutations`): semantic ones (constant, operator, compare, called attribute, default value, decorator
argument, module constant, class field), cosmetic ones (comment, docstring, blank line,
re-wrapped call) and an unrelated function. Each edited tree is analysed statically (the
file is only replaced in memory) and every root's transitive digest is compared with the
unedited one. Ground truth comes from the compiled code objects, never from the analyzer
(:mod:`oracle_reach`): which units (function codes, module-level statements) the edit
changes, and which of them each root's build can run.

* a semantic edit of a unit a root can run must change that root's digest (else: a false
  negative);
* a cosmetic edit, an unrelated function, or a semantic edit no root can run must change
  no root's digest (else: a false positive).

``python -m pytest tests/static/test_mutation_oracle.py -s`` prints the counts that
docs/guarantees.md reports.
"""

from __future__ import annotations

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mutations import COSMETIC, UNRELATED, Edit, Overlay, edits
from oracle_reach import Reach, changed_units

from flydeps.static.analyze import analyze
from flydeps.static.project import FileSystemTree

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
EXAMPLES = HERE.parents[1] / "examples"

# (name, sys.path entry for the live import, paths analysed, directories whose files are edited)
CASES = [
    (
        "examples",
        EXAMPLES,
        [EXAMPLES / "kernels" / d for d in ("attention", "norm", "builders", "realworld")],
        [EXAMPLES / "kernels" / d for d in ("attention", "norm", "builders", "common", "realworld")],
    ),
    ("kernelrepo", FIXTURES, [FIXTURES / "kernelrepo"], [FIXTURES / "kernelrepo"]),
    ("plainpkg", FIXTURES, [FIXTURES / "plainpkg"], [FIXTURES / "plainpkg"]),
    ("srcrepo", FIXTURES / "srcrepo" / "src", [FIXTURES / "srcrepo"], [FIXTURES / "srcrepo" / "src"]),
]


@dataclass
class Results:
    counts: Counter = field(default_factory=Counter)
    false_negatives: list[str] = field(default_factory=list)
    false_positives: list[str] = field(default_factory=list)
    covered: set[tuple[str, str]] = field(default_factory=set)  # (unit module, unit key) a root ran


def _digests(paths: list[Path], tree: FileSystemTree | None = None) -> dict[str, str]:
    result = analyze([str(p) for p in paths], tree=tree)
    return {root: result.digests[root] for root in result.graph.roots}


def _run_case(results: Results, base: Path, paths: list[Path], edited: list[Path]) -> None:
    baseline = analyze([str(p) for p in paths])
    project = baseline.project
    before = {root: baseline.digests[root] for root in baseline.graph.roots}
    files = {}
    for directory in edited:
        for py_path in sorted(directory.rglob("*.py")):
            module = project.module_for_path(str(py_path))
            if module is not None:
                files[module.name] = str(py_path)
    reach = Reach({m.partition(".")[0] for m in files}, files)
    for module, path in files.items():  # type: ignore[assignment]
        data = Path(path).read_bytes()
        for edit in edits(path, data):
            after = _digests(paths, Overlay(path, edit.source))
            _judge(results, reach, before, after, module, data, edit)  # type: ignore[arg-type]


def _judge(results: Results, reach: Reach, before: dict, after: dict, module: str, data: bytes, edit: Edit) -> None:
    what = f"{edit.path}:{edit.line} {edit.kind}: {edit.text}"
    changed = {r for r in before if after.get(r) != before[r]}
    if edit.semantic:
        units = changed_units(module, edit.path, data, edit.source, edit.statement, edit.line)
        runnable = {r for r in before if units & reach.of_root(r)}
        kind = "semantic" if runnable else ("semantic, no root can run it" if units else "semantic, no code changed")
        results.counts[kind] += 1
        for root in sorted(runnable - changed):
            results.false_negatives.append(f"{what}: {root} can run {sorted(units)} but its digest is unchanged")
        results.counts[edit.kind] += 1
        if runnable:
            results.covered.update((m, k) for _, m, k in units)
            return
    else:
        results.counts["cosmetic" if edit.kind in COSMETIC else "unrelated"] += 1
        results.counts[edit.kind] += 1
    results.false_positives.extend(f"{what}: digest of {root} changed" for root in sorted(changed))


@pytest.fixture(scope="module")
def results() -> Results:
    pytest.importorskip("flydsl")
    out = Results()
    for _, base, paths, edited in CASES:
        sys.path.insert(0, str(base))
        before = set(sys.modules)
        try:
            _run_case(out, base, paths, edited)
        finally:
            sys.path.remove(str(base))
            for name in set(sys.modules) - before:  # the imported package: later tests import their own
                if name.partition(".")[0] in ("kernels", "kernelrepo", "plainpkg", "mk"):
                    del sys.modules[name]
    total = sum(out.counts[k] for k in ("semantic", "semantic, no root can run it", "semantic, no code changed"))
    total += out.counts["cosmetic"] + out.counts["unrelated"]
    out.counts["total"] = total
    print("\nstatic mutation oracle:", dict(sorted(out.counts.items())))
    return out


def test_no_false_negatives(results: Results) -> None:
    assert not results.false_negatives, "\n".join(results.false_negatives[:40])


def test_no_false_positives(results: Results) -> None:
    assert not results.false_positives, "\n".join(results.false_positives[:40])


def test_enough_edits_of_every_kind_and_shape(results: Results) -> None:
    assert results.counts["total"] >= 300
    assert results.counts["semantic"] >= 150
    for kind in (*COSMETIC, UNRELATED):
        assert results.counts[kind] >= 3, kind
    shapes = {
        ("kernels.builders.softmax", "build_softmax_module"),  # builder locals read by a nested kernel
        ("kernels.builders.structs", "build_tile_copy"),  # a nested @fx.struct body
        ("kernels.builders.patched", "_TensorWithIndex.copy"),  # patched after the class statement
        ("kernels.builders.patched", "_TensorWithIndex.__init__"),
        ("kernels.builders.compat", "fast_exp2"),  # except ImportError fallback
        ("kernels.builders.softmax", "_build_softmax"),  # delegating lru_cache factory
        ("kernels.builders.patched", "BLOCK"),  # a decorator argument's global
        ("mk.common.mem", "load"),  # src layout, absolute import of the own package
    }
    assert shapes <= results.covered, sorted(shapes - results.covered)
