"""Issue 35's oracle families: run them, print a table per family, exit 1 on STALE or ERROR.

    python tests/oracle/families/run.py                      # every family, in memory
    python tests/oracle/families/run.py --new-process        # ... and in new processes
    python tests/oracle/families/run.py --family memo -v     # one family, every case listed
    python tests/oracle/families/run.py --json out.jsonl     # also every outcome, one JSON a line
    python tests/oracle/families/run.py --new-process --new-process-per-family 2   # the CI run

Contract
--------
Each family runs in its own worker process (``harness.py run FAMILY``, ``--jobs`` at a
time) with a FlyDSL disk cache and a persistent index of the run's own. The table has a row
per family: the in-memory verdicts (the judged call, the intermediate calls, the fresh start
served from the persistent index) and, with ``--new-process``, the verdicts of the new
process started in the mutated state after one in the baseline state filled the index.
Every STALE, ERROR, WASTED and INVALID case is listed below it, with what was served.
The ``control`` family (a helper reached through a computed ``getattr``, mutated) must come
out STALE, in memory and in a new process: otherwise the oracle is blind.
A case marked ``limit`` demonstrates a limit docs/guarantees.md names with its reason and
workaround: its verdicts are listed and counted apart, never in its family's.
Exit status: 0 when no counted family has a STALE or ERROR and every control is STALE;
1 otherwise; 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

from families.model import VERDICTS, Outcome, outcome_from_json, outcome_to_json  # noqa: E402
from families.registry import FAMILIES, cases  # noqa: E402

CONTROL = "control"


def run_families(families: list[str], jobs: int, only: dict[str, list[str]] | None = None) -> list[Outcome]:
    """Every case of ``families`` (or only the named ones), one worker process per family."""
    pending = list(families)
    running: list[tuple[str, subprocess.Popen]] = []
    outcomes: list[Outcome] = []
    while pending or running:
        while pending and len(running) < jobs:
            family = pending.pop(0)
            command = [sys.executable, str(HERE / "harness.py"), "run", family, *((only or {}).get(family, []))]
            running.append(
                (family, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
            )
        family, proc = running.pop(0)
        out, err = proc.communicate()
        got = [outcome_from_json(line) for line in out.splitlines() if line.startswith("{")]
        expected = len((only or {}).get(family) or cases(family))
        if proc.returncode != 0 or len(got) != expected:
            print(
                f"families: the {family} worker exited {proc.returncode} with {len(got)}/{expected} outcomes:\n"
                + err[-2000:],
                file=sys.stderr,
            )
            seen = {o.case for o in got}
            got += [
                Outcome(c.label, family, "ERROR", None, f"no outcome: the worker crashed (exit {proc.returncode})")
                for c in cases(family, (only or {}).get(family))
                if c.label not in seen
            ]
        outcomes += got
    return outcomes


def stratified(families: list[str], per_family: int) -> list[str]:
    """Labels of up to ``per_family`` cases of each family to run in new processes: changes
    that reach the IR and neutral ones in turn, in the family's order; every control case."""
    chosen: list[str] = []
    for family in families:
        eligible = [c for c in cases(family) if c.new_process]
        reaching = [c for c in eligible if c.reaches is not False]
        neutral = [c for c in eligible if c.reaches is False]
        mixed = (
            [c for pair in zip(reaching, neutral) for c in pair] + reaching[len(neutral) :] + neutral[len(reaching) :]
        )
        chosen += [c.label for c in (eligible if family == CONTROL else mixed[:per_family])]
    return chosen


def table(outcomes: list[Outcome]) -> str:
    families = sorted({o.family for o in outcomes}, key=lambda f: list(FAMILIES).index(f))
    process_columns = ("OK", "STALE", "ERROR", "WASTED", "INVALID")
    head = (
        "| family | cases | "
        + " | ".join(VERDICTS)
        + " | new processes | "
        + " | ".join(f"np {v}" for v in process_columns)
        + " |"
    )
    lines = [head, "|---" * (len(VERDICTS) + len(process_columns) + 3) + "|"]
    for family in families:
        rows = [o for o in outcomes if o.family == family]
        memory = Counter(o.verdict for o in rows)
        process = Counter(o.process for o in rows if o.process is not None)
        lines.append(
            f"| {family} | {len(rows)} | "
            + " | ".join(str(memory[v]) for v in VERDICTS)
            + f" | {sum(process.values())} | "
            + " | ".join(str(process[v]) for v in process_columns)
            + " |"
        )
    return "\n".join(lines)


