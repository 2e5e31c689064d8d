"""Warm and cold cost at flash-attention scale: ~450 helpers over 32 modules, side by side.

Run (CPU-only machine; .ci/setup_rocm.sh provides the compile root)::

    ROCM_PATH=/opt/flydeps-rocm ARCH=gfx942 python benchmarks/bench_large.py [--repeat 7] [--json] [--callgrind]

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

``--callgrind`` also counts the warm rows' instructions per call under valgrind's callgrind,
in one child process: each row runs ``--calls`` times inside one ``itertools.dropwhile``
step, the only C function collected, dumped after each row; an empty call's count is
subtracted. Instruction counts do not move with the machine's load, seconds do.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import weakref
from collections import deque
from collections.abc import Callable
from itertools import dropwhile, repeat
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
from flydeps.code import bytecode as _bytecode  # noqa: E402


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


def _warm_callables(large: Any) -> dict[str, Callable[[], object]]:  # the generated package module
    """The warm rows as zero-argument calls, each called once (compiled, warm). Leaves
    ``COMPILE_ONLY=1`` set: the decisions stop where the launch would start."""
    small_args = (*(torch.zeros(4096) for _ in range(5)), 4096, 2, None)
    big_args = (*(torch.zeros(256) for _ in range(3)), 256)
    small = flyc.jit(axpy4)
    compiled_small = _with_noop_dispatch(flydsl_flyc.compile(flydsl_flyc.jit(axpy4), *small_args))
    compiled_big = _with_noop_dispatch(flydsl_flyc.compile(large.launch.jit_function, *big_args))
    os.environ["COMPILE_ONLY"] = "1"  # CompiledFunction.__call__ does not read it
    rows: dict[str, Callable[[], object]] = {
        "small: CompiledFunction dispatch (no-op launch)": lambda: compiled_small(*small_args),
        "large: CompiledFunction dispatch (no-op launch)": lambda: compiled_big(*big_args, None),
        "small: flydeps decision, stream passed": lambda: small(*small_args),
        "small: flydeps decision, stream omitted": lambda: small(*small_args[:-1]),
        "large: flydeps decision, stream passed": lambda: large.launch(*big_args, None),
        "large: flydeps decision, stream omitted": lambda: large.launch(*big_args),
    }
    for row in rows.values():
        row()
    return rows


def _warm_rows(large: Any, repeat: int) -> dict[str, float]:  # the generated package module
    try:
        return {name: _per_call_us(row, repeat) for name, row in _warm_callables(large).items()}
    finally:
        del os.environ["COMPILE_ONLY"]


def callgrind_child(calls: int, modules: int, helpers: int) -> None:
    """Under valgrind (see :func:`_callgrind_rows`): each row ``calls`` times inside one
    ``itertools.dropwhile`` step, the only C function collected and dumped after."""
    with tempfile.TemporaryDirectory(prefix="flydeps-large-") as tmp:
        rows = _warm_callables(_load_large(Path(tmp), modules, helpers))
        rows[_EMPTY] = lambda: None  # the loop's own cost, subtracted from every row
        for row in rows.values():
            deque(dropwhile(_always(row), repeat(None, calls)), maxlen=0)
        sys.stdout.write(json.dumps(list(rows)) + "\n")


_EMPTY = "empty call"


def _always(row: Callable[[], object]) -> Callable[[object], bool]:
    """A dropwhile predicate: run the row, keep dropping (so one step runs every call)."""

    def predicate(_item: object) -> bool:
        row()
        return True

    return predicate


def _callgrind_rows(calls: int, modules: int, helpers: int) -> dict[str, float]:
    """Instructions per call of each warm row, counted by callgrind in one child process
    (collection only inside ``dropwhile_next``, one dump per row): independent of load."""
    with tempfile.TemporaryDirectory(prefix="flydeps-callgrind-") as out:
        base = Path(out) / "cg.out"
        command = [
            "valgrind",
            "--tool=callgrind",
            "--collect-atstart=no",
            "--toggle-collect=dropwhile_next",
            "--dump-after=dropwhile_next",
            f"--callgrind-out-file={base}",
            sys.executable,
            __file__,
            "--callgrind-child",
            str(calls),
            f"--modules={modules}",
            f"--helpers={helpers}",
        ]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"bench_large: the callgrind child failed:\n{done.stderr[-3000:]}")
        names = json.loads(done.stdout.strip().splitlines()[-1])
        dumps = sorted(Path(out).glob("cg.out.*"), key=lambda f: int(f.suffix[1:]))
        if len(dumps) < len(names):
            raise SystemExit(f"bench_large: {len(dumps)} callgrind dumps for {len(names)} rows")
        totals = []
        for dump in dumps[-len(names) :]:  # an earlier dropwhile (library code) dumps first
            line = next(x for x in dump.read_text().splitlines() if x.startswith("totals:"))
            totals.append(int(line.split()[1]) / calls)
    per_call = dict(zip(names, totals))
    empty = per_call.pop(_EMPTY)
    return {name: count - empty for name, count in per_call.items()}


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


def _over_dispatch(rows: dict[str, float]) -> dict[str, float]:
    """Each decision row over the dispatch row of the same launcher."""
    return {
        name: value / rows[f"{name.split(':')[0]}: CompiledFunction dispatch (no-op launch)"]
        for name, value in rows.items()
        if "decision" in name
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--modules", type=int, default=32)
    parser.add_argument("--helpers", type=int, default=14)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="also count instructions per warm call with valgrind's callgrind (one child process, ~2 min)",
    )
    parser.add_argument("--calls", type=int, default=2000, help="calls per row under callgrind")
    parser.add_argument("--callgrind-child", type=int, metavar="CALLS", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.callgrind_child:
        callgrind_child(opts.callgrind_child, opts.modules, opts.helpers)
        return 0
    with tempfile.TemporaryDirectory(prefix="flydeps-large-") as tmp:
        large = _load_large(Path(tmp), opts.modules, opts.helpers)
        fp = flydeps.fingerprint(large.launch)
        bindings = len(fp.guard())
        rows = _warm_rows(large, opts.repeat)
        rows.update(_factory_rows(large, opts.repeat))
        cold_ms, helpers = _cold_fingerprint_ms(large.launch, max(3, opts.repeat // 2))
    instructions = _callgrind_rows(opts.calls, opts.modules, opts.helpers) if opts.callgrind else None
    summary = {
        "python": sys.version.split()[0],
        "helpers": helpers,
        "modules": opts.modules,
        "guard_bindings": bindings,
        "rows_us": rows,
        "cold_fingerprint_ms": cold_ms,
        "cold_us_per_helper": cold_ms * 1e3 / max(helpers, 1),
        "decision_over_dispatch": _over_dispatch(rows),
        "instructions_per_call": instructions,
        "instructions_over_dispatch": _over_dispatch(instructions) if instructions else None,
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
    out += ["", "decision / CompiledFunction dispatch of the same launcher (target <= 1):", ""]
    out += [f"- {name}: {ratio:.2f}" for name, ratio in summary["decision_over_dispatch"].items()]
    if instructions:
        out += ["", f"callgrind, instructions per call ({opts.calls} calls per row, loop subtracted):", ""]
        out += ["| row | instructions | / dispatch |", "|---|---:|---:|"]
        ratios = summary["instructions_over_dispatch"]
        out += [f"| {name} | {count:,.0f} | {ratios.get(name, 1.0):.2f} |" for name, count in instructions.items()]
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
