"""Start without tracing: a fresh process's first kernel call, flydeps' persistent index vs
FlyDSL 0.5's own disk cache (which must trace first), side by side.

Run (CPU-only machine; .ci/setup_rocm.sh provides the compile root)::

    ROCM_PATH=/opt/flydeps-rocm ARCH=gfx942 python benchmarks/bench_start.py [--rounds 5] [--json]

One temporary directory holds FlyDSL's disk cache, flydeps' persistent index and two
generated flash-attention-shaped packages (``gen_large_launcher.py``: 450 helpers over 32
modules). Launchers:

* ``small``: ``bench_jit.py``'s 8-argument one;
* the example kernels ``rmsnorm``, ``layernorm``, ``softmax``, ``fp8_quant``
  (``examples/kernels/realworld``, called as their callers call them).
  ``fp8_quant`` is a ``@flyc.jit`` method of an instance whose class has no
  ``__cache_signature__`` (persisted keyed by the instance's state);
* ``flash_attn``: FlyDSL's own generic flash-attention forward (``examples/flydsl_fa``:
  its ``kernels/attention`` and ``kernels/common`` files, ~6,400 lines reaching ~860 nodes),
  f16 ``[1, 128, 8, 64]`` tensors; its ``lru_cache``'d builder (FlyDSL's AST rewrite of the
  kernel) runs before the timed first call, on both sides;
* ``large``: 450 helpers whose arithmetic folds to a constant (FlyDSL traces it quickly);
* ``large-ir``: the same 450 helpers emitting their arithmetic as IR (``--emit-ir``);
* ``server``: one process making the first call of each launcher above in turn (the time
  is their sum: a serving process starts many kernels, and pays per-process costs once);
* ``<launcher>-x8``: one process making the first call of 8 specializations of one
  launcher (8 values of a compile-time argument: each is a new trace for FlyDSL 0.5, a
  new key for flydeps, whose dependency walk is done once), the sum; ``server-x8``: the
  32 specializations of the four launchers in one process.

The disk is warmed first (one process per launcher and tool writes FlyDSL's artifact and,
for flydeps, the index row). Then, per round and launcher, fresh processes alternate:

* ``flydeps``: ``flydsl_runtime`` launcher, first call: fingerprint (the launcher's
  dependency state), index lookup, FlyDSL artifact load — no trace, no lowering;
* ``FlyDSL 0.5``: ``flydsl.compiler.jit`` launcher, first call: trace, print and hash the
  IR, then the same disk cache hit (its first lookup hashes FlyDSL's toolchain, as FlyDSL
  0.5 does once per process). No flydeps code runs in that process: ``flydsl_runtime.flyc``,
  which ``bench_jit.py`` and the examples import, is FlyDSL's own ``flydsl.compiler`` there.

Both under ``COMPILE_ONLY=1`` (no GPU here: both stop where the launch would start). The
time is the first call alone (imports and argument creation excluded), median of rounds;
the speedup is the median of the rounds' paired ratios (each round runs the two processes
back to back), with their range. FlyDSL traces in the flydeps process are counted (must be 0).
``bound`` is the speedup a dependency check costing nothing would reach: FlyDSL's first call
over the index lookup plus FlyDSL's artifact load (its toolchain key and artifact read) of
the same round, median of rounds. ``walk-free bound`` is the speedup a dependency walk costing
nothing would reach with everything else as measured: FlyDSL's first call over flydeps'
first call minus its fingerprint (the walk) of the same round, median of rounds; below 10x,
no speed-up of the walk alone meets the target.

Importing ``flydsl_runtime`` is a cost FlyDSL 0.5 alone does not have, paid once per
process: the ``flydsl_runtime import`` column times ``import flydsl_runtime.flyc`` in the
flydeps process (after torch and FlyDSL, which both processes import), with compiled
modules kept as in an installation (``PYTHONPYCACHEPREFIX`` in the run's directory, written
by the warm-up processes); ``start speedup`` is FlyDSL's first call(s) over that import plus
flydeps' first call(s), median of the paired rounds: what a process that starts only these
kernels gains.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# The example kernels (examples/kernels/realworld, as their callers call them):
# shape -> (module, attribute path, tensor sizes, positional scalars, keyword arguments).
EXAMPLES: dict[str, tuple[str, str, tuple[int, ...], tuple, dict[str, Any]]] = {
    "rmsnorm": ("kernels.realworld.norms", "rmsnorm", (256, 4, 256), (64, 4), {}),
    "layernorm": ("kernels.realworld.norms", "layernorm", (256, 4, 4, 256), (64,), {"width": 4, "eps": 1e-5}),
    "softmax": ("kernels.realworld.softmax", "softmax_w4", (256, 256), (64,), {}),
    "fp8_quant": ("kernels.realworld.quant", "QUANT.launch", (64, 64), (64,), {}),
}
# FlyDSL's own flash-attention forward (examples/flydsl_fa, ~6,400 lines of FlyDSL's kernel
# code, ~860 nodes): shape -> (module, its builder, the builder's arguments, tensor shapes,
# dtype name, positional scalars). The builder runs before the timed first call (FlyDSL's
# AST rewrite of the kernel, ~35-100 ms on both sides); the call is what its interface makes.
SHAPED: dict[str, tuple[str, str, tuple, tuple[tuple[int, ...], ...], str, tuple]] = {
    "flash_attn": ("flydsl_fa", "launcher", (8, 64, True, "f16"), ((1, 128, 8, 64),) * 4, "float16", (1, 128)),
}
# The generated flash-attention-shaped launchers (gen_large_launcher.py, 450 helpers):
# shape -> package; "large" folds its helpers to a constant, "large-ir" emits their IR.
LARGE = {"large": "startfa", "large-ir": "startfair"}
SHAPES = ("small", *EXAMPLES, *SHAPED, *LARGE)
# Specializations: a serving process calls each launcher with several compile-time values
# (a new argument signature: FlyDSL 0.5 traces each one). "<shape>-x8": one process making
# the first call of 8 specializations of <shape> (the sum); "server-x8": all of them.
# shape -> (the compile-time argument varied, its position in the call (None: a keyword), its 8 values).
VARIED: dict[str, tuple[str, int | None, tuple]] = {
    "small": ("alpha", 6, tuple(range(1, 9))),
    "rmsnorm": ("width", 4, tuple(range(1, 9))),
    "layernorm": ("width", None, tuple(range(1, 9))),
    "fp8_quant": ("bias", None, tuple(float(i) for i in range(8))),
}
SPECIALIZED = tuple(f"{shape}-x8" for shape in VARIED)
# "server": one process making the first call of every launcher above (a process that
# serves a model starts many kernels; per-process costs are paid once).
ROWS = (*SHAPES, "server", *SPECIALIZED, "server-x8")


def _child(tool: str, shape: str, packages: str) -> None:
    """One fresh process: set up the launcher(s), time the first call(s), print JSON."""
    sys.path[:0] = [str(HERE), packages]
    from flydsl.compiler.jit_function import JitFunction

    traces: list[str] = []
    real_trace = JitFunction._trace

    def spy(self: JitFunction, *args: object, **kwargs: object) -> object:
        traces.append(self.func.__name__)
        return real_trace(self, *args, **kwargs)

    JitFunction._trace = spy  # type: ignore[method-assign]
    split: dict[str, float] = {}
    import_ms = 0.0
    if tool == "flydeps":
        import torch  # noqa: F401  (imported by both tools' launchers: not flydsl_runtime's cost)

        t0 = time.perf_counter()
        import flydsl_runtime.flyc  # noqa: F401  (what a process importing the facade pays, once)

        import_ms = (time.perf_counter() - t0) * 1e3
        from flydsl_runtime.persist import index

        jit_module = importlib.import_module("flydsl_runtime.launch.jit")
        states_module = importlib.import_module("flydsl_runtime.launch.states")  # where a miss fingerprints

        def timed(name: str, fn: Any) -> Any:
            def run(*args: Any, **kwargs: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return fn(*args, **kwargs)
                finally:
                    split[name] = split.get(name, 0.0) + (time.perf_counter() - t0) * 1e3

            return run

        for owner, name, label in (
            (states_module, "fingerprint_roots", "fingerprint_ms"),  # the launcher's dependency state
            (index, "lookup", "lookup_ms"),
            (jit_module.Launcher, "_load", "load_ms"),  # FlyDSL's artifact -> CompiledFunction
        ):
            setattr(owner, name, timed(label, getattr(owner, name)))
    if shape == "server-x8":
        calls = [call for one in VARIED for call in _specializations(tool, one)]
    elif shape.endswith("-x8"):
        calls = _specializations(tool, shape[: -len("-x8")])
    else:
        calls = [_launcher(tool, one) for one in (SHAPES if shape == "server" else (shape,))]
    first_ms = 0.0
    for launch, args, kwargs in calls:
        t0 = time.perf_counter()
        launch(*args, **kwargs)
        first_ms += (time.perf_counter() - t0) * 1e3
    result = {
        "first_call_ms": first_ms,
        "import_ms": import_ms,
        "traces": len(traces),
        "traced": traces,
        "split": split,
    }
    sys.stdout.write(json.dumps(result) + "\n")


def _specializations(tool: str, shape: str) -> list[tuple[Any, tuple, dict[str, Any]]]:
    """``shape``'s launcher called with each value of its varied compile-time argument."""
    launch, args, kwargs = _launcher(tool, shape)
    name, position, values = VARIED[shape]
    if position is None:
        return [(launch, args, {**kwargs, name: value}) for value in values]
    assert len(args) > position, (shape, name)
    return [(launch, (*args[:position], value, *args[position + 1 :]), kwargs) for value in values]