def details(outcomes: list[Outcome], verbose: bool) -> list[str]:
    lines = []
    for o in outcomes:
        flagged = o.verdict in ("STALE", "ERROR", "WASTED", "INVALID") or o.process in (
            "STALE",
            "ERROR",
            "WASTED",
            "INVALID",
        )
        if verbose or flagged:
            process = f", new process {o.process}" if o.process else ""
            lines.append(f"{o.verdict:7} {o.case}{process} ({o.seconds:.1f} s): {o.note[:400]}")
    return lines


def limits() -> dict[str, str]:
    """Case label -> the documented limit it demonstrates (``Case.limit``)."""
    return {c.label: c.limit for family in FAMILIES for c in cases(family) if c.limit}


def gate(outcomes: list[Outcome]) -> tuple[bool, str]:
    documented = limits()
    counted = [o for o in outcomes if o.family != CONTROL and o.case not in documented]
    control = [o for o in outcomes if o.family == CONTROL]
    shown = [o for o in outcomes if o.case in documented]
    bad = Counter(v for o in counted for v in (o.verdict, o.process) if v in ("STALE", "ERROR"))
    blind = [o.case for o in control if o.verdict != "STALE" or o.process not in (None, "STALE")]
    ok = not bad and not blind and bool(control or CONTROL not in {o.family for o in outcomes})
    text = (
        f"{len(counted)} cases: STALE {bad['STALE']}, ERROR {bad['ERROR']} (in memory or in a new process); "
        f"WASTED {sum(o.verdict == 'WASTED' or o.process == 'WASTED' for o in counted)}, "
        f"INVALID {sum(o.verdict == 'INVALID' or o.process == 'INVALID' for o in counted)}; "
        f"control STALE {len(control) - len(blind)}/{len(control)}; documented limits (docs/guarantees.md, "
        f"not counted) STALE {sum('STALE' in (o.verdict, o.process) for o in shown)}/{len(shown)}"
    )
    return ok, text


def _parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="tests/oracle/families/run.py", description="issue 35's oracle families")
    p.add_argument(
        "--family", action="append", default=[], help=f"only this family (repeatable): {', '.join(FAMILIES)}"
    )
    p.add_argument("--new-process", action="store_true", help="also run each case's mutated state in a new process")
    p.add_argument(
        "--new-process-per-family",
        type=int,
        metavar="N",
        help="with --new-process: only N cases per family (stratified; the control always) in new processes",
    )
    p.add_argument("--json", type=Path, help="also write every outcome to this JSON-lines file")
    p.add_argument("--jobs", type=int, default=2, help="family worker processes at a time (default 2)")
    p.add_argument("-v", "--verbose", action="store_true", help="list every case, not only the flagged ones")
    args = p.parse_args(argv)
    for name in args.family:
        if name not in FAMILIES:
            p.error(f"--family {name!r}: not a family; choose from {', '.join(FAMILIES)}")
    if args.jobs < 1:
        p.error("--jobs must be at least 1")
    if args.new_process_per_family is not None and (args.new_process_per_family < 1 or not args.new_process):
        p.error("--new-process-per-family needs --new-process and at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault("ROCM_PATH", "/opt/flydeps-rocm")
    with tempfile.TemporaryDirectory(prefix="flydeps-families-run-") as tmp:
        os.environ["FLYDSL_RUNTIME_CACHE_DIR"] = str(Path(tmp) / "flydsl-cache")
        os.environ["FLYDEPS_CACHE_DIR"] = str(Path(tmp) / "flydeps-cache")  # the persistent index
        if args.new_process:  # read by the workers (families/harness.py)
            os.environ["FLYDEPS_ORACLE_NEW_PROCESS"] = "1"
        families = args.family or list(FAMILIES)
        if args.new_process_per_family:  # read by the workers (families/harness.py, _selected)
            os.environ["ORACLE_FAMILIES_NEW_PROCESS_CASES"] = ",".join(
                stratified(families, args.new_process_per_family)
            )
        outcomes = run_families(families, args.jobs)
    if args.json:
        args.json.write_text("".join(outcome_to_json(o) + "\n" for o in outcomes))
    print(table(outcomes))
    print("\n".join(details(outcomes, args.verbose)))
    ok, text = gate(outcomes)
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
