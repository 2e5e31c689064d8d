"""Cold ``fingerprint`` per helper: this tree against an earlier one, side by side, fresh processes.

Issue 10's target is a cold fingerprint at least 5x faster per helper than the tree it was
filed against (``0d18064``). Both trees are measured in one run: the earlier tree is
extracted with ``git archive`` into a temporary directory, and each measurement is a fresh
process (nothing memoized, as at a real cold start) that imports one tree's ``flydeps``,
builds the package, then times

* ``first``: the process's first ``flydeps.fingerprint`` of the launcher (what a kernel's
  first call pays), and
* ``again``: the median of further fingerprints with the per-code-object memos cleared
  (cold digests, warm interpreter: the figure ``bench_factory.py`` calls cold).

The processes of the two trees alternate, ``--rounds`` times each, so machine noise hits
both alike; the table gives medians per reachable helper and their ratio. Shapes:

* ``factory``: ``bench_factory.py``'s package, N helpers over N/8 modules, each reading a
  module constant, all called by one kernel closure of a factory;
* ``large`` (needs FlyDSL): ``gen_large_launcher.py``'s flash-attention-shaped launcher,
  32 modules x 14 helpers calling each other, behind ``@flyc.jit``/``@flyc.kernel``.

    python benchmarks/bench_cold.py                       # markdown table
    python benchmarks/bench_cold.py --baseline 0d18064 --rounds 7 --json
    python benchmarks/bench_cold.py --callgrind           # instruction counts (valgrind)

``--callgrind`` replaces the clock by instructions counted by ``valgrind --tool=callgrind``
(one process per tree and shape: the difference between 3 and 1 cold fingerprints, per
helper), which does not move with the machine's load.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def _clear_memos() -> None:
    """Forget every per-code-object memo of the imported flydeps (a cold process's state)."""
    from flydeps.code import bytecode as _bytecode

    for memo in list(vars(_bytecode).values()):
        if hasattr(memo, "clear") and type(memo).__name__ in ("_CodeMemo", "WeakKeyDictionary"):
            memo.clear()


def _launcher(shape: str, packages: Path, helpers: int) -> object:
    sys.path.insert(0, str(packages))
    if shape == "factory":
        return importlib.import_module(f"bench_pkg_{helpers}.factories").factory(64)  # type: ignore[attr-defined]
    import flydsl_runtime

    flydsl_runtime.install()  # the package decorates with flydsl.compiler.jit: give it ours
    try:
        return importlib.import_module("largefa.launcher").launch  # type: ignore[attr-defined]
    finally:
        flydsl_runtime.uninstall()


def child(src: str, shape: str, packages: str, helpers: int, repeat: int) -> None:
    """One measurement in this (fresh) process: prints a JSON line."""
    sys.path.insert(0, src)
    import flydeps

    assert Path(flydeps.__file__).resolve().is_relative_to(Path(src).resolve()), flydeps.__file__
    launcher = _launcher(shape, Path(packages), helpers)
    start = time.perf_counter()
    fp = flydeps.fingerprint(launcher)
    first = time.perf_counter() - start
    reached = sum(1 for n in fp.graph.nodes.values() if n.kind.value in ("function", "method"))
    again = []
    for _ in range(repeat):
        _clear_memos()
        start = time.perf_counter()
        flydeps.fingerprint(launcher)
        again.append(time.perf_counter() - start)
    print(json.dumps({"first": first, "again": statistics.median(again), "helpers": reached}))


def callgrind_child(src: str, shape: str, packages: str, helpers: int, count: int) -> None:
    """``count`` cold fingerprints (for the instruction-count difference)."""
    sys.path.insert(0, src)
    import flydeps

    launcher = _launcher(shape, Path(packages), helpers)
    fp = flydeps.fingerprint(launcher)
    for _ in range(count - 1):
        _clear_memos()
        fp = flydeps.fingerprint(launcher)
    reached = sum(1 for n in fp.graph.nodes.values() if n.kind.value in ("function", "method"))
    print(json.dumps({"helpers": reached}))


def extract(rev: str, into: Path) -> Path:
    """``src/`` of ``rev`` (git archive): the earlier tree, pure Python (its optional C
    extensions are not built; none of them is on its cold fingerprint path)."""
    archive = into / "tree.tar"
    subprocess.run(["git", "-C", str(ROOT), "archive", "-o", str(archive), rev, "src"], check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree" / "src"


def write_packages(into: Path, shapes: list[str], helpers: int) -> None:
    sys.path.insert(0, str(HERE))
    from bench_factory import write_package as factory_package

    factory_package(into, f"bench_pkg_{helpers}", helpers)
    if "large" in shapes:
        from gen_large_launcher import write_package as large_package

        large_package(into, "largefa", 32, 14)


def run_child(args: list[str]) -> dict:
    env = dict(os.environ, FLYDSL_RUNTIME_ENABLE_CACHE="0")
    done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"bench_cold: a measurement failed ({' '.join(args[:3])}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def instructions(args: list[str]) -> int:
    env = dict(os.environ, FLYDSL_RUNTIME_ENABLE_CACHE="0")
    command = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__, *args]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    for line in done.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1].strip())
    raise SystemExit(f"bench_cold: valgrind gave no count ({' '.join(args[:3])}):\n{done.stderr[-3000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="0d18064", help="git revision to compare with (default: 0d18064)")
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per tree and shape")
    parser.add_argument("--repeat", type=int, default=5, help="cold fingerprints after the first, per process")
    parser.add_argument("--helpers", type=int, default=400, help="helpers of the factory shape")
    parser.add_argument("--shapes", default="factory,large")
    parser.add_argument("--callgrind", action="store_true", help="count instructions instead of timing")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--child", nargs=4, metavar=("SRC", "SHAPE", "PACKAGES", "HELPERS"), help=argparse.SUPPRESS)
    parser.add_argument("--callgrind-child", nargs=5, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        src, shape, packages, helpers = args.child
        child(src, shape, packages, int(helpers), args.repeat)
        return
    if args.callgrind_child:
        src, shape, packages, helpers, count = args.callgrind_child
        callgrind_child(src, shape, packages, int(helpers), int(count))
        return
    shapes = [s for s in args.shapes.split(",") if s]
    if "large" in shapes and importlib.util.find_spec("flydsl") is None:
        print("bench_cold: FlyDSL is not installed: the large shape is skipped", file=sys.stderr)
        shapes.remove("large")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        base = extract(args.baseline, Path(tmp))
        packages = Path(tmp) / "packages"
        packages.mkdir()
        write_packages(packages, shapes, args.helpers)
        trees = {"baseline": str(base), "this tree": str(ROOT / "src")}
        for shape in shapes:
            common = [shape, str(packages), str(args.helpers)]
            if args.callgrind:
                per = {}
                for name, src in trees.items():
                    one = instructions(["--callgrind-child", src, *common, "1"])
                    three = instructions(["--callgrind-child", src, *common, "3"])
                    helpers = run_child(["--callgrind-child", src, *common, "1"])["helpers"]
                    per[name] = (three - one) / 2 / helpers
                rows.append({"shape": shape, "helpers": helpers, "instructions_per_helper": per})
                continue
            samples: dict[str, list[dict]] = {name: [] for name in trees}
            for _ in range(args.rounds):
                for name, src in trees.items():  # alternate: both trees share the machine's noise
                    samples[name].append(run_child(["--child", src, *common, "--repeat", str(args.repeat)]))
            row: dict = {"shape": shape, "helpers": samples["this tree"][0]["helpers"]}
            for name, runs in samples.items():
                n = runs[0]["helpers"]
                row[name] = {
                    "first_us": statistics.median(r["first"] for r in runs) / n * 1e6,
                    "again_us": statistics.median(r["again"] for r in runs) / n * 1e6,
                }
            rows.append(row)
    info = f"CPython {platform.python_version()}, baseline {args.baseline}"
    if args.json:
        print(json.dumps({"python": info, "rows": rows}, indent=2))
        return
    if args.callgrind:
        print(f"#### Cold fingerprint, instructions per helper (callgrind), {info}\n")
        print("| shape | helpers | baseline | this tree | ratio |\n|---|---:|---:|---:|---:|")
        for r in rows:
            b, t = r["instructions_per_helper"]["baseline"], r["instructions_per_helper"]["this tree"]
            print(f"| {r['shape']} | {r['helpers']} | {b:,.0f} | {t:,.0f} | {b / t:.1f}x |")
        return
    print(f"#### Cold fingerprint per helper, {info} (medians of {args.rounds} processes each)\n")
    print("| shape | helpers | baseline first | this tree first | ratio | baseline again | this tree again | ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        b, t = r["baseline"], r["this tree"]
        print(
            f"| {r['shape']} | {r['helpers']} | {b['first_us']:.1f} µs | {t['first_us']:.1f} µs "
            f"| {b['first_us'] / t['first_us']:.1f}x | {b['again_us']:.1f} µs | {t['again_us']:.1f} µs "
            f"| {b['again_us'] / t['again_us']:.1f}x |"
        )


if __name__ == "__main__":
    main()