def _flydsl_only() -> None:
    """Make ``flydsl_runtime.flyc`` FlyDSL's own ``flydsl.compiler`` in this process, so the
    FlyDSL 0.5 side runs no flydeps code: importing the real ``flydsl_runtime`` would hook
    FlyDSL's toolchain key (its first disk-cache lookup would read the key flydeps
    remembered instead of hashing FlyDSL's files, as FlyDSL 0.5 alone does)."""
    import types

    import flydsl.compiler as flyc_flydsl

    stand_in = types.ModuleType("flydsl_runtime")
    stand_in.flyc = flyc_flydsl  # type: ignore[attr-defined]
    sys.modules.update({"flydsl_runtime": stand_in, "flydsl_runtime.flyc": flyc_flydsl})


def _launcher(tool: str, shape: str) -> tuple[Any, tuple, dict[str, Any]]:
    """``(launcher, args, kwargs)`` of ``shape`` for ``tool``, imported and set up."""
    import torch

    kwargs: dict[str, Any] = {}
    if tool != "flydeps":  # bench_jit and the examples import flydsl_runtime.flyc: here FlyDSL's own
        _flydsl_only()
    if shape == "small":
        enable_cache = os.environ["FLYDSL_RUNTIME_ENABLE_CACHE"]
        from bench_jit import axpy4

        os.environ["FLYDSL_RUNTIME_ENABLE_CACHE"] = enable_cache  # bench_jit turns it off at import

        if tool == "flydeps":
            import flydsl_runtime.flyc as flyc

            launch: Any = flyc.jit(axpy4)
        else:
            import flydsl.compiler as flyc_flydsl

            launch = flyc_flydsl.jit(axpy4)
        return launch, (*(torch.zeros(4096) for _ in range(5)), 4096, 2), kwargs
    if shape in EXAMPLES:
        module_name, path, sizes, scalars, kwargs = EXAMPLES[shape]
        sys.path.insert(0, str(HERE.parent / "examples"))
        launch = importlib.import_module(module_name)
        for part in path.split("."):
            launch = getattr(launch, part)
        return launch, (*(torch.zeros(n) for n in sizes), *scalars), dict(kwargs)
    if shape in SHAPED:
        module_name, builder, built_for, shapes, dtype, scalars = SHAPED[shape]
        sys.path.insert(0, str(HERE.parent / "examples"))
        launch = getattr(importlib.import_module(module_name), builder)(*built_for)
        tensors = (torch.zeros(dims, dtype=getattr(torch, dtype)) for dims in shapes)
        return launch, (*tensors, *scalars), kwargs
    package = LARGE[shape]
    if tool == "flydeps":
        import flydsl_runtime

        flydsl_runtime.install()
    try:
        launch = importlib.import_module(f"{package}.launcher").launch
    finally:
        if tool == "flydeps":
            flydsl_runtime.uninstall()
    return launch, (*(torch.zeros(256) for _ in range(3)), 256), kwargs


