"""The mutation oracle in CI: a stratified subset on real FlyDSL compiles, and the harness' own rules.

The subset (every mutation kind, two each, plus the control) runs in worker processes as
``tests/oracle/run.py --fast`` does (``.ci/run`` runs that command first and hands its
outcomes over in ``FLYDEPS_ORACLE_OUTCOMES``); the test reads every outcome and asserts the issue 7
bar: STALE == 0, ERROR == 0, WASTED <= 2 % of the counted mutations after a mutation that
changes nothing the trace reads (``model.is_neutral``; a retrace after an input change that
does not reach the IR is reported by ``run.py``, not gated), and the control (a
helper behind a computed ``getattr``, which no analysis can see) caught as STALE -- the
proof that this test can fail. The full table is ``python tests/oracle/run.py --all``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("flydsl")
pytestmark = pytest.mark.flydsl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from model import Mutation, is_neutral, neutral_group, outcome_from_json, verdict  # noqa: E402
from run import split  # noqa: E402
from sites import source_sites, used_names  # noqa: E402

RUN = [sys.executable, str(HERE / "run.py")]


@pytest.fixture(scope="module")
def fast_outcomes(tmp_path_factory: pytest.TempPathFactory) -> list:
    ready = os.environ.get("FLYDEPS_ORACLE_OUTCOMES")
    if ready and Path(ready).is_file():  # .ci/run ran the same subset just before (and printed its table)
        return [outcome_from_json(line) for line in Path(ready).read_text().splitlines()]
    out = tmp_path_factory.mktemp("oracle") / "outcomes.jsonl"
    proc = subprocess.run(
        [*RUN, "--fast", "--per-kind", "2", "--json", str(out)], capture_output=True, text=True, timeout=1200
    )
    print(proc.stdout[-6000:], proc.stderr[-3000:])
    assert out.exists(), f"the oracle wrote no outcomes (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    return [outcome_from_json(line) for line in out.read_text().splitlines()]


def _listing(outcomes: list, verdicts: tuple[str, ...]) -> str:
    return "\n".join(f"{o.verdict} {o.mutation.label}: {o.note[:200]}" for o in outcomes if o.verdict in verdicts)


def _counted(outcomes: list) -> tuple[list, int]:
    main, _limits, _control = split(outcomes)
    return main, sum(o.verdict in ("OK", "STALE", "WASTED", "RAISED") for o in main)


def test_fast_subset_covers_every_kind_without_harness_errors(fast_outcomes: list) -> None:
    main, _ = _counted(fast_outcomes)
    assert len(main) >= 50 and len({o.mutation.kind for o in main}) >= 25
    assert not [o for o in main if o.verdict == "ERROR"], _listing(main, ("ERROR",))


def test_fast_subset_tries_each_subject_with_each_kind_of_neutral_mutation(fast_outcomes: list) -> None:
    # A miss for nothing follows a subject's shape (an instance keyed by its state, a data
    # file): every subject gets its cosmetic edits, reloads, identical copies, equal rebinds.
    main, _ = _counted(fast_outcomes)
    groups: dict[str, set[str]] = {}
    for o in main:
        group = neutral_group(o.mutation)
        if group is not None:
            groups.setdefault(o.mutation.subject, set()).add(group)
    assert len(groups) >= 6, sorted(groups)
    thin = {subject: sorted(found) for subject, found in groups.items() if len(found) < 5}
    assert not thin, thin


def test_fast_subset_is_never_stale(fast_outcomes: list) -> None:
    main, _ = _counted(fast_outcomes)
    assert not [o for o in main if o.verdict == "STALE"], _listing(main, ("STALE",))


def test_fast_subset_rarely_retraces_after_a_neutral_mutation(fast_outcomes: list) -> None:
    main, counted = _counted(fast_outcomes)
    neutral = [o for o in main if o.verdict == "WASTED" and is_neutral(o.mutation)]
    assert len(neutral) <= 0.02 * counted, _listing(neutral, ("WASTED",))


def test_control_behind_computed_getattr_is_caught_as_stale(fast_outcomes: list) -> None:
    _main, _limits, control = split(fast_outcomes)
    assert control, "the control subject was not run"
    assert all(o.verdict == "STALE" for o in control), _listing(control, ("OK", "WASTED", "RAISED", "INVALID", "ERROR"))
    # ... and a fresh start in the control's mutated state is served the baseline's row: the
    # fresh-start check sees that too (it is not blind)
    assert all(o.facts.get("fresh_stale") and o.facts.get("fresh_loaded") for o in control), [
        (o.mutation.kind, o.facts) for o in control
    ]


@pytest.mark.parametrize(
    ("decision", "changed", "failed", "data", "expected"),
    [
        ("hit", True, False, True, "STALE"),
        ("hit", False, True, True, "STALE"),  # served a binary for code that no longer traces
        ("retrace", False, False, True, "WASTED"),
        ("retrace", True, False, True, "OK"),
        ("hit", False, False, True, "OK"),
        ("drift", False, False, True, "RAISED"),  # the user's own data change, policy raise
        ("drift", False, False, False, "WASTED"),  # refused though nothing the user did changed the IR
        ("error", False, True, True, "INVALID"),
        ("error", False, False, True, "ERROR"),
    ],
)
def test_verdict_rules(decision: str, changed: bool, failed: bool, data: bool, expected: str) -> None:
    assert verdict(decision, ir_changed=changed, truth_failed=failed, user_data=data) == expected


def test_verdict_and_mutation_reject_unknown_values() -> None:
    with pytest.raises(ValueError, match="decision must be one of"):
        verdict("miss", ir_changed=False, truth_failed=False)
    with pytest.raises(ValueError, match="Mutation.op must be one of"):
        Mutation("k", "rmsnorm", "norms", "rename", "w", "d")


def test_source_sites_are_exact_single_span_edits() -> None:
    text = 'import os\n\nK = 3\n\n\ndef f(x, s=1.0):\n    """Doc."""\n    return x * K + os.getenv("A", "0") == "1"\n'
    import ast

    sites = source_sites(text, used_names([ast.parse(text)]) | {"f"})
    kinds = Counter(s.kind for s in sites)
    assert kinds["cosmetic: docstring"] == kinds["cosmetic: comment"] == kinds["cosmetic: blank line"] == 1
    assert kinds["module constant (edit)"] == 1 and kinds["default value (edit)"] == 1
    assert kinds["edit+reload"] >= 5  # * and + and ==, "0" and "1" (the env name is renamed too)
    for site in sites:
        assert text[site.start : site.end] == site.old
        edited = text[: site.start] + site.new + text[site.end :]
        compile(edited, "<edited>", "exec")  # every generated edit is valid Python


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--all", "--subject", "nope"], "--subject 'nope': not a subject"),
        (["--fast", "--kind", "no such kind"], "--kind 'no such kind' is not a planned kind"),
        (["--all", "--jobs", "0"], "--jobs, --batch and --per-kind must be at least 1"),
        ([], "one of the arguments --all --fast --list is required"),
    ],
)
def test_bad_arguments_exit_2_naming_the_argument(argv: list[str], message: str) -> None:
    proc = subprocess.run([*RUN, *argv], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_data_file_edits_change_one_value_each_and_restore_exactly(tmp_path: Path) -> None:
    import json

    from plan import _data
    from subjects import BY_NAME
    from worker import PackageCopy

    pkg = PackageCopy(tmp_path)
    try:
        mutations = _data(BY_NAME["tuned"], pkg.root)
        kinds = Counter(m.kind for m in mutations)
        tables = sorted((pkg.root / "tuning").glob("*.json"))
        assert len(tables) >= 2 and kinds["data file: a table added to the directory"] == 1
        assert kinds["data file: removed"] == kinds["data file: reformatted, same values"] == len(tables)
        for m in mutations:
            rel, new = m.payload
            path = pkg.root / rel
            before = path.read_bytes() if path.exists() else None
            if m.kind == "data file: value edited":  # exactly one leaf differs, formatted alike
                old_doc, new_doc = json.loads(before or b""), json.loads(new)
                flat = [(k, w, v[w]) for k, v in old_doc.items() for w in v]
                assert sum(new_doc[k][w] != value for k, w, value in flat) == 1
                assert json.dumps(new_doc, indent=2) + "\n" == new
            elif m.kind.startswith("cosmetic:"):
                assert new.encode() == before
            with pkg.data_edited(rel, new):
                assert (path.read_text() if path.exists() else None) == new
            assert (path.read_bytes() if path.exists() else None) == before
    finally:
        pkg.drop()


def test_a_data_file_the_plan_cannot_edit_exactly_is_named(tmp_path: Path) -> None:
    from plan import _data
    from subjects import BY_NAME

    (tmp_path / "tuning").mkdir()
    (tmp_path / "tuning" / "gfx942.json").write_text('{"4": {"scale": 0.5}}')  # not as json.dumps(indent=2) writes it
    with pytest.raises(ValueError, match=r"gfx942\.json: write it as json\.dumps"):
        _data(BY_NAME["tuned"], tmp_path)
