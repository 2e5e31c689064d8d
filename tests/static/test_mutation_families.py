"""The static mutation oracle's construct families (issue 37, classes 1-3).

Each case of :mod:`mutation_families` is a small kernel package written to a temporary
directory; the layernorm and rmsnorm builders are analysed statically before and after one
edit (the edited file replaced in memory, :class:`mutations.Overlay`, as the systematic
oracle does), and each builder's transitive digest is judged against the case's answer:

* ``change`` and the digest is unchanged: a false negative (``flydeps diff`` would say
  "nothing to rebuild" for a trace that changed);
* ``same`` and the digest changed: a false positive;
* ``conservative``: either is accepted, and a changed digest is counted as a conservative
  rebuild.

``python -m pytest tests/static/test_mutation_families.py -s`` prints the table that
docs/guarantees.md reports.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from mutation_families import CASES, EXPECTATIONS, FAMILIES, OTHER, ROOT, Case, edited, package
from mutations import Overlay

from flydeps.static.analyze import analyze
from flydeps.static.project import FileSystemTree


@dataclass
class Verdicts:
    counts: Counter = field(default_factory=Counter)  # (family, what)
    false_negatives: dict[int, list[str]] = field(default_factory=dict)
    false_positives: dict[int, list[str]] = field(default_factory=dict)


def _digests(base: Path, tree: FileSystemTree | None = None) -> dict[str, str]:
    norm = base / "fk" / "norm.py"
    paths = [f"{norm}::{root.partition(':')[2]}" for root in (ROOT, OTHER)]
    result = analyze(paths, tree=tree, use_cache=False)
    return {root: result.digests[root] for root in result.graph.roots}


def _judge(verdicts: Verdicts, case: Case, before: dict[str, str], after: dict[str, str]) -> None:
    what = f"family {case.family} {case.name!r} ({case.edit[0]}: {case.edit[1]!r} -> {case.edit[2]!r})"
    for root, expect in ((ROOT, case.expect), (OTHER, case.other)):
        changed = before[root] != after[root]
        verdicts.counts[case.family, expect] += 1
        if expect == "change" and not changed:
            verdicts.false_negatives.setdefault(case.family, []).append(f"{what}: {root} digest unchanged")
        elif expect == "same" and changed:
            verdicts.false_positives.setdefault(case.family, []).append(f"{what}: {root} digest changed")
        elif expect == "conservative" and changed:
            verdicts.counts[case.family, "conservative rebuild"] += 1


def _run(tmp: Path) -> Verdicts:
    verdicts = Verdicts()
    for n, case in enumerate(CASES):
        base = tmp / f"case{n}"
        files = package(case)
        for rel, text in files.items():
            (base / rel).parent.mkdir(parents=True, exist_ok=True)
            (base / rel).write_text(text)
        before = _digests(base)
        overlay = Overlay(str(base / case.edit[0]), edited(case, files).encode())
        _judge(verdicts, case, before, _digests(base, overlay))
    return verdicts


def _table(verdicts: Verdicts) -> str:
    head = ("family", "edits", "must change", "must not change", "conservative (rebuilt)", "false neg.", "false pos.")
    rows = ["| " + " | ".join(head) + " |"]
    rows.append("|---|---|---|---|---|---|---|")
    for family in FAMILIES:
        c = verdicts.counts
        edits = sum(1 for case in CASES if case.family == family)
        rows.append(
            f"| {family} | {edits} | {c[family, 'change']} | {c[family, 'same']} | "
            f"{c[family, 'conservative']} ({c[family, 'conservative rebuild']}) | "
            f"{len(verdicts.false_negatives.get(family, []))} | {len(verdicts.false_positives.get(family, []))} |"
        )
    return "\n".join(rows)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> Verdicts:
    out = _run(tmp_path_factory.mktemp("families"))
    print("\nstatic mutation oracle, construct families (digests of both builders per edit):\n" + _table(out))
    return out


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_false_negatives(verdicts: Verdicts, family: int) -> None:
    assert not verdicts.false_negatives.get(family), "\n".join(verdicts.false_negatives[family])


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_no_false_positives(verdicts: Verdicts, family: int) -> None:
    assert not verdicts.false_positives.get(family), "\n".join(verdicts.false_positives[family])


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.family}-{c.name}")
def test_case_is_well_formed(case: Case) -> None:
    """Each edit is one compiling change of real code, with a stated answer."""
    files = package(case)
    new = edited(case, files)
    assert new != files[case.edit[0]]
    for text in (files[case.edit[0]], new, *files.values()):
        compile(text, case.edit[0], "exec", dont_inherit=True)
    assert case.expect in EXPECTATIONS and case.other in EXPECTATIONS
    assert case.family in FAMILIES
    assert (case.expect == "conservative") == bool(case.why), "a conservative case says why, and only it"


def test_every_family_has_both_answers() -> None:
    for family in FAMILIES:
        expects = Counter(c.expect for c in CASES if c.family == family)
        assert expects["change"] >= 10 and expects["same"] >= 1, (family, expects)


def test_an_edit_that_is_not_there_is_refused() -> None:
    case = CASES[0]
    broken = Case(case.family, "missing", case.snippet, case.use, (case.edit[0], "NOT_IN_FILE", "x"), "change")
    with pytest.raises(ValueError, match="occurs 0 times"):
        edited(broken, package(broken))