def _run(tool: str, shape: str, packages: Path, env: dict[str, str]) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", tool, shape, str(packages)]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench_start: the {tool} {shape} process failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    parser.add_argument("--only", nargs="+", choices=ROWS, metavar="ROW", help=f"rows to run (of {', '.join(ROWS)})")
    parser.add_argument("--child", nargs=3, metavar=("TOOL", "SHAPE", "PACKAGES"), help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.child:
        _child(*opts.child)
        return 0
    sys.path.insert(0, str(HERE))
    from gen_large_launcher import write_package

    with tempfile.TemporaryDirectory(prefix="flydeps-start-") as tmp:
        packages = Path(tmp) / "packages"
        write_package(packages, "startfa", 32, 14)
        write_package(packages, "startfair", 32, 14, emit_ir=True)
        env = dict(os.environ)
        env.update(
            ARCH=env.get("ARCH", "gfx942"),
            ROCM_PATH=env.get("ROCM_PATH", "/opt/flydeps-rocm"),
            COMPILE_ONLY="1",
            FLYDSL_RUNTIME_CACHE_DIR=str(Path(tmp) / "flydsl-cache"),
            FLYDSL_RUNTIME_ENABLE_CACHE="1",
            FLYDEPS_CACHE_DIR=str(Path(tmp) / "flydeps-cache"),
        )
        env.pop("FLYDEPS_VERIFY", None)
        # Compiled modules kept, as in any installation (here in a directory of this run's):
        # the import column is what a deployed process pays.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
        shapes, tools = tuple(opts.only or ROWS), ("flydeps", "FlyDSL 0.5")
        for shape in shapes:  # warm disk: FlyDSL's artifact and flydeps' row
            for tool in ("flydeps", "flydsl"):
                _run(tool, shape, packages, env)
        samples: dict[tuple[str, str], list[dict[str, Any]]] = {(t, s): [] for t in tools for s in shapes}
        for _ in range(opts.rounds):
            for shape in shapes:
                samples[("flydeps", shape)].append(_run("flydeps", shape, packages, env))
                samples[("FlyDSL 0.5", shape)].append(_run("flydsl", shape, packages, env))
    summary: dict[str, Any] = {"python": sys.version.split()[0], "rounds": opts.rounds, "rows": {}}
    for shape in shapes:
        ours, theirs = samples[("flydeps", shape)], samples[("FlyDSL 0.5", shape)]
        split_keys = sorted({k for s in ours for k in s["split"]})
        summary["rows"][shape] = {
            "flydeps_first_call_ms": statistics.median(s["first_call_ms"] for s in ours),
            "flydeps_import_ms": statistics.median(s["import_ms"] for s in ours),
            "flydeps_traces": max(s["traces"] for s in ours),
            "flydeps_split_ms": {k: statistics.median(s["split"].get(k, 0.0) for s in ours) for k in split_keys},
            "flydsl_first_call_ms": statistics.median(s["first_call_ms"] for s in theirs),
            "flydsl_traces": min(s["traces"] for s in theirs),
        }
        row = summary["rows"][shape]
        # Paired by round (the two processes of a round ran back to back): a slow stretch of
        # this noisy machine moves both sides of a pair, not one median.
        ratios = sorted(t["first_call_ms"] / o["first_call_ms"] for o, t in zip(ours, theirs))
        row["speedup"] = statistics.median(ratios)
        row["speedup_range"] = [ratios[0], ratios[-1]]
        # A process's whole start: importing flydsl_runtime (once) and the first call(s).
        row["start_speedup"] = statistics.median(
            t["first_call_ms"] / (o["first_call_ms"] + o["import_ms"]) for o, t in zip(ours, theirs)
        )
        # The most a free dependency check could reach: FlyDSL's first call over what the
        # index lookup and FlyDSL's artifact load alone cost in the same round.
        floors = [o["split"].get("lookup_ms", 0.0) + o["split"].get("load_ms", 0.0) for o in ours]
        row["bound"] = statistics.median(t["first_call_ms"] / f for f, t in zip(floors, theirs) if f > 0)
        # The most a free dependency walk could reach, everything else (argument key, guard,
        # lookup, load, FlyDSL's own per-call work) as measured in the same round.
        rests = [o["first_call_ms"] - o["split"].get("fingerprint_ms", 0.0) for o in ours]
        row["walk_free_bound"] = statistics.median(t["first_call_ms"] / r for r, t in zip(rests, theirs) if r > 0)
    if opts.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        return 0
    out = [
        f"Python {summary['python']}; fresh process, warm disk, first call (COMPILE_ONLY=1), "
        f"median of {opts.rounds} rounds.",
        "",
        "| launcher | FlyDSL 0.5 first call | flydeps first call | speedup (paired rounds: median, range) "
        "| flydeps: fingerprint / lookup / load | bound (FlyDSL ÷ (lookup + load)) "
        "| walk-free bound (FlyDSL ÷ (first call − fingerprint)) | traces (flydeps, FlyDSL) "
        "| flydsl_runtime import | start speedup (import + first call) |",
        "|---|---:|---:|---:|---|---:|---:|---|---:|---:|",
    ]
    for shape, row in summary["rows"].items():
        split = row["flydeps_split_ms"]
        parts = " / ".join(f"{split.get(k, 0.0):.1f}" for k in ("fingerprint_ms", "lookup_ms", "load_ms"))
        out.append(
            f"| {shape} | {row['flydsl_first_call_ms']:.1f} ms | {row['flydeps_first_call_ms']:.1f} ms "
            f"| {row['speedup']:.1f}x ({row['speedup_range'][0]:.1f}-{row['speedup_range'][1]:.1f}) "
            f"| {parts} ms | {row['bound']:.1f}x | {row['walk_free_bound']:.1f}x "
            f"| {row['flydeps_traces']}, {row['flydsl_traces']} "
            f"| {row['flydeps_import_ms']:.1f} ms | {row['start_speedup']:.1f}x |"
        )
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
