"""Warm and cold cost at flash-attention scale: ~450 helpers over 32 modules, side by side.

Run (CPU-only machine; .ci/setup_rocm.sh provides the compile root)::

    ROCM_PATH=/opt/flydeps-rocm ARCH=gfx942 python benchmarks/bench_large.py [--repeat 7] [--json]

One process. The large launcher is written by ``benchmarks/gen_large_launcher.py`` into a
temporary directory (32 modules x 14 helpers, all run by the trace; a defaulted
``stream: fx.Stream = fx.Stream(None)``), the small one is ``bench_jit.py``'s 8-argument
launcher. Rows, each the median of ``--repeat`` rounds, all measured in this run:

* ``CompiledFunction dispatch``: FlyDSL's own launch path (argument packing + one foreign
  call) with the entry point replaced by a no-op C function (no GPU here). The issue's bar:
  flydeps' warm decision must cost no more than this.
* ``flydeps decision``: a warm flydsl_runtime call under ``COMPILE_ONLY=1`` (guard + argument
  signatures + target + env + lookup, up to the launch), stream omitted and passed.
* ``cached_factory hit`` vs ``functools.lru_cache hit``: a factory whose returned launcher
  reaches the large package, so its guard covers every binding.
* ``cold fingerprint``: ``flydeps.fingerprint`` of the large launcher in a fresh state (the
  per-process memo of code digests cleared), total and per reachable helper.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import statistics
import sys
import tempfile
import time
import weakref
from pathlib import Path
from typing import Any

os.environ.setdefault("ARCH", "gfx942")
os.environ.setdefault("ROCM_PATH", "/opt/flydeps-rocm")
os.environ["FLYDSL_RUNTIME_ENABLE_CACHE"] = "0"
sys.path.insert(0, str(Path(__file__).parent))

import flydsl.compiler as flydsl_flyc  # noqa: E402
import torch  # noqa: E402
from bench_jit import _per_call_us, _with_noop_dispatch, axpy4  # noqa: E402
from gen_large_launcher import write_package  # noqa: E402

import flydeps  # noqa: E402
import flydsl_runtime.flyc as flyc  # noqa: E402
from flydeps import _bytecode  # noqa: E402


def _load_large(tmp: Path, modules: int, helpers: int) -> Any:  # the generated package module
    write_package(tmp, "largefa", modules, helpers)
    sys.path.insert(0, str(tmp))
    import flydsl_runtime

    flydsl_runtime.install()  # the package decorates with flydsl.compiler.jit: give it ours
    try:
        return importlib.import_module("largefa.launcher")
    finally:
        flydsl_runtime.uninstall()


def _cold_fingerprint_ms(fn: object, repeat: int) -> tuple[float, int]:
    times, nodes = [], 0
    for _ in range(repeat):
        for memo in list(vars(_bytecode).values()):  # the per-code-object memos: a cold process
            if isinstance(memo, (weakref.WeakKeyDictionary, _bytecode._CodeMemo)):
                memo.clear()
        t0 = time.perf_counter()
        fp = flydeps.fingerprint(fn)
        times.append((time.perf_counter() - t0) * 1e3)
        nodes = sum(1 for n in fp.graph.nodes.values() if n.kind.value == "function")
    return statistics.median(times), nodes


def _warm_rows(large: Any, repeat: int) -> dict[str, float]:  # the generated package module
    small_args = (*(torch.zeros(4096) for _ in range(5)), 4096, 2, None)
    big_args = (*(torch.zeros(256) for _ in range(3)), 256)
    small = flyc.jit(axpy4)
    rows: dict[str, float] = {}
    compiled_small = _with_noop_dispatch(flydsl_flyc.compile(flydsl_flyc.jit(axpy4), *small_args))
    compiled_big = _with_noop_dispatch(flydsl_flyc.compile(large.launch.jit_function, *big_args))
    rows["small: CompiledFunction dispatch (no-op launch)"] = _per_call_us(lambda: compiled_small(*small_args), repeat)
    rows["large: CompiledFunction dispatch (no-op launch)"] = _per_call_us(
        lambda: compiled_big(*big_args, None), repeat
    )
    os.environ["COMPILE_ONLY"] = "1"
    try:
        small(*small_args)
        large.launch(*big_args)
        rows["small: flydeps decision, stream passed"] = _per_call_us(lambda: small(*small_args), repeat)
        rows["small: flydeps decision, stream omitted"] = _per_call_us(lambda: small(*small_args[:-1]), repeat)
        rows["large: flydeps decision, stream passed"] = _per_call_us(lambda: large.launch(*big_args, None), repeat)
        rows["large: flydeps decision, stream omitted"] = _per_call_us(lambda: large.launch(*big_args), repeat)
    finally:
        del os.environ["COMPILE_ONLY"]
    return rows


def _factory_rows(large: Any, repeat: int) -> dict[str, float]:
    def build(n: int) -> object:
        return large.launch

    ours = flydeps.cached_factory(maxsize=None)(build)
    theirs = functools.lru_cache(maxsize=None)(build)
    ours(1), theirs(1)
    return {
        "cached_factory hit (guard over the large package)": _per_call_us(lambda: ours(1), repeat),
        "functools.lru_cache hit": _per_call_us(lambda: theirs(1), repeat),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--modules", type=int, default=32)
    parser.add_argument("--helpers", type=int, default=14)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="flydeps-large-") as tmp:
        large = _load_large(Path(tmp), opts.modules, opts.helpers)
        fp = flydeps.fingerprint(large.launch)
        bindings = len(fp.guard())
        rows = _warm_rows(large, opts.repeat)
        rows.update(_factory_rows(large, opts.repeat))
        cold_ms, helpers = _cold_fingerprint_ms(large.launch, max(3, opts.repeat // 2))
    summary = {
        "python": sys.version.split()[0],
        "helpers": helpers,
        "modules": opts.modules,
        "guard_bindings": bindings,
        "rows_us": rows,
        "cold_fingerprint_ms": cold_ms,
        "cold_us_per_helper": cold_ms * 1e3 / max(helpers, 1),
    }
    if opts.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        return 0
    out = [
        f"Python {summary['python']}; large launcher: {helpers} reachable helpers over {opts.modules} modules, "
        f"{bindings} guard bindings.",
        "",
        "| row | µs per call |",
        "|---|---:|",
    ]
    out += [f"| {name} | {us:,.2f} |" for name, us in rows.items()]
    hit = rows["cached_factory hit (guard over the large package)"] / rows["functools.lru_cache hit"]
    out += [
        "",
        f"cached_factory hit / lru_cache hit: {hit:.1f}x",
        f"cold fingerprint of the large launcher: {cold_ms:,.1f} ms "
        f"({summary['cold_us_per_helper']:,.1f} µs per helper)",
    ]
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
