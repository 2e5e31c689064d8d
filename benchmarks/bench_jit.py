"""Warm-call cost of an 8-argument FlyDSL launcher: flydeps key vs FlyDSL 0.5 vs CompiledFunction.

Run (CPU-only machine; .ci/setup_rocm.sh provides the compile root)::

    ROCM_PATH=/opt/flydeps-rocm ARCH=gfx942 python benchmarks/bench_jit.py [--repeat 7] [--json]

One process, one kernel (5 tensors, a runtime Int32, a Constexpr and a stream), compiled for
real. Rows, each the median of ``--repeat`` timing rounds:

* ``flydeps decision``: a warm ``flydsl_runtime`` launcher call under ``COMPILE_ONLY=1``:
  guard + argument signatures + target + env + lookup, returning where the launch would
  start (the issue's "warm-call decision up to the launch").
* ``FlyDSL 0.5 @flyc.jit``: FlyDSL's own warm call of the same launcher under
  ``COMPILE_ONLY=1``: trace, print the IR, hash it, hit its memory cache, stop before the
  launch. (Without COMPILE_ONLY it would go on to launch, which needs a GPU.)
* ``CompiledFunction dispatch``: ``flyc.compile(...)``'s result called directly, with the
  engine's entry point replaced by a no-op C function (there is no GPU here): FlyDSL's
  argument packing plus one foreign call, never re-checking Python state.
* ``flydeps call + dispatch``: a warm flydeps call that reaches the same no-op dispatch
  (decision + the ``CompiledFunction`` call).
* ``flydeps decision, a trace that asked FlyDSL's get_rocm_arch()``: the same launcher with
  an ``s_waitcnt`` in its kernel, whose entry's environment reads include that derived read
  (re-checked on each call, remembered until the environment changes).
* ``flydeps decision, a trace that read a tuning file``: the same launcher whose kernel
  reads its scale from a JSON file while tracing (a file read of the trace, re-checked on
  each call by one ``stat`` of the file; its bytes are digested again only when that moves).
* ``flydeps decision, a trace that asked the device's properties``: the same launcher whose
  kernel scales by ``torch.cuda.get_device_properties(0).multi_processor_count`` (a derived
  read of the trace, ``flydsl_runtime.trace.devprops``, re-checked on each call, remembered until
  the environment changes). There is no GPU here: torch's device layer answers for a
  simulated 304-CU device (:func:`_simulate_device`; torch's own Python code runs).
* ``flydeps decision, FLYDEPS_VERIFY=0.001``: the production canary
  (:mod:`flydsl_runtime.launch.verify`): every hit takes the Python warm path, and one hit in a
  thousand, chosen per entry deterministically, re-traces and compares FlyDSL's IR key; the
  row is the average over all calls, the re-traces included. ``FLYDEPS_VERIFY=0`` (set, off):
  the Python warm path alone, which any set value takes.
* ``torch.cuda.get_device_properties(0) outside a trace``: torch's own function (the
  simulated device's answer) and through the wrapper ``flydsl_runtime`` installs (what any
  caller of torch's function pays for the recording: one check of the thread's recordings).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

os.environ.setdefault("ARCH", "gfx942")
os.environ.setdefault("ROCM_PATH", "/opt/flydeps-rocm")
os.environ["FLYDSL_RUNTIME_ENABLE_CACHE"] = "0"

import flydsl.compiler as flydsl_flyc  # noqa: E402
import flydsl.expr as fx  # noqa: E402
import torch  # noqa: E402
from flydsl.compiler.jit_executor import CallState  # noqa: E402
from flydsl.expr import rocdl  # noqa: E402

import flydsl_runtime.flyc as flyc  # noqa: E402

BLOCK = 64
N = 4096


def scale(x, alpha):
    return x * alpha


@flyc.kernel
def axpy4_kernel(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor, d: fx.Tensor, out: fx.Tensor, alpha: fx.Constexpr[int]):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    out[tid] = scale(a[tid], alpha) + b[tid] + c[tid] + d[tid]


def axpy4(
    a: fx.Tensor,
    b: fx.Tensor,
    c: fx.Tensor,
    d: fx.Tensor,
    out: fx.Tensor,
    n: fx.Int32,
    alpha: fx.Constexpr[int],
    stream: fx.Stream = None,
):
    axpy4_kernel(a, b, c, d, out, alpha).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.kernel
def waited_kernel(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor, d: fx.Tensor, out: fx.Tensor, alpha: fx.Constexpr[int]):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    rocdl.s_waitcnt(vmcnt=0)  # encoded for FlyDSL's get_rocm_arch(): a derived read of the trace
    out[tid] = scale(a[tid], alpha) + b[tid] + c[tid] + d[tid]


def waited(
    a: fx.Tensor,
    b: fx.Tensor,
    c: fx.Tensor,
    d: fx.Tensor,
    out: fx.Tensor,
    n: fx.Int32,
    alpha: fx.Constexpr[int],
    stream: fx.Stream = None,
):
    waited_kernel(a, b, c, d, out, alpha).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


TUNING = os.path.join(tempfile.mkdtemp(prefix="flydeps-bench-jit-"), "tuned.json")


def tuned_scale() -> int:
    with open(TUNING) as f:  # read while tracing: the value is baked into the IR
        return int(json.load(f)["alpha"])


@flyc.kernel
def tuned_kernel(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor, d: fx.Tensor, out: fx.Tensor, alpha: fx.Constexpr[int]):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    out[tid] = scale(a[tid], tuned_scale()) + b[tid] + c[tid] + d[tid]


def tuned(
    a: fx.Tensor,
    b: fx.Tensor,
    c: fx.Tensor,
    d: fx.Tensor,
    out: fx.Tensor,
    n: fx.Int32,
    alpha: fx.Constexpr[int],
    stream: fx.Stream = None,
):
    tuned_kernel(a, b, c, d, out, alpha).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.kernel
def sized_kernel(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor, d: fx.Tensor, out: fx.Tensor, alpha: fx.Constexpr[int]):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    cus = torch.cuda.get_device_properties(0).multi_processor_count  # asked while tracing
    out[tid] = scale(a[tid], alpha * cus) + b[tid] + c[tid] + d[tid]


def sized(
    a: fx.Tensor,
    b: fx.Tensor,
    c: fx.Tensor,
    d: fx.Tensor,
    out: fx.Tensor,
    n: fx.Int32,
    alpha: fx.Constexpr[int],
    stream: fx.Stream = None,
):
    sized_kernel(a, b, c, d, out, alpha).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


class _Properties:
    name, gcnArchName, major, minor, multi_processor_count, warp_size = "MI300X", "gfx942", 9, 4, 304, 64


def _simulate_device() -> None:
    """torch's device layer answering for one 304-CU gfx942 device (no GPU here): torch's
    ``get_device_properties`` runs its own Python code; only the driver's answer is given."""
    torch.cuda._lazy_init = lambda: None  # type: ignore[assignment]
    torch.cuda.is_available = lambda: True  # type: ignore[assignment]
    torch.cuda.device_count = lambda: 1  # type: ignore[assignment]
    torch.cuda.current_device = lambda: 0  # type: ignore[assignment]
    torch.cuda._get_device_properties = lambda index: _Properties()  # type: ignore[attr-defined]


