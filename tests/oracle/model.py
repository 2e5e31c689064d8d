"""The oracle's data: a mutation, the outcome of running one, and the verdict rules.

Contract
--------
A :class:`Mutation` is plain data (JSON round-trip through :func:`mutation_from_json`) so the
planner, the workers and the report can live in different processes. ``op`` says how it is
applied (:mod:`apply`), ``payload`` carries what ``op`` needs, ``base_env`` / ``base_args``
set up the baseline the mutation starts from (e.g. debug info on, or ``eps=0.0`` before
``eps=-0.0``).

:func:`verdict` is the whole judgement, from two facts only: did flydsl_runtime retrace
(its ``cache_info().misses`` moved) and did FlyDSL's own IR key of a fresh trace change.

* ``STALE``: the IR changed (or the mutated code no longer traces) and the launcher answered
  from its cache;
* ``WASTED``: the launcher retraced and the IR is the one it already had;
* ``RAISED``: the launcher refused with ``GlobalDriftError`` (its ``on_drift="raise"``
  policy: never stale, listed apart) on a user's own data change, or on any change that
  did change the IR. A refusal when nothing the user did changed the IR (another
  launcher's trace wrote shared data, a reload) is ``WASTED``;
* ``OK``: retraced for a changed IR, or a hit for an unchanged one;
* ``INVALID``: the mutated code does not trace under plain FlyDSL either (not counted);
* ``ERROR``: anything else (the launcher raised while FlyDSL traced fine, the launcher's new
  IR differs from the fresh trace's, the baseline was unstable, a restore was not exact).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any

VERDICTS = ("OK", "STALE", "WASTED", "RAISED", "INVALID", "ERROR")

OPS = (
    "edit",  # payload: [relpath, start, end, old, new]; rewrite the file, reload the module
    "reload",  # payload: []; reload the module without an edit
    "setattr",  # payload: [steps, name, value-spec]; rebind an attribute of a live object
    "setitem",  # payload: [steps, key, value-spec]; write into a live dict/list
    "code",  # payload: [steps, variant-source-edit]; swap a function's __code__
    "patch",  # payload: [name, variant-source-edit or null]; monkeypatch a module function
    "defaults",  # payload: [steps, index, value-spec]
    "kwdefaults",  # payload: [steps, name, value-spec]
    "cell",  # payload: [steps, freevar, value-spec]; write a closure cell
    "env",  # payload: [name, value]; set an environment variable
    "args",  # payload: [param, value-spec]; the caller passes another argument
    "other",  # payload: [subject, width]; another managed launcher traces first
    "data",  # payload: [relpath, new text or null]; rewrite, create or remove a data file of the package
)


@dataclass(frozen=True)
class Mutation:
    kind: str  # the table row
    subject: str
    module: str  # short module name in the real-world package ('' for env/args)
    op: str
    where: str  # file:line or object path, for humans
    detail: str  # what changes, for humans
    payload: tuple = ()
    base_env: tuple = ()  # ((name, value), ...) set before the baseline and kept during the run
    base_args: tuple = ()  # ((param, value-spec), ...) keyword arguments of the baseline call

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise ValueError(f"Mutation.op must be one of {OPS}, got {self.op!r}")

    @property
    def label(self) -> str:
        return f"[{self.subject}] {self.kind}: {self.where} {self.detail}"


@dataclass(frozen=True)
class Outcome:
    """What one run of one mutation observed."""

    mutation: Mutation
    verdict: str
    decision: str = ""
    ir_changed: bool = False
    note: str = ""
    seconds: float = 0.0
    facts: dict = field(default_factory=dict)


DECISIONS = ("hit", "retrace", "drift", "error")


# Mutations that are a user's own write of data: on_drift="raise" may refuse them.
DATA_OPS = frozenset({"setattr", "setitem", "cell", "defaults", "kwdefaults"})
DATA_EDIT_KINDS = frozenset(
    {"module constant (edit)", "class attribute (edit)", "default value (edit)", "decorator argument"}
)
# Edits of one line of code: the worker records whether that line ran during the baseline trace.
LINE_EDIT_KINDS = frozenset({"edit+reload", "keyword names"})


def is_user_data(m: Mutation) -> bool:
    return m.op in DATA_OPS or m.kind in DATA_EDIT_KINDS


# Mutations that change nothing the trace reads (cosmetic edits, a reload without edit, an
# unrelated function or variable, an identical copy, an equal value, another launcher's
# trace, an equivalent call): a retrace or a refusal after one of these is a defect.
# Every other kind changes an input the trace reads (code it runs, a value, an argument, an
# environment variable it read); when that input does not reach the IR (a branch not taken,
# a memoized result, a host-side string) a retrace is the price of keying by inputs.
NEUTRAL_PREFIXES = (
    "cosmetic:",
    "reload: no edit",
    "unrelated function",
    "monkeypatch: identical copy",
    "env var (unrelated)",
)
NEUTRAL_SUFFIXES = ("equal value rebound", "(other launcher)", "call form")


def is_neutral(m: Mutation) -> bool:
    return neutral_group(m) is not None


def neutral_group(m: Mutation) -> str | None:
    """Which of the neutral prefixes or suffixes ``m``'s kind has, or None (not neutral)."""
    for group in NEUTRAL_PREFIXES:
        if m.kind.startswith(group):
            return group
    for group in NEUTRAL_SUFFIXES:
        if m.kind.endswith(group):
            return group
    return None


def dead_code(o: Outcome) -> bool:
    """A WASTED edit of a line the baseline trace never ran (a branch not taken): a key at
    function granularity cannot tell it from a live edit, so it is reported apart."""
    return o.verdict == "WASTED" and bool(o.facts.get("line_ran") is False)


def verdict(decision: str, *, ir_changed: bool, truth_failed: bool, user_data: bool = True) -> str:
    """The verdict from what the launcher decided and what a fresh FlyDSL trace says.

    ``decision``: ``hit`` (cache_info().misses did not move), ``retrace``, ``drift`` (it
    raised ``GlobalDriftError``) or ``error`` (it raised anything else).
    """
    if decision not in DECISIONS:
        raise ValueError(f"decision must be one of {DECISIONS}, got {decision!r}")
    if truth_failed:
        return "STALE" if decision == "hit" else "INVALID"
    if decision == "error":
        return "ERROR"
    if decision == "drift":
        return "RAISED" if (ir_changed or user_data) else "WASTED"
    if ir_changed and decision == "hit":
        return "STALE"
    if decision == "retrace" and not ir_changed:
        return "WASTED"
    return "OK"


def _tuplify(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_tuplify(v) for v in value)
    return value


def mutation_to_json(m: Mutation) -> dict:
    return asdict(m)


def mutation_from_json(doc: dict) -> Mutation:
    fields = {k: _tuplify(v) for k, v in doc.items()}
    return Mutation(**fields)


def outcome_to_json(o: Outcome) -> str:
    doc = asdict(o)
    doc["mutation"] = mutation_to_json(o.mutation)
    return json.dumps(doc)


def outcome_from_json(line: str) -> Outcome:
    doc = json.loads(line)
    doc["mutation"] = mutation_from_json(doc["mutation"])
    return Outcome(**doc)
