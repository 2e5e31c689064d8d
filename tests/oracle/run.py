"""The runtime mutation oracle: plan, run in worker processes, print the verdict table.

    python tests/oracle/run.py --all                 # every mutation (the docs table)
    python tests/oracle/run.py --fast                # the stratified CI subset
    python tests/oracle/run.py --kind "closure cell" --subject softmax -v
    python tests/oracle/run.py --list                # the plan only, nothing compiled
    python tests/oracle/run.py --fast --per-kind 3 --new-process   # also in new processes

Contract
--------
One worker process writes the plan (:mod:`plan`); the selected mutations are split into
batches, each run by its own worker process (``--jobs`` at a time), one fresh package copy
per mutation inside it (:mod:`worker`). The table has a row per mutation kind and a column
per verdict (:mod:`model`); STALE, WASTED and ERROR cases are listed with the mutation, the
file:line or object, and the launcher's and FlyDSL's facts. The control subject (a helper
behind a computed ``getattr``) is reported apart and must be STALE throughout: otherwise
the oracle itself is broken. WASTED cases are split: after a *neutral* mutation (nothing
the trace reads changed: cosmetic edits, reloads, unrelated code, identical copies, equal
values, another launcher's trace) a retrace is a defect and the gate allows <= 2 %; after an
input change that did not reach the IR (a branch not taken, a memoized value) it is the
price of keying by inputs, reported but not gated. Kinds in ``LIMIT_KINDS`` (run-time assignment of a live kernel
object's private attributes, a documented limit) are reported in a table of their own.
Exit status: 0 when STALE == 0, ERROR == 0, neutral WASTED <= 2 % and the
control is caught; 1 otherwise; 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from model import (  # noqa: E402
    VERDICTS,
    Mutation,
    Outcome,
    dead_code,
    is_neutral,
    mutation_from_json,
    outcome_from_json,
    outcome_to_json,
)  # noqa: E402
from subjects import BY_NAME, CONTROL  # noqa: E402

WASTED_LIMIT = 0.02
# Mutations of a limit docs/guarantees.md states (with its workaround): reported, not counted.
LIMIT_KINDS = frozenset({"kernel attribute"})
COUNTED = ("OK", "STALE", "WASTED", "RAISED")


def _worker(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(HERE / "worker.py"), *args], stdout=subprocess.PIPE, text=True)


def make_plan(path: Path) -> list[Mutation]:
    proc = _worker("plan", str(path))
    proc.communicate()
    if proc.returncode != 0:
        command = f"{sys.executable} {HERE / 'worker.py'} plan OUT.json"
        raise SystemExit(f"oracle: planning failed (exit {proc.returncode}); run {command} to see why")
    return [mutation_from_json(d) for d in json.loads(path.read_text())]


def run_batches(plan_path: Path, indices: list[int], jobs: int, batch: int) -> list[Outcome]:
    batches = [indices[i : i + batch] for i in range(0, len(indices), batch)]
    outcomes: list[Outcome] = []
    running: list[subprocess.Popen] = []
    while batches or running:
        while batches and len(running) < jobs:
            running.append(_worker("run", str(plan_path), *map(str, batches.pop(0))))
        proc = running.pop(0)
        out, _ = proc.communicate()
        outcomes += [outcome_from_json(line) for line in out.splitlines() if line.startswith("{")]
        if proc.returncode != 0:
            print(f"oracle: a worker exited with {proc.returncode}", file=sys.stderr)
    return outcomes


def table(outcomes: list[Outcome]) -> str:
    rows: dict[str, Counter] = defaultdict(Counter)
    for o in outcomes:
        rows[o.mutation.kind][o.verdict] += 1
    head = "| mutation kind | " + " | ".join(VERDICTS) + " | total |"
    lines = [head, "|---" * (len(VERDICTS) + 2) + "|"]
    for kind in sorted(rows):
        counts = rows[kind]
        lines.append(f"| {kind} | " + " | ".join(str(counts[v]) for v in VERDICTS) + f" | {sum(counts.values())} |")
    total = Counter(o.verdict for o in outcomes)
    lines.append("| **all** | " + " | ".join(f"**{total[v]}**" for v in VERDICTS) + f" | **{len(outcomes)}** |")
    return "\n".join(lines)


def details(outcomes: list[Outcome], verbose: bool) -> list[str]:
    out = []
    for o in outcomes:
        if verbose or o.verdict in ("STALE", "WASTED", "ERROR"):
            facts = o.facts or {}
            ir = f"IR {str(facts.get('base'))[:10]} -> {str(facts.get('truth'))[:10]}"
            dead = " (edited line never ran in the trace)" if dead_code(o) else ""
            out.append(f"{o.verdict:7} {o.mutation.label}{dead} | launcher: {o.decision}, {ir} {o.note[:240]}")
    return out


def split(outcomes: list[Outcome]) -> tuple[list[Outcome], list[Outcome], list[Outcome]]:
    """(counted mutations, mutations of a documented limit, the control)."""
    control = [o for o in outcomes if o.mutation.subject == CONTROL.name]
    limits = [o for o in outcomes if o.mutation.kind in LIMIT_KINDS and o not in control]
    rest = [o for o in outcomes if o not in control and o not in limits]
    return rest, limits, control


def summary(outcomes: list[Outcome], control: list[Outcome]) -> tuple[bool, str]:
    """The gate and its one-paragraph account (see the module docstring)."""
    counts = Counter(o.verdict for o in outcomes)
    counted = sum(counts[v] for v in COUNTED)
    wasted = [o for o in outcomes if o.verdict == "WASTED"]
    neutral = sum(is_neutral(o.mutation) for o in wasted)
    dead = sum(dead_code(o) for o in wasted)
    share = lambda n: n / counted if counted else 0.0  # noqa: E731
    # The control is missed in memory and, by the fresh-start step, from the persistent index:
    # both checks must see it, or the check itself is blind.
    caught = all(o.verdict == "STALE" and o.facts.get("fresh_stale") for o in control)
    # ... and, with --new-process, by a new process loading the unmutated copy's row.
    caught = caught and all(o.facts["new_process"].get("stale") for o in control if "new_process" in o.facts)
    processes = [o.facts["new_process"] for o in outcomes if "new_process" in o.facts]
    ok = counts["STALE"] == 0 and counts["ERROR"] == 0 and share(neutral) <= WASTED_LIMIT and caught
    text = (
        f"{len(outcomes)} mutations ({counted} counted, {counts['INVALID']} invalid): STALE {counts['STALE']}, "
        f"WASTED {len(wasted)} ({share(len(wasted)):.1%}): {neutral} after a mutation that changes nothing the "
        f"trace reads ({share(neutral):.1%}, the gate: <= {WASTED_LIMIT:.0%}), {len(wasted) - neutral} after an "
        f"input change that did not reach the IR ({dead} of them edit a line the trace never ran); "
        f"RAISED {counts['RAISED']}, ERROR {counts['ERROR']}; "
        f"fresh starts served from the persistent index {sum(bool(o.facts.get('fresh_loaded')) for o in outcomes)} "
        "(their IR compared with the fresh trace's); "
        + (
            f"new processes after the mutation {len(processes)}, {sum(bool(f.get('loaded')) for f in processes)} "
            f"of them served from the index, {sum(bool(f.get('stale')) for f in processes)} stale, "
            f"{sum(bool(f.get('invalid')) for f in processes)} where the mutated code raises under plain FlyDSL "
            "too; "
            if processes
            else ""
        )
        + f"control (computed getattr) STALE {sum(o.verdict == 'STALE' for o in control)}/{len(control)}, "
        f"and from the index at a fresh start {sum(bool(o.facts.get('fresh_stale')) for o in control)}/{len(control)}"
    )
    return ok, text


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="tests/oracle/run.py", description="flydsl_runtime mutation oracle")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--all", action="store_true", help="every planned mutation")
    mode.add_argument("--fast", action="store_true", help="a stratified subset (CI)")
    mode.add_argument("--list", action="store_true", help="print the plan, compile nothing")
    p.add_argument("--per-kind", type=int, default=3, help="mutations per kind with --fast (default 3)")
    p.add_argument("--kind", action="append", default=[], help="only this mutation kind (repeatable)")
    p.add_argument("--subject", action="append", default=[], help=f"only this subject: {', '.join(BY_NAME)}")
    p.add_argument("--jobs", type=int, default=1, help="worker processes at a time (default 1)")
    p.add_argument("--batch", type=int, default=40, help="mutations per worker process (default 40)")
    p.add_argument("--json", type=Path, help="also write every outcome to this JSON-lines file")
    p.add_argument("-v", "--verbose", action="store_true", help="list every mutation, not only the failures")
    p.add_argument(
        "--new-process",
        action="store_true",
        help="also run each mutation a new process reproduces (file edits, reloads, environment variables, "
        "arguments) in new processes: one on the unmutated copy, one after the mutation (~7 s more each)",
    )
    args = p.parse_args(argv)
    for name in args.subject:
        if name not in BY_NAME:
            p.error(f"--subject {name!r}: not a subject; choose from {', '.join(BY_NAME)}")
    if args.jobs < 1 or args.batch < 1 or args.per_kind < 1:
        p.error("--jobs, --batch and --per-kind must be at least 1")
    return args


def _select(plan: list[Mutation], args: argparse.Namespace) -> list[int]:
    from plan import fast_subset

    indices = fast_subset(plan, args.per_kind) if args.fast else list(range(len(plan)))
    if args.kind:
        kinds = {m.kind for m in plan}
        unknown = [k for k in args.kind if k not in kinds]
        if unknown:
            raise SystemExit(
                f"oracle: --kind {unknown[0]!r} is not a planned kind; planned: {', '.join(sorted(kinds))}"
            )
        indices = [i for i in indices if plan[i].kind in args.kind]
    if args.subject:
        indices = [i for i in indices if plan[i].subject in args.subject]
    return indices


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    with tempfile.TemporaryDirectory(prefix="flydeps-oracle-plan-") as tmp:
        os.environ["FLYDSL_RUNTIME_CACHE_DIR"] = str(Path(tmp) / "flydsl-cache")
        os.environ["FLYDEPS_CACHE_DIR"] = str(Path(tmp) / "flydeps-cache")  # the persistent index
        if args.new_process:  # read by the workers (tests/oracle/worker.py, _new_process)
            os.environ["FLYDEPS_ORACLE_NEW_PROCESS"] = "1"
        plan_path = Path(tmp) / "plan.json"
        plan = make_plan(plan_path)
        try:
            indices = _select(plan, args)
        except SystemExit as exc:
            print(exc, file=sys.stderr)
            return 2
        if args.list:
            for i in indices:
                print(f"{i:4} {plan[i].label}")
            print(f"{len(indices)} mutations")
            return 0
        outcomes = run_batches(plan_path, indices, args.jobs, args.batch)
    if args.json:
        args.json.write_text("".join(outcome_to_json(o) + "\n" for o in outcomes))
    main_part, limits, control = split(outcomes)
    print(table(main_part))
    print("\n".join(details(main_part, args.verbose)))
    ok, text = summary(main_part, control)
    print(text)
    if limits:
        print(f"documented limits ({', '.join(sorted(LIMIT_KINDS))}), not counted above:")
        print(table(limits))
        print("\n".join(details(limits, args.verbose)))
    if len(outcomes) != len(indices):
        print(f"oracle: {len(indices) - len(outcomes)} mutations produced no outcome (a worker crashed)")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