def _noop_entry() -> Callable[[int], None]:
    """A real C function taking the packed-argument pointer and doing nothing with it."""
    libc = ctypes.CDLL(None)
    address = ctypes.cast(libc.getpid, ctypes.c_void_p).value
    assert address is not None, "libc.getpid has an address"
    return ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)


def _with_noop_dispatch(compiled: flydsl_flyc.CompiledFunction) -> flydsl_flyc.CompiledFunction:
    compiled._call_state = CallState(compiled._call_spec, _noop_entry())
    compiled._runtime_ready = True
    return compiled


def _per_call_us(fn: Callable[[], object], repeat: int, budget_s: float = 0.25) -> float:
    fn()
    start, calls = time.perf_counter(), 0
    while time.perf_counter() - start < 0.02:
        fn()
        calls += 1
    number = max(1, int(calls * budget_s / 0.02))
    rounds = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        rounds.append((time.perf_counter() - t0) / number * 1e6)
    return statistics.median(rounds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    opts = parser.parse_args()

    args = (*(torch.zeros(N) for _ in range(5)), N, 2, None)
    ours = flyc.jit(axpy4)
    theirs = flydsl_flyc.jit(axpy4)

    asking = flyc.jit(waited)
    with open(TUNING, "w") as f:
        json.dump({"alpha": 2}, f)
    reading = flyc.jit(tuned)
    _simulate_device()
    sizing = flyc.jit(sized)
    os.environ["COMPILE_ONLY"] = "1"
    ours(*args)
    theirs(*args)
    asking(*args)
    reading(*args)
    sizing(*args)
    asked = [name for e in sizing.entries() for name, _v in e.env_reads.values]
    assert any(name.startswith("=torch.cuda.get_device_properties:") for name in asked), "the device query is recorded"
    assert reading.cache_info().misses == 1 and any(
        name.startswith("=file:") for e in reading.entries() for name, _v in e.env_reads.values
    ), "the trace's file read is recorded"
    rows = {
        "flydeps decision (key + lookup, up to the launch)": _per_call_us(lambda: ours(*args), opts.repeat),
        "flydeps decision, a trace that asked FlyDSL's get_rocm_arch() (its answer re-checked)": _per_call_us(
            lambda: asking(*args), opts.repeat
        ),
        "flydeps decision, a trace that read a tuning file (one stat of it per call)": _per_call_us(
            lambda: reading(*args), opts.repeat
        ),
        "flydeps decision, a trace that asked the device's properties (its answer re-checked)": _per_call_us(
            lambda: sizing(*args), opts.repeat
        ),
        "torch.cuda.get_device_properties(0) outside a trace, torch's own (simulated device)": _per_call_us(
            lambda: torch.cuda.get_device_properties.__flydeps_original__(0),  # type: ignore[attr-defined]
            opts.repeat,
        ),
        "torch.cuda.get_device_properties(0) outside a trace, through flydsl_runtime's wrapper": _per_call_us(
            lambda: torch.cuda.get_device_properties(0), opts.repeat
        ),
        "FlyDSL 0.5 @flyc.jit warm call (trace + IR key + lookup)": _per_call_us(
            lambda: theirs(*args), max(3, opts.repeat // 2), budget_s=1.0
        ),
    }
    os.environ["FLYDEPS_VERIFY"] = "0"  # set but off: what the Python warm path alone costs
    rows["flydeps decision, FLYDEPS_VERIFY=0 (set: the Python warm path, nothing re-traced)"] = _per_call_us(
        lambda: ours(*args), opts.repeat
    )
    os.environ["FLYDEPS_VERIFY"] = "0.001"  # the production canary: one hit in a thousand re-traced
    rows["flydeps decision, FLYDEPS_VERIFY=0.001 (Python warm path; 1 hit in 1,000 re-traced)"] = _per_call_us(
        lambda: ours(*args), opts.repeat
    )
    del os.environ["FLYDEPS_VERIFY"]
    del os.environ["COMPILE_ONLY"]
    compiled = _with_noop_dispatch(flydsl_flyc.compile(theirs, *args))
    rows["CompiledFunction dispatch (no-op launch)"] = _per_call_us(lambda: compiled(*args), opts.repeat)
    ours_compiled = _with_noop_dispatch(flyc.compile(ours, *args))
    assert flyc.compile(ours, *args) is ours_compiled
    rows["flydeps call + CompiledFunction dispatch (no-op launch)"] = _per_call_us(lambda: ours(*args), opts.repeat)

    decision = rows["flydeps decision (key + lookup, up to the launch)"]
    flydsl_warm = rows["FlyDSL 0.5 @flyc.jit warm call (trace + IR key + lookup)"]
    summary = {
        "python": sys.version.split()[0],
        "rows_us": rows,
        "speedup_vs_flydsl_warm": flydsl_warm / decision,
        "targets": {"decision_le_10us": decision <= 10.0, "speedup_ge_1000x": flydsl_warm / decision >= 1000},
    }
    if opts.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
        return 0
    out = ["| warm call, 8-argument launcher | µs per call |", "|---|---:|"]
    out += [f"| {name} | {us:,.2f} |" for name, us in rows.items()]
    out.append(
        f"\nflydeps decision is {flydsl_warm / decision:,.0f}x faster than FlyDSL 0.5's warm call "
        f"(Python {summary['python']}; targets: ≤ 10 µs {'met' if decision <= 10 else 'MISSED'}, "
        f"≥ 1000x {'met' if flydsl_warm / decision >= 1000 else 'MISSED'})."
    )
    sys.stdout.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
