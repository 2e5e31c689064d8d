"""``flydeps aot build`` and ``flydeps aot list`` when there is nothing to do: before (a copy
of the tree without the change, ``--before SRC``) and after (this tree), side by side in one
run, each a new ``flydeps`` process (its start, imports and the spec's enumeration counted).

Run (CPU-only machine; .ci/setup_rocm.sh provides the compile root)::

    ROCM_PATH=/opt/flydeps-rocm python benchmarks/bench_aot_noop.py --before BEFORE/src [--count 100] [--arch A,B]

The spec yields ``count`` specializations of the example kernels (``examples/kernels``: the
12 of ``examples/aot_specializations.py``, then the quantizer launcher with one more
``bias`` each), built for ``--arch`` (gfx942 and gfx950) once, with this tree, into a directory; a copy of it
serves the before tree (the rows are the same). Rows: that first build; a rebuild with
nothing to build (every row there); ``aot list`` of the directory (``count`` rows).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SPEC = """
import torch
from kernels.realworld import norms, quant, softmax

ROWS = 256


def specializations():
    x = torch.zeros(ROWS * 8)
    w = torch.zeros(8)
    for width in (1, 2, 4, 8):
        yield norms.rmsnorm, (x, w, x, ROWS, width)
        yield norms.layernorm, (x, w, w, x, ROWS), {{"width": width}}
    yield softmax.softmax_w4, (x, x, ROWS)
    yield softmax.softmax_w4_scaled, (x, x, ROWS)
    for bias in range({count} - 10):
        yield quant.QUANT.launch, (x, x, ROWS), {{"bias": float(bias)}}
"""


def _run(src: Path, args: list[str], work: Path) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(src), str(ROOT / "examples")])}
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "flydeps", *args], capture_output=True, text=True, env=env, cwd=work)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"flydeps {' '.join(args)} failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, done.stdout.splitlines()[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True, help="the src directory of the tree before the change")
    parser.add_argument("--count", type=int, default=100, help="specializations (at least 12)")
    parser.add_argument("--arch", default="gfx942,gfx950", help="the arches built (default: %(default)s)")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each no-op row (the best is shown)")
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench_aot_noop_") as tmp:
        work = Path(tmp)
        (work / "spec.py").write_text(SPEC.format(count=opts.count))
        spec = f"{work / 'spec.py'}:specializations"
        trees = {"before": opts.before.resolve(), "after": ROOT / "src"}
        build = ["aot", "build", spec, "--arch", opts.arch, "--no-progress", "--out"]
        seconds, said = _run(trees["after"], [*build, str(work / "after")], work)
        print(f"first build (after tree): {seconds:.1f} s  [{said}]", file=sys.stderr)
        results["first build"] = {"after": seconds}
        shutil.copytree(work / "after", work / "before")
        for label, args in (("no-op rebuild", build), ("aot list", ["aot", "list"])):
            for tree, src in trees.items():
                best = min(_run(src, [*args, str(work / tree)], work)[0] for _ in range(opts.repeat))
                results.setdefault(label, {})[tree] = best
            print(f"{label}: {results[label]}", file=sys.stderr)
    if opts.json:
        print(json.dumps(results, indent=2))
    else:
        print(f"{'row':<16}{'before':>10}{'after':>10}")
        for label, row in results.items():
            before = f"{row['before']:.2f} s" if "before" in row else "-"
            print(f"{label:<16}{before:>10}{row['after']:>8.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
