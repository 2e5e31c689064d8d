"""The families oracle's data: a case, what one run of it observed, and the verdict rules.

Contract
--------
A :class:`Case` is a small kernel package (its files, written into a temp directory under a
unique package name: ``{PKG}`` in a file is replaced by that name), the callable a caller
calls (``target``: ``module.attr``, looked up again at every call as ``mod.attr(...)`` code
does), and Python statements: ``setup`` (after import, before the baseline), ``mutate`` (the
change; it may call ``call()`` for intermediate calls, which are judged too), ``startup``
(what a new process runs after import to be in the mutated state: ``None`` means
``mutate``, ``""`` means the files on disk carry it) and ``restore`` (state outside the
package, put back). ``reaches`` says what the case means to test: ``True`` a change that
reaches the IR, ``False`` a NEUTRAL one (a retrace is WASTED, a raise an ERROR), ``None``
either (an A-B-A race, an undo). FlyDSL's IR key of a fresh plain trace decides, never
``reaches``: a case whose truth disagrees with it is INVALID (reported, not counted).

:func:`judge` is the verdict of one observed call (:class:`Call`): the IR it ran (the new
entry of a retrace; the entry a hit or an index load served) against the truth.

* ``STALE``: served IR that a fresh trace of the current state does not give;
* ``ERROR``: a raise (other than ``GlobalDriftError`` for a change that reaches the IR), a
  traced entry with another IR than the fresh trace, a trace count over the case's limit,
  a retrace where the case requires a hit on the original entry, a harness failure;
* ``RAISED``: ``GlobalDriftError`` for a change that reaches the IR (the default policy);
* ``WASTED``: a retrace after a neutral change (reported, not failed);
* ``INVALID``: the case does not test what it says (truth disagrees with ``reaches``), or
  the mutated code does not trace under plain FlyDSL either;
* ``OK``: otherwise.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field

VERDICTS = ("OK", "STALE", "ERROR", "RAISED", "WASTED", "INVALID")
# The worst verdict of a case's calls is the case's verdict.
SEVERITY = ("STALE", "ERROR", "INVALID", "RAISED", "WASTED", "OK")
DECISIONS = ("hit", "retrace", "loaded", "drift", "error")


@dataclass(frozen=True)
class Case:
    family: str
    name: str
    files: tuple[tuple[str, str], ...]  # (path relative to the package root, text with {PKG})
    mutate: str
    reaches: bool | None
    what: str  # one line: what changes
    target: str = "kern.launch"
    setup: str = ""
    startup: str | None = None
    restore: str = ""
    new_process: bool = True
    baseline_calls: bool = True  # False: the first call happens inside ``mutate`` (a race)
    cold: bool = False  # the launcher's first call runs before the baseline's plain trace
    expect_hit: bool = False  # the judged call must hit an existing entry (an undo)
    max_traces: int | None = None  # FlyDSL traces allowed over the judged call and two more
    control: bool = False  # must come out STALE (the oracle's proof it can fail)
    # A documented limit (docs/guarantees.md names the case, the reason and the workaround):
    # its STALE is reported on a line of its own, never counted as a family's and never hidden.
    limit: str = ""
    written: str = "before-tuning"

    @property
    def label(self) -> str:
        return f"{self.family}/{self.name}"


@dataclass(frozen=True)
class Call:
    """One observed call: what the launcher did and what a fresh plain trace says."""

    label: str
    decision: str  # DECISIONS
    served: str | None  # IR key the call ran (None: unknown, or nothing ran)
    truth: str | None  # fresh plain trace's IR key (None: plain FlyDSL fails too)
    base: str | None  # the baseline IR key
    note: str = ""
    traces: int | None = None  # FlyDSL traces counted around the call (max_traces cases)


@dataclass(frozen=True)
class Outcome:
    case: str  # Case.label
    family: str
    verdict: str  # in-memory verdict (the judged call, checkpoints, the fresh start)
    process: str | None  # new-process verdict, None when not run
    note: str = ""
    seconds: float = 0.0
    calls: tuple[dict, ...] = ()
    facts: dict = field(default_factory=dict)


def judge(
    call: Call, reaches: bool | None, *, expect_hit: bool = False, max_traces: int | None = None
) -> tuple[str, str]:
    """(verdict, why) of one observed call; see the module docstring."""
    if call.decision not in DECISIONS:
        raise ValueError(f"Call.decision must be one of {DECISIONS}, got {call.decision!r}")
    changed = call.truth is not None and call.truth != call.base
    if call.truth is None:
        return (
            ("STALE", "served a binary for code that no longer traces")
            if call.decision in ("hit", "loaded")
            else (
                "INVALID",
                "the mutated code does not trace under plain FlyDSL either",
            )
        )
    if call.decision == "error":
        return "ERROR", f"raised: {call.note}"
    if call.decision == "drift":
        return (
            ("RAISED", call.note) if changed else ("ERROR", f"GlobalDriftError though the IR is unchanged: {call.note}")
        )
    if call.served is not None and call.served != call.truth:
        if call.decision in ("hit", "loaded"):
            return "STALE", f"{call.decision}: served IR {call.served[:10]}, a fresh trace gives {call.truth[:10]}"
        return "ERROR", f"traced IR {call.served[:10]}, a fresh plain trace gives {call.truth[:10]}"
    if max_traces is not None and call.traces is not None and call.traces > max_traces:
        return "ERROR", f"{call.traces} FlyDSL traces, at most {max_traces} expected"
    if expect_hit and call.decision == "retrace":
        return "ERROR", "retraced where the original entry should serve"
    if (reaches is True and not changed) or (reaches is False and changed):
        return (
            "INVALID",
            f"the case means reaches={reaches}, a fresh trace says the IR {'changed' if changed else 'did not change'}",
        )
    if call.decision == "retrace" and reaches is False:
        return "WASTED", "retraced after a neutral change"
    return "OK", ""


def worst(verdicts: list[tuple[str, str]]) -> tuple[str, str]:
    """The most severe (verdict, why) of several; OK when empty."""
    if not verdicts:
        return "OK", ""
    return min(verdicts, key=lambda v: SEVERITY.index(v[0]))


def outcome_to_json(o: Outcome) -> str:
    return json.dumps(asdict(o))


def outcome_from_json(line: str) -> Outcome:
    doc = json.loads(line)
    doc["calls"] = tuple(doc["calls"])
    return Outcome(**doc)
