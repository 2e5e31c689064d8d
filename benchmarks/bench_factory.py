"""Warm-hit cost of ``flydeps.cached_factory`` vs ``functools.lru_cache``, side by side.

Writes a synthetic helper package (N helpers spread over modules, each reading a global)
to a temp dir, builds a compile-factory-shaped function whose returned launcher reaches
all N helpers, and times warm hits of both caches in the same process, interleaved.
Also times cold ``fingerprint`` as the helper count grows.

    python benchmarks/bench_factory.py            # markdown table on stdout
    python benchmarks/bench_factory.py --json     # machine-readable
"""

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import tempfile
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import flydeps  # noqa: E402
from flydeps.code import bytecode as _bytecode
from flydeps.watch import watchers as _watch  # noqa: E402


def write_package(root: Path, name: str, n_helpers: int, per_module: int = 8) -> None:
    pkg = root / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    n_modules = max(1, (n_helpers + per_module - 1) // per_module)
    for m in range(n_modules):
        lines = [f"SCALE_{m} = {m + 1}"]
        for h in range(m * per_module, min(n_helpers, (m + 1) * per_module)):
            lines.append(f"def helper_{h}(x):\n    return x * SCALE_{m} + {h}\n")
        (pkg / f"mod_{m}.py").write_text("\n".join(lines))
    lines = ["import functools", "import flydeps"]
    lines += [f"from {name} import mod_{m}" for m in range(n_modules)]
    calls = " + ".join(f"mod_{h // per_module}.helper_{h}(a)" for h in range(n_helpers))
    lines += [
        "def factory(block):",
        "    def kernel(a):",
        f"        return {calls} + block",
        "    def launcher(a):",
        "        return kernel(a)",
        "    return launcher",
        "lru = functools.lru_cache(maxsize=256)(factory)",
        "cached = flydeps.cached_factory(maxsize=256)(factory)",
        "import os",
        "os.environ['FLYDEPS_FASTCACHE'] = '0'  # read at decoration: the pure-Python hit path",
        "cached_py = flydeps.cached_factory(maxsize=256)(factory)",
        "del os.environ['FLYDEPS_FASTCACHE']",
    ]
    (pkg / "factories.py").write_text("\n".join(lines) + "\n")


def per_call_ns(fn, number: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e9


def measure(counts: list[int], number: int, repeat: int) -> list[dict]:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        sys.path.insert(0, tmp)
        for n in counts:
            name = f"bench_pkg_{n}"
            write_package(Path(tmp), name, n)
            mod = importlib.import_module(f"{name}.factories")
            mod.lru(64), mod.cached(64)  # warm both
            fp = mod.cached.__wrapped__  # the factory itself
            lru_ns = cf_ns = py_ns = float("inf")
            mod.cached_py(64)
            for _ in range(3):  # interleave to share machine noise
                lru_ns = min(lru_ns, per_call_ns(lambda: mod.lru(64), number, repeat))
                cf_ns = min(cf_ns, per_call_ns(lambda: mod.cached(64), number, repeat))
                py_ns = min(py_ns, per_call_ns(lambda: mod.cached_py(64), number, repeat))

            def cold_fingerprint() -> None:
                _bytecode._analysis.clear()  # cold: no code digest memoized
                flydeps.fingerprint(mod.factory(64))

            cold = per_call_ns(cold_fingerprint, 1, 3)
            refresh = per_call_ns(lambda: flydeps.fingerprint(mod.factory(64)), 1, 3)
            assert mod.cached.cache_info().misses == 1, "warm loop must only hit"
            rows.append(
                {
                    "deps": n,
                    "lru_ns": lru_ns,
                    "cached_ns": cf_ns,
                    "python_ns": py_ns,
                    "ratio": cf_ns / lru_ns,
                    "cold_fp_ms": cold / 1e6,
                    "refresh_ms": refresh / 1e6,
                }
            )
            del fp
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1,8,32,128")
    parser.add_argument("--cold-counts", default="10,100,1000")
    parser.add_argument("--number", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    warm = measure([int(c) for c in args.counts.split(",")], args.number, args.repeat)
    cold = measure([int(c) for c in args.cold_counts.split(",")], 200, 3)
    hit_path = "C" if flydeps.builds.factory._use_fastcache() else "Python"  # FLYDEPS_FASTCACHE=0: Python
    namespaces = f"watchers ({_watch.BACKEND})" if _watch.AVAILABLE else "PEP 509 tags" if _watch.TAGS else "re-read"
    info = f"CPython {platform.python_version()}, namespaces: {namespaces}, hit path: {hit_path}"
    if args.json:
        print(json.dumps({"python": info, "warm": warm, "cold": cold}, indent=2))
        return
    print(f"### Warm hit, {info}\n")
    print("| deps | lru_cache hit | cached_factory hit | ratio | (pure-Python hit path) |")
    print("|---:|---:|---:|---:|---:|")
    for r in warm:
        print(
            f"| {r['deps']} | {r['lru_ns']:.0f} ns | {r['cached_ns']:.0f} ns | {r['ratio']:.1f}x "
            f"| {r['python_ns']:.0f} ns |"
        )
    print(f"\n### Cold fingerprint, {info}\n")
    print("| helpers | cold fingerprint | re-fingerprint (code digests memoized) |")
    print("|---:|---:|---:|")
    for r in cold:
        print(f"| {r['deps']} | {r['cold_fp_ms']:.1f} ms | {r['refresh_ms']:.1f} ms |")


if __name__ == "__main__":
    main()
