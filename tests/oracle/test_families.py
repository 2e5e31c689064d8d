"""Issue 35's oracle families in CI: every case on real FlyDSL compiles, 0 STALE and 0 ERROR
per family, and the control caught as STALE.

The run is ``tests/oracle/families/run.py`` (every case in memory and at a fresh start from
the persistent index; new processes for a stratified subset, ``--new-process-per-family``,
which keeps the run near two minutes on two cores; the whole set takes 4.5-7 minutes).
``ORACLE_FAMILIES_OUTCOMES`` may name the JSON-lines file of such a run made just before. It is
the bar, not a report: a case is kept out of its family's count only as a documented limit
(``Case.limit``), named in docs/guarantees.md with its reason and workaround.
The verdict rules themselves are unit-tested below without compiling anything.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flydsl")
pytestmark = pytest.mark.flydsl

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from families.model import Call, judge, outcome_from_json, worst  # noqa: E402
from families.registry import FAMILIES, family_cases  # noqa: E402

RUN = [sys.executable, str(HERE / "families" / "run.py")]
COUNTED = [f for f in FAMILIES if f != "control"]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory: pytest.TempPathFactory) -> list:
    ready = os.environ.get("ORACLE_FAMILIES_OUTCOMES")
    if ready and Path(ready).is_file():
        return [outcome_from_json(line) for line in Path(ready).read_text().splitlines()]
    out = tmp_path_factory.mktemp("families") / "outcomes.jsonl"
    proc = subprocess.run(
        [*RUN, "--new-process", "--new-process-per-family", "3", "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    print(proc.stdout[-8000:], proc.stderr[-3000:])
    assert out.exists(), f"the families run wrote no outcomes (exit {proc.returncode}):\n{proc.stderr[-3000:]}"
    return [outcome_from_json(line) for line in out.read_text().splitlines()]


def _listing(rows: list, verdict: str) -> str:
    return "\n".join(
        f"{o.case}: memory {o.verdict}, new process {o.process}: {o.note[:300]}"
        for o in rows
        if verdict in (o.verdict, o.process)
    )


def test_every_case_of_every_family_ran(outcomes: list) -> None:
    expected = {c.label for f in FAMILIES for c in family_cases(f)}
    assert {o.case for o in outcomes} == expected
    assert all(len(family_cases(f)) >= 6 for f in COUNTED)
    assert all(c.written == "before-tuning" for f in FAMILIES for c in family_cases(f))
    assert any(o.process is not None for o in outcomes), "no case ran in a new process"


LIMITS = {c.label: c.limit for f in FAMILIES for c in family_cases(f) if c.limit}


@pytest.mark.parametrize("family", COUNTED)
def test_family_is_never_stale(outcomes: list, family: str) -> None:
    rows = [o for o in outcomes if o.family == family and o.case not in LIMITS]
    assert not [o for o in rows if "STALE" in (o.verdict, o.process)], _listing(rows, "STALE")


@pytest.mark.parametrize("family", COUNTED)
def test_family_has_no_error(outcomes: list, family: str) -> None:
    rows = [o for o in outcomes if o.family == family]
    assert not [o for o in rows if "ERROR" in (o.verdict, o.process)], _listing(rows, "ERROR")


def test_control_behind_computed_getattr_is_stale(outcomes: list) -> None:
    control = [o for o in outcomes if o.family == "control"]
    assert control, "the control family did not run"
    assert all(o.verdict == "STALE" for o in control), [(o.case, o.verdict, o.note) for o in control]
    assert all(o.process == "STALE" for o in control if o.process is not None), [
        (o.case, o.process, o.note) for o in control
    ]
    # the fresh start from the persistent index sees it too
    assert all(any(c["label"] == "fresh start" and c["served"] != c["truth"] for c in o.calls) for o in control)


def _call(decision: str, served: str | None, truth: str | None, base: str = "B", traces: int | None = None) -> Call:
    return Call("c", decision, served, truth, base, "why", traces)


@pytest.mark.parametrize(
    ("call", "reaches", "kw", "expected"),
    [
        (_call("hit", "B", "T"), True, {}, "STALE"),
        (_call("loaded", "B", "T"), None, {}, "STALE"),
        (_call("hit", "B", None), True, {}, "STALE"),  # served a binary for code that no longer traces
        (_call("retrace", "X", "T"), True, {}, "ERROR"),  # traced IR another than plain FlyDSL's
        (_call("error", None, "B"), False, {}, "ERROR"),
        (_call("drift", None, "B"), False, {}, "ERROR"),  # a raise for a change that does not reach the IR
        (_call("drift", None, "T"), True, {}, "RAISED"),
        (_call("retrace", "B", "B"), False, {}, "WASTED"),
        (_call("retrace", "B", "B"), None, {}, "OK"),
        (_call("retrace", "B", "B"), False, {"expect_hit": True}, "ERROR"),
        (_call("retrace", "B", "B", traces=2), None, {"max_traces": 1}, "ERROR"),
        (_call("hit", "B", "B"), True, {}, "INVALID"),  # the case does not change what it claims to
        (_call("retrace", "T", "T"), False, {}, "INVALID"),
        (_call("error", None, None), True, {}, "INVALID"),
        (_call("retrace", "T", "T"), True, {}, "OK"),
    ],
)
def test_judge_rules(call: Call, reaches: bool | None, kw: dict, expected: str) -> None:
    assert judge(call, reaches, **kw)[0] == expected


def test_judge_rejects_an_unknown_decision_and_worst_orders_by_severity() -> None:
    with pytest.raises(ValueError, match="Call.decision must be one of"):
        judge(_call("miss", "B", "B"), None)
    assert worst([("OK", ""), ("WASTED", "w"), ("STALE", "s"), ("ERROR", "e")]) == ("STALE", "s")
    assert worst([]) == ("OK", "")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--family", "nope"], "--family 'nope': not a family"),
        (["--jobs", "0"], "--jobs must be at least 1"),
    ],
)
def test_bad_arguments_exit_2_naming_the_argument(argv: list[str], message: str) -> None:
    proc = subprocess.run([*RUN, *argv], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert message in proc.stderr


def test_every_documented_limit_is_named_in_the_guarantees() -> None:
    """A case kept out of its family's count must be a limit the user can read about: its
    label, in docs/guarantees.md, beside the reason and the workaround."""
    text = (HERE.parents[1] / "docs" / "guarantees.md").read_text()
    assert LIMITS, "no documented limit: drop this test with the last one"
    assert all(label in text for label in LIMITS), [label for label in LIMITS if label not in text]
