"""``flydeps aot build`` at scale: a local process pool vs a 2-worker Dask cluster, and the
incremental rebuild after a one-helper edit, side by side in one run.

Run (CPU-only machine; .ci/setup_rocm.sh provides the compile root)::

    ROCM_PATH=/opt/flydeps-rocm python benchmarks/bench_aot.py [--factors 28] [--json]

A copy of the test kernel package (``tests/runtime/kernels/fdk``) and a spec yielding
``2 + factors`` specializations per arch (vector add, one scaled copy per factor, a
reduction whose helpers live in another module), built for gfx942 and gfx950: 60 with the
default. Rows: the first build on a local pool of 2 processes; the same build on a Dask
``LocalCluster`` of 2 single-thread worker processes (its own output directory; the index
rows must equal the local ones); a rebuild with nothing changed (all reused); the rebuild
after editing one helper of the reduction (only what reaches it is rebuilt); a first build
of a spec that calls two launchers over 8 tensor sizes each (32 items, 4 specializations:
each is built once and the other items are served by its row); then the same
build with ``prune`` (``--prune``: the rows and artifacts of the helper's old version go),
with the output directory's size before and after.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]

SPEC = """
import torch

from fdkbench import reduce, vadd

N = 1024


def specializations():
    a, b, c = (torch.zeros(N) for _ in range(3))
    yield vadd.vadd, (a, b, c, N)
    for factor in range({factors}):
        yield vadd.axpy, (a, c, N, factor + 2)
    yield reduce.partial_sum, (a, c, 256)


def shapes():  # as AOT scripts iterate over problem sizes: one specialization per launcher
    for n in (256, 512, 1024, 2048, 4096, 8192, 16384, 32768):
        a, b, c = (torch.zeros(n) for _ in range(3))
        yield vadd.vadd, (a, b, c, n)
        yield vadd.axpy, (a, c, n, 2)
"""


def _rows(out: Path) -> set[tuple[str, str]]:
    from flydsl_runtime.persist import index

    with sqlite3.connect(out / index.INDEX_NAME) as conn:
        return set(conn.execute("SELECT key, ir_key FROM specializations").fetchall())


def _timed(label: str, fn: Any, results: dict[str, Any]) -> Any:
    t0 = time.perf_counter()
    summary = fn()
    results[label] = {
        "seconds": time.perf_counter() - t0,
        "built": summary.count("built"),
        "reused": summary.count("reused"),
        "failed": summary.count("failed"),
        "total": len(summary.outcomes),
    }
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--factors", type=int, default=28)
    parser.add_argument("--json", action="store_true")
    opts = parser.parse_args()
    os.environ.setdefault("ROCM_PATH", "/opt/flydeps-rocm")
    import distributed

    from flydsl_runtime.aot.build import build

    results: dict[str, Any] = {}
    arches = ["gfx942", "gfx950"]
    with tempfile.TemporaryDirectory(prefix="flydeps-aot-bench-") as tmp:
        work = Path(tmp)
        shutil.copytree(ROOT / "tests" / "runtime" / "kernels" / "fdk", work / "fdkbench")
        (work / "spec.py").write_text(SPEC.format(factors=opts.factors))
        sys.path.insert(0, str(work))
        os.environ["PYTHONPATH"] = os.pathsep.join([str(work), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
        spec = f"{work / 'spec.py'}:specializations"
        _timed(
            "local pool (2 processes): first build",
            lambda: build(spec, arches, work / "local", jobs=2, progress=False),
            results,
        )
        with distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster:
            address = cluster.scheduler_address.removeprefix("tcp://")
            _timed(
                "Dask LocalCluster (2 workers): first build",
                lambda: build(spec, arches, work / "dask", progress=False, executor=f"dask://{address}"),
                results,
            )
        same = _rows(work / "local") == _rows(work / "dask")
        _timed(
            "local pool: rebuild, nothing changed",
            lambda: build(spec, arches, work / "local", jobs=2, progress=False),
            results,
        )
        helpers = work / "fdkbench" / "reduce_helpers.py"
        helpers.write_text(helpers.read_text().replace("return acc + x", "return acc - x"))
        _timed(
            "local pool: rebuild after a one-helper edit",
            lambda: build(spec, arches, work / "local", jobs=2, progress=False),
            results,
        )
        _timed(  # 32 items, 4 specializations: each built once, the other items served by its row
            "local pool: first build of a spec over 8 tensor sizes (2 launchers)",
            lambda: build(f"{work / 'spec.py'}:shapes", arches, work / "shapes", jobs=2, progress=False),
            results,
        )
        before_bytes = _size(work / "local")
        pruned = _timed(
            "local pool: rebuild with --prune",
            lambda: build(spec, arches, work / "local", jobs=2, progress=False, prune=True),
            results,
        ).pruned
        after_bytes = _size(work / "local")
    summary = {
        "python": sys.version.split()[0],
        "rows": results,
        "dask_rows_equal_local": same,
        "prune": {
            "rows": pruned.rows,
            "artifacts": pruned.artifacts,
            "bytes": pruned.bytes,
            "directory_bytes_before": before_bytes,
            "directory_bytes_after": after_bytes,
        },
    }
    if opts.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        return 0
    out = [
        f"Python {summary['python']}; {results['local pool (2 processes): first build']['total']} specializations "
        f"({2 + opts.factors} per arch x {len(arches)} arches); Dask index rows equal the local ones: {same}.",
        "",
        "| build | wall time | built | reused | failed |",
        "|---|---:|---:|---:|---:|",
    ]
    out += [
        f"| {k} | {v['seconds']:.1f} s | {v['built']} | {v['reused']} | {v['failed']} |" for k, v in results.items()
    ]
    out += [
        "",
        f"--prune deleted {pruned.rows} index rows and {pruned.artifacts} artifacts "
        f"({pruned.bytes / 2**20:.2f} MiB); the output directory went from {before_bytes / 2**20:.2f} MiB "
        f"to {after_bytes / 2**20:.2f} MiB.",
    ]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def _size(directory: Path) -> int:
    """Bytes of the files under ``directory`` (the index with its WAL, FlyDSL's artifacts)."""
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


if __name__ == "__main__":
    raise SystemExit(main())
