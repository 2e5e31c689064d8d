"""``flydeps migrate`` on a repository with nothing left to migrate (issue 11, item 7: ≥ 10×).

Generates the synthetic kernel repository (``gen_synthetic_repo.py``, ~57k lines by
default), migrates it once, then times the no-op run side by side in one process:

* ``before``: ``migrate_paths`` of ``src/flydeps/migrate/tree.py`` at ``--before`` (a git
  revision, default ``HEAD``), loaded from ``git show`` next to the current package;
* ``pre-filter off``: this tree with :func:`may_change` forced to True, so every file is
  parsed (in the worker pool): what parallelism alone gives;
* ``this tree``: the pre-filter on, the pool for what is left;
* ``CLI``: ``flydeps migrate --check`` in a fresh interpreter (start-up included).

Each figure is the best of ``--repeat`` wall times. Both implementations must agree that
nothing changes, else the benchmark stops.

Usage: python benchmarks/bench_migrate.py [--lines-per-module 570] [--repeat 1] [--before HEAD]

``--tree DIR`` (issue 38) times the CLI instead on a copy of a real directory (FlyDSL's
``kernels/``), for this tree and, with ``--before REV``, for the package at ``REV``
(``git archive``, run from a scratch directory), each in fresh interpreters with an empty
cache directory of its own: a cold dry run, a cold ``--write``, then ``--check`` twice
(nothing left to change). Wall time and the CPU time of the command and its children.

Usage: python benchmarks/bench_migrate.py --tree /tmp/fkX/kernels [--before HEAD]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import ModuleType

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gen_synthetic_repo import generate  # noqa: E402

from flydeps.migrate import tree as migrate  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def _before(rev: str, scratch: Path) -> ModuleType:
    """``migrate.py`` at ``rev``, imported as a sibling module so its relative imports work."""
    source = subprocess.run(
        ["git", "show", f"{rev}:src/flydeps/migrate/tree.py"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    path = scratch / "migrate_before.py"
    path.write_bytes(source)
    spec = importlib.util.spec_from_file_location("flydeps.static._migrate_before", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the pool's workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _time(run: Callable[[], Iterable[object]], repeat: int) -> tuple[float, float, list[object]]:
    """Best wall time, the CPU time of that run, and its records."""
    best, cpu, records = float("inf"), 0.0, []
    for _ in range(repeat):
        start, start_cpu = time.perf_counter(), _cpu()
        records = list(run())
        wall = time.perf_counter() - start
        if wall < best:
            best, cpu = wall, _cpu() - start_cpu
    return best, cpu, records


def _summary(records: list[object]) -> tuple[int, int]:
    """(files that would change, files parsed)."""
    changed = sum(bool(getattr(r, "changed", False)) for r in records)
    parsed = sum(type(getattr(r, "result", None)).__name__ != "TransformSkip" for r in records)
    return changed, parsed


def _cli(tree: Path, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "flydeps", "migrate", str(tree), "--check"], capture_output=True)
        best = min(best, time.perf_counter() - start)
        if done.returncode != 0:
            raise SystemExit(done.stderr.decode())
    return best


def _run_cli(src: Path, cwd: Path, cache: Path, argv: list[str]) -> tuple[float, float, int, str]:
    """Wall and CPU seconds, exit status and last stderr line of ``flydeps ARGV`` run from ``src``."""
    import resource

    env = dict(os.environ, PYTHONPATH=str(src), FLYDEPS_CACHE_DIR=str(cache))
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "flydeps", *argv], cwd=cwd, env=env, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = done.stderr.decode(errors="replace").strip().splitlines()
    return wall, cpu, done.returncode, lines[-1] if lines else ""


def _tree_mode(tree: Path, before: str | None) -> None:
    import shutil

    tree = tree.resolve()
    with tempfile.TemporaryDirectory() as scratch:
        sources = [("this tree", ROOT / "src")]
        if before:
            target = Path(scratch) / "before"
            target.mkdir()
            archive = subprocess.run(["git", "archive", before, "src"], cwd=ROOT, capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(target)], input=archive.stdout, check=True)
            sources.insert(0, (f"before ({before})", target / "src"))
        rows = []
        for label, src in sources:
            work = Path(scratch) / label.split()[0]
            shutil.copytree(tree, work / tree.name)
            cache = work / "cache"
            steps = [
                ("cold dry run", ["migrate", tree.name], True),
                ("cold --write", ["migrate", "--write", tree.name], True),
                ("no-op --check (right after --write)", ["migrate", "--check", tree.name], False),
                ("no-op --check (again)", ["migrate", "--check", tree.name], False),
            ]
            for step, argv, cold in steps:
                if cold and cache.exists():
                    shutil.rmtree(cache)
                wall, cpu, status, last = _run_cli(src, work, cache, argv)
                rows.append((label, step, wall, cpu, status, last))
                print(f"{label}: {step}: {wall:.1f} s wall, {cpu:.1f} s CPU, exit {status} ({last})", file=sys.stderr)
    files = sum(1 for _ in tree.rglob("*.py"))
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"`flydeps migrate` on {tree.name}/ ({files} files); {cpus} CPUs; CPython {sys.version.split()[0]}; ")
    print(f"load average {os.getloadavg()[0]:.1f} at the end\n")
    print("| implementation | run | wall time | CPU time | exit | last line |")
    print("|---|---|---:|---:|---:|---|")
    for label, step, wall, cpu, status, last in rows:
        print(f"| {label} | {step} | {wall:.1f} s | {cpu:.1f} s | {status} | {last} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=None, help="time the CLI on a copy of this directory")
    parser.add_argument("--modules", type=int, default=100)
    parser.add_argument("--lines-per-module", type=int, default=570)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--before", default="HEAD", help="git revision of the implementation to compare with")
    args = parser.parse_args()
    if args.tree is not None:
        _tree_mode(args.tree, args.before if "--before" in sys.argv else None)
        return
    with tempfile.TemporaryDirectory() as scratch:
        count, lines = generate(Path(scratch), args.modules, args.lines_per_module)
        tree = Path(scratch) / "synthrepo"
        for record in migrate.migrate_paths([str(tree)]):  # the one-time migration: afterwards, a no-op
            if record.problem is not None or record.write() is not None:
                raise SystemExit(f"setup failed on {record.path}: {record.problem}")
        old = _before(args.before, Path(scratch))
        rows = [(f"before ({args.before}), in-process", *_time(lambda: old.migrate_paths([str(tree)]), args.repeat))]
        real_filter = migrate.may_change
        migrate.may_change = lambda data: True  # type: ignore[assignment]
        try:
            rows.append(
                (
                    "this tree, pre-filter off (pool only)",
                    *_time(lambda: migrate.migrate_paths([str(tree)]), args.repeat),
                )
            )
        finally:
            migrate.may_change = real_filter  # type: ignore[assignment]
        rows.append(("this tree", *_time(lambda: migrate.migrate_paths([str(tree)]), args.repeat)))
        cli = _cli(tree, args.repeat)
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"no-op `flydeps migrate` on {count} modules, {lines} lines; {cpus} CPUs; best of {args.repeat}")
    print(f"CPython {sys.version.split()[0]}; load average {os.getloadavg()[0]:.1f}\n")
    print("| implementation | files parsed | would change | wall time | CPU time | speed-up (wall) |")
    print("|---|---:|---:|---:|---:|---:|")
    base = rows[0][1]
    for name, seconds, cpu, records in rows:
        changed, parsed = _summary(records)
        if changed:
            raise SystemExit(f"{name}: {changed} files would change on a migrated tree")
        print(f"| {name} | {parsed} | {changed} | {seconds:.2f} s | {cpu:.2f} s | {base / seconds:.0f}× |")
    print(f"| this tree, CLI `flydeps migrate --check` (fresh interpreter) | | 0 | {cli:.2f} s | | {base / cli:.0f}× |")


if __name__ == "__main__":
    main()
