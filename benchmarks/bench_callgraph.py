"""Call-graph accuracy (issue 13): pycg 0.0.7 and ``flydeps graph --format pycg``, side by side.

Both tools run, each in its own interpreter, on every case of ``tests/static/callgraph``
(a small program and its hand-written expected edges) and are scored per edge by the
same scorer (``tests/static/callgraph_score.py``): precision and recall per category and
overall, printed as a markdown table, then each tool's total wall time and the cases a
tool could not process.

Usage:
    python benchmarks/bench_callgraph.py [--flydeps-python PY] [--pycg-python PY] [--diff] [--cases DIR]

Defaults: the first interpreter that can import the tool, tried in this order: the one
running this script, then this checkout's virtual environments (``.venv-pycg``, ``.venv*``,
in name order). flydeps runs from this checkout's ``src``. pycg 0.0.7 imports
``pkg_resources``, which 3.12+ venvs lack: use Python 3.10/3.11, apart from the project's
environments:

    python3.10 -m venv .venv-pycg && .venv-pycg/bin/pip install pycg==0.0.7
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tests" / "static"))
from callgraph_score import CASES_DIR, Case, Score, discover_cases, edges_of, markdown_table, score  # noqa: E402

PYCG_HINT = (
    "pycg is not importable by any interpreter found; install it apart from the project's environments:\n"
    "    python3.10 -m venv .venv-pycg && .venv-pycg/bin/pip install pycg==0.0.7\n"
    "then re-run (or pass --pycg-python .venv-pycg/bin/python). On 3.12+ pycg also needs setuptools."
)


@dataclass(frozen=True)
class Run:
    """One tool on one case: its call graph (empty when it failed) and why it failed."""

    graph: dict[str, list[str]]
    error: str = ""


def _candidates() -> list[str]:
    found = [sys.executable]
    for venv in sorted(REPO.glob(".venv*"), key=lambda p: (p.name != ".venv-pycg", p.name)):
        python = venv / "bin" / "python"
        if python.is_file():
            found.append(str(python))
    return found


def _can_import(python: str, module: str, env: dict[str, str] | None = None) -> bool:
    done = subprocess.run([python, "-c", f"import {module}"], capture_output=True, env=env, check=False)
    return done.returncode == 0


def _flydeps_env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO / "src"), env.get("PYTHONPATH")]))
    env["FLYDEPS_CACHE_DIR"] = str(cache)
    return env


def _discover(module: str, env: dict[str, str] | None = None) -> str | None:
    return next((python for python in _candidates() if _can_import(python, module, env)), None)


def _parse(done: subprocess.CompletedProcess[str], accept: Sequence[int]) -> Run:
    if done.returncode not in accept:
        tail = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return Run({}, f"exit {done.returncode}: {tail}")
    try:
        return Run(json.loads(done.stdout))
    except json.JSONDecodeError as exc:
        tail = (done.stderr.strip().splitlines() or [""])[-1]
        return Run({}, f"unreadable output ({exc}); stderr: {tail}")


def run_flydeps(python: str, case: Case, env: dict[str, str]) -> Run:
    args = [python, "-m", "flydeps", "graph", str(case.path), "--root", str(case.path), "--format", "pycg"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, check=False, timeout=300)
    return _parse(done, accept=(0, 1))  # 1: problems were reported, the graph is still complete


def run_pycg(python: str, case: Case) -> Run:
    args = [python, "-m", "pycg", "--package", str(case.path), *map(str, case.sources())]
    done = subprocess.run(args, capture_output=True, text=True, check=False, timeout=300)
    return _parse(done, accept=(0,))


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--flydeps-python", help="interpreter that runs flydeps (default: discovered)")
    parser.add_argument("--pycg-python", help="interpreter with pycg 0.0.7 installed (default: discovered)")
    parser.add_argument("--diff", action="store_true", help="also list each tool's missing and spurious edges")
    parser.add_argument(
        "--cases", type=Path, default=CASES_DIR, help="folder of <category>/<case>/ cases (default: %(default)s)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _arguments(argv)
    with tempfile.TemporaryDirectory(prefix="bench-callgraph-") as tmp:
        env = _flydeps_env(Path(tmp))
        flydeps_python = args.flydeps_python or _discover("flydeps", env)
        if flydeps_python is None:
            print("no interpreter can import flydeps from src/; pass --flydeps-python", file=sys.stderr)
            return 2
        pycg_python = args.pycg_python or _discover("pycg")
        runners: dict[str, Callable[[Case], Run]] = {"flydeps": lambda case: run_flydeps(flydeps_python, case, env)}
        if pycg_python is None:
            print(PYCG_HINT, file=sys.stderr)
        else:
            runners = {"pycg": lambda case: run_pycg(pycg_python, case), **runners}
        cases = discover_cases(args.cases)
        if not cases:
            print(f"no <category>/<case>/callgraph.json under {args.cases}; pass --cases DIR", file=sys.stderr)
            return 2
        _report(runners, cases, args.diff)
        print(f"\ninterpreters: flydeps {flydeps_python}; pycg {pycg_python or 'not found'}")
    return 0


def _report(runners: dict[str, Callable[[Case], Run]], cases: list[Case], diff: bool) -> None:
    tools = list(runners)
    rows: dict[str, dict[str, Score]] = defaultdict(lambda: {tool: Score() for tool in tools})
    counts: dict[str, int] = defaultdict(int)
    seconds = dict.fromkeys(tools, 0.0)
    notes: list[str] = []
    for case in cases:
        counts[case.category] += 1
        expected = case.expected()
        for tool, runner in runners.items():
            start = time.perf_counter()
            run = runner(case)
            seconds[tool] += time.perf_counter() - start
            rows[case.category][tool] += score(run.graph, expected)
            if run.error:
                notes.append(f"- {tool} failed on {case.id}: {run.error}")
            elif diff:
                got, want = edges_of(run.graph), edges_of(expected)
                notes += [f"- {tool} {case.id}: missing {a} -> {b}" for a, b in sorted(want - got)]
                notes += [f"- {tool} {case.id}: spurious {a} -> {b}" for a, b in sorted(got - want)]
    print(markdown_table(rows, tools, counts))
    print("wall time over all cases (one process per case): " + ", ".join(f"{t} {s:.1f} s" for t, s in seconds.items()))
    if notes:
        print("\n" + "\n".join(notes))


if __name__ == "__main__":
    sys.exit(main())
