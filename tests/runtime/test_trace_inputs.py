"""What a FlyDSL trace reads besides code (issue 7.2, 7.4, 7.5), on real CPU compiles.

Every decision is checked against FlyDSL's own IR key from a fresh plain-FlyDSL trace of the
same call (``JitFunction._compile_or_execute(..., execute=False)``): a launcher that answers
from its cache must hold an entry whose IR key equals the fresh one (else it is stale), and a
retrace is asserted only where the fresh IR key moved.
"""

from __future__ import annotations

import enum
import logging
import math
import re
import subprocess
import sys

import pytest

pytest.importorskip("flydsl")

import torch  # noqa: E402

from flydsl_runtime import Launcher
from flydsl_runtime.trace import target  # noqa: E402

pytestmark = pytest.mark.usefixtures("compile_only")

N = 1024


def _args(n: int = N) -> tuple:
    return (torch.zeros(n), torch.zeros(n), n)


def fresh_ir_key(launcher: Launcher, *args: object, bound: object = None) -> str:
    """FlyDSL's IR key of a fresh trace of this call (no flydsl_runtime decision involved)."""
    jf = launcher.jit_function
    jf._compile_or_execute(args if bound is None else (bound, *args), {}, execute=False)
    return jf._last_compiled[0]


def served_ir_key(launcher: Launcher, *args: object, bound: object = None) -> tuple[str, bool]:
    """Call the launcher; return the IR key of the entry that answered, and if it traced."""
    misses = launcher.cache_info().misses
    (launcher if bound is None else launcher.__get__(bound))(*args)
    traced = launcher.cache_info().misses != misses
    # The entry that answered is the one stored under the key the launcher computes for it.
    state = launcher._owners[None if bound is None else type(bound)]
    key = launcher._key(state, bound, launcher._bind(args, {}))
    return launcher._entries[key].ir_key, traced


def check(launcher: Launcher, *args: object, bound: object = None) -> tuple[str, bool]:
    """One call, judged by the oracle: the served IR must be what FlyDSL traces now."""
    served, traced = served_ir_key(launcher, *args, bound=bound)
    assert served == fresh_ir_key(launcher, *args, bound=bound), "STALE: served IR differs from a fresh trace"
    return served, traced


# --- 7.2: environment reads made while tracing -------------------------------------------


@pytest.mark.parametrize(
    ("name", "value", "how"),
    [
        ("FA_PP", "0", "environ.get via `from os import environ`"),
        ("FDK_ENABLE_DMA", "1", "os.getenv"),
        ("FDK_EXTRA", "", "`in os.environ`"),
    ],
)
def test_env_read_during_trace_is_rechecked(fdk, monkeypatch, caplog, name, value, how) -> None:
    mod = fdk.module("trace_inputs")
    for n in ("FA_PP", "FDK_ENABLE_DMA", "FDK_EXTRA"):
        monkeypatch.delenv(n, raising=False)
    args = _args()
    first, traced = check(mod.env_launch, *args)
    assert traced
    assert check(mod.env_launch, *args) == (first, False)  # warm: a hit
    monkeypatch.setenv(name, value)
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        second, traced = check(mod.env_launch, *args)
    assert traced and second != first, how
    assert f"env {name} (read by the trace): <unset> -> {value!r}" in caplog.text
    assert check(mod.env_launch, *args) == (second, False)
    monkeypatch.delenv(name)
    third, traced = check(mod.env_launch, *args)
    assert traced and third == first


def test_env_reads_are_recorded_per_entry(fdk, monkeypatch) -> None:
    mod = fdk.module("trace_inputs")
    monkeypatch.setenv("FA_PP", "1")
    mod.env_launch(*_args())
    (entry,) = mod.env_launch.entries()
    reads = dict(entry.env_reads.values)
    assert reads["FA_PP"] == "1"
    assert reads["FDK_ENABLE_DMA"] is None and reads["FDK_EXTRA"] is None
    assert "ARCH" not in reads  # read by FlyDSL's target resolution, keyed as the resolved target


def test_unrelated_env_change_is_a_hit(fdk, monkeypatch) -> None:
    mod = fdk.module("trace_inputs")
    args = _args()
    check(mod.env_launch, *args)
    monkeypatch.setenv("FDK_SOMETHING_ELSE", "1")
    assert check(mod.env_launch, *args)[1] is False


def test_env_read_by_a_cached_factory_inside_the_trace(fdk, monkeypatch) -> None:
    """The second launcher's trace gets the factory's result from its cache (no build, no
    read): the factory's recorded reads are still the trace's (flydeps.observe.environ.note)."""
    mod = fdk.module("trace_inputs")
    monkeypatch.delenv("FDK_UNROLL", raising=False)
    args = _args()
    first, _ = check(mod.unrolled_first, *args)
    second, _ = check(mod.unrolled_second, *args)
    assert mod.unroll_factor.cache_info().misses == 1
    assert ("FDK_UNROLL", None) in mod.unrolled_second.entries()[0].env_reads.values
    monkeypatch.setenv("FDK_UNROLL", "3")
    for launcher, before in ((mod.unrolled_first, first), (mod.unrolled_second, second)):
        after, traced = check(launcher, *args)
        assert traced and after != before


# --- files the trace reads, modules it imports first ----------------------------------------


def test_a_file_and_a_listing_read_while_tracing_are_rechecked(fdk, caplog) -> None:
    """A tuning file read by a helper while tracing is baked into the IR: editing it must
    retrace (FlyDSL 0.5's re-trace sees it; a cache keyed by code alone served the old IR),
    rewriting the same bytes must not, and a config added to a listed directory must."""
    mod = fdk.module("tuned")
    args = (torch.zeros(N), torch.zeros(N), torch.zeros(N), N)
    first, traced = check(mod.tuned_launch, *args)
    assert traced and check(mod.tuned_launch, *args) == (first, False)
    tuned = fdk.root / fdk.name / "tuned.json"
    tuned.write_text('{"factor": 3.0}')
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        edited, traced = check(mod.tuned_launch, *args)
    assert traced and edited != first
    assert f"file {tuned} (read by the trace): contents b3:" in caplog.text
    tuned.write_text('{"factor": 3.0}')  # the same bytes again
    assert check(mod.tuned_launch, *args) == (edited, False)
    (fdk.root / fdk.name / "tuned_configs" / "gfx950.json").write_text("{}")
    listed, traced = check(mod.tuned_launch, *args)
    assert traced and listed not in (first, edited)
    (entry,) = [e for e in mod.tuned_launch.entries() if e.ir_key == listed]
    assert sorted(n for n, _v in entry.env_reads.values if n.startswith("=")) == [
        f"=file:{tuned}",
        f"=listdir:{fdk.root / fdk.name / 'tuned_configs'}",
    ]  # nothing FlyDSL or the import system read: only the helpers' files


_ABSOLUTE_IMPORT = """\
import flydsl.expr as fx

import flydsl_runtime.flyc as flyc


def lazy_factor():
    import {package}.tuned_lazy  # first imported by the first trace

    return {package}.tuned_lazy.FACTOR


@flyc.kernel
def lazy_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * 64
    c[tid] = a[tid] * lazy_factor()


@flyc.jit
def lazy_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    lazy_kernel(a, c).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))
"""


def test_a_module_the_trace_imports_first_costs_one_more_trace_not_one_per_call(fdk, traces) -> None:
    """``import pkg.x`` inside a helper: before the first trace the module is not loaded (an
    unresolved name), after it, it is; that trace is not kept. Every later call used to trace
    again (the guard does not watch ``sys.modules``). ``from . import x`` was already fine:
    the guard watches the package's namespace, which the import adds ``x`` to."""
    (fdk.root / fdk.name / "tuned_absolute.py").write_text(_ABSOLUTE_IMPORT.format(package=fdk.name))
    mod = fdk.module("tuned_absolute")
    args = _args()
    mod.lazy_launch(*args)  # traces, imports the module, is not kept
    assert traces == ["lazy_launch"] and not mod.lazy_launch.entries()
    assert check(mod.lazy_launch, *args)[1] is True  # traces once more, against the new state: kept
    assert check(mod.lazy_launch, *args)[1] is False
    assert check(mod.lazy_launch, *args)[1] is False


# --- 7.2: the target is FlyDSL's own, and arch queries inside the trace are reads ----------

_SELECTORS = ("ARCH", "FLYDSL_GPU_ARCH", "HSA_OVERRIDE_GFX_VERSION")
_COMBOS = [
    (arch, gpu, hsa)
    for arch in (None, "gfx942", "gfx950")
    for gpu in (None, "gfx950", "gfx1100")
    for hsa in (None, "9.4.2", "11.0.0")
]


def _compiled_chip(launcher: Launcher, *args: object) -> str:
    """The arch FlyDSL put in the compiled module (``#rocdl.target<chip = ...>``)."""
    jf = launcher.jit_function
    jf._compile_or_execute(args, {}, execute=False)
    artifact = jf._last_compiled[1]
    chips = set(re.findall(r'chip = \\?"(gfx[0-9a-z]+)', artifact._ir_text))
    assert len(chips) == 1, chips
    return chips.pop()


@pytest.mark.parametrize(("arch", "gpu", "hsa"), _COMBOS)
def test_target_key_is_what_flydsl_compiles_for(fdk, monkeypatch, arch, gpu, hsa) -> None:
    mod = fdk.module("vadd")
    for name, value in zip(_SELECTORS, (arch, gpu, hsa)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    args = (*_args()[:2], torch.zeros(N), N)
    compiled_for = _compiled_chip(mod.vadd, *args)
    assert target.current_target()[0][1] == compiled_for
    mod.vadd(*args)
    (entry,) = mod.vadd.entries()
    assert entry.key[2][0][1] == compiled_for


def test_arch_query_inside_the_trace_is_a_read_of_its_answer(fdk, monkeypatch, caplog) -> None:
    """ARCH=gfx942 picks the target, but s_waitcnt encodes for FLYDSL_GPU_ARCH (FlyDSL's
    get_rocm_arch()): flipping FLYDSL_GPU_ARCH keeps the target and changes the IR. The trace
    depends on get_rocm_arch()'s answer (a derived read), not on the variables behind it."""
    mod = fdk.module("trace_inputs")
    monkeypatch.setenv("ARCH", "gfx942")
    monkeypatch.delenv("FLYDSL_GPU_ARCH", raising=False)
    monkeypatch.delenv("HSA_OVERRIDE_GFX_VERSION", raising=False)
    args = _args()
    first, _ = check(mod.wait_launch, *args)
    monkeypatch.setenv("FLYDSL_GPU_ARCH", "gfx1100")
    assert target.current_target()[0][1] == "gfx942"  # FlyDSL's precedence: ARCH first
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        second, traced = check(mod.wait_launch, *args)
    assert traced and second != first
    assert "FlyDSL's get_rocm_arch() (read by the trace): 'gfx942' -> 'gfx1100'" in caplog.text
    assert check(mod.wait_launch, *args) == (second, False)


def test_arch_env_and_detection_share_entries_with_arch_queries(fdk, monkeypatch) -> None:
    """Seed 003 still holds for a kernel that queries the arch: ARCH=gfx942 vs detection."""
    mod = fdk.module("trace_inputs")
    for name in _SELECTORS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ARCH", "gfx942")
    args = _args()
    first, _ = check(mod.wait_launch, *args)
    monkeypatch.delenv("ARCH")
    assert check(mod.wait_launch, *args) == (first, False)


# --- 7.4: a kernel's decorator arguments and name ----------------------------------------


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("known_block_size=[BLOCK, 1, 1]", "known_block_size=[BLOCK * 2, 1, 1]"),
        ('name="fdk_named"', 'name="fdk_renamed"'),
        ("_plain", "_plain_v2"),  # the kernel's function name is its gpu.func symbol
    ],
    ids=["known_block_size", "name", "function-name"],
)
def test_kernel_decorator_arguments_reach_the_key(fdk, old, new) -> None:
    mod = fdk.module("trace_inputs")
    args = (*_args(), 64)
    first, _ = check(mod.args_launch, *args)
    fdk.edit("kernel_args", old, new)
    second, traced = check(mod.args_launch, *args)
    assert traced and second != first


@pytest.mark.parametrize(
    ("kernel", "attr", "value"),
    [("named_kernel", "_name", "fdk_renamed"), ("sized_kernel", "_known_block_size", [32, 1, 1])],
)
def test_kernel_attribute_rebound_after_decoration_retraces(fdk, kernel, attr, value) -> None:
    """The kernel object's own attributes are guarded, not only its decorator's source."""
    mod = fdk.module("trace_inputs")
    args = (*_args(), 64)
    first, _ = check(mod.args_launch, *args)
    setattr(getattr(fdk.module("kernel_args"), kernel), attr, value)
    second, traced = check(mod.args_launch, *args)
    assert traced and second != first


def test_kernel_module_reload_without_edit_is_a_hit(fdk) -> None:
    mod = fdk.module("trace_inputs")
    args = (*_args(), 64)
    first, _ = check(mod.args_launch, *args)
    fdk.edit("kernel_args", "BLOCK = 64", "BLOCK = 64")
    assert check(mod.args_launch, *args) == (first, False)


# --- 7.5: compile-time values keyed by exact type and bits -----------------------------


def test_constexpr_float_keyed_by_bits(fdk) -> None:
    mod = fdk.module("trace_inputs")
    n = _args()
    zero, traced = check(mod.scale_launch, *n, 0.0)
    neg, traced_neg = check(mod.scale_launch, *n, -0.0)
    assert traced and traced_neg and neg != zero
    assert check(mod.scale_launch, *n, 0.0) == (zero, False)
    nan = float("nan")
    first_nan, traced = check(mod.scale_launch, *n, nan)
    assert traced
    assert check(mod.scale_launch, *n, nan) == (first_nan, False)
    assert check(mod.scale_launch, *n, float("nan")) == (first_nan, False)  # same bits, other object
    assert check(mod.scale_launch, *n, -math.nan)[1]  # sign bit set: other bits, other entry
    assert mod.scale_launch.cache_info().currsize == 4


class Mode(enum.IntEnum):
    ONE = 1


@pytest.mark.parametrize(
    "values",
    [(True, 1, 1.0), ((1, 0.0), (1, -0.0)), (1, Mode.ONE)],
    ids=["bool-int-float", "tuple-with-signed-zero", "int-subclass"],
)
def test_constexpr_values_equal_by_eq_get_their_own_entries(fdk, values) -> None:
    mod = fdk.module("trace_inputs")
    n = _args()
    for value in values:
        assert check(mod.pick_launch, *n, value)[1], value
    for value in values:
        assert check(mod.pick_launch, *n, value)[1] is False, value
    assert mod.pick_launch.cache_info().currsize == len(values)


# --- 7.8: reload without an edit, generated names, classes holding a jit method ----------


def _rewritten_calls(fdk) -> list:
    mod = fdk.module("rewritten")
    runner = mod.Runner()
    return [(mod.direct, None), (mod.via_class, None), (mod.Runner.launch, runner)]


def test_reload_without_edit_is_a_hit(fdk, caplog) -> None:
    calls, args = _rewritten_calls(fdk), _args()
    first = [check(launcher, *args, bound=bound)[0] for launcher, bound in calls]
    fdk.edit("rewritten_helpers", "def combine", "def combine")  # rewrite the file, reload
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        again = [check(launcher, *args, bound=bound) for launcher, bound in calls]
    assert again == [(key, False) for key in first]
    assert "retracing" not in caplog.text


def test_edit_after_reload_leads_with_the_real_reason(fdk, caplog) -> None:
    calls, args = _rewritten_calls(fdk), _args()
    first = [check(launcher, *args, bound=bound)[0] for launcher, bound in calls]
    fdk.edit("rewritten_helpers", "range(2)", "range(3)")
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        again = [check(launcher, *args, bound=bound) for launcher, bound in calls]
    assert all(traced and key != old for (key, traced), old in zip(again, first))
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("retracing")]
    assert len(lines) == 3
    for line in lines:
        reasons = line.partition(": ")[2].split("; ")
        assert reasons[0] == f"helper {fdk.name}.rewritten_helpers:branchy_kernel changed", line
        assert not any(generated in line for generated in ("__then", "__else", "__for_body")), line


# --- 7.6: debug info puts source positions in the IR -------------------------------------


@pytest.mark.parametrize("debug_info", ["1", None])
def test_moving_a_helper_follows_debug_info(fdk, monkeypatch, caplog, debug_info) -> None:
    """A blank line above a helper moves its line table: in the IR only with debug info on."""
    if debug_info is None:
        monkeypatch.delenv("FLYDSL_DEBUG_ENABLE_DEBUG_INFO", raising=False)
    else:
        monkeypatch.setenv("FLYDSL_DEBUG_ENABLE_DEBUG_INFO", debug_info)
    mod = fdk.module("rewritten")
    args = _args()
    first, _ = check(mod.direct, *args)
    fdk.edit("rewritten_helpers", "\n\n@flyc.kernel\ndef branchy_kernel", "\n\n\n@flyc.kernel\ndef branchy_kernel")
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        second, traced = check(mod.direct, *args)
    assert traced is (debug_info is not None)
    assert (second != first) is traced  # the oracle agrees: the IR moved exactly when we retraced
    if traced:
        assert "source positions changed" in caplog.text


def test_flydsl_modules_imported_before_flydsl_runtime_ask_the_keyed_arch_query() -> None:
    """FlyDSL's buffer ops and s_waitcnt call the get_rocm_arch they imported by name: a
    module imported before flydsl_runtime (a kernel file importing flydsl first) and one
    imported after both call the keyed query, whose answer, not PATH, a trace depends on."""
    code = (
        "import flydsl.expr.rocdl.universal as before\n"
        "import flydsl_runtime.flyc\n"
        "import flydsl.expr.rocdl.utils as after\n"
        "from flydsl.runtime import device\n"
        "from flydsl.compiler.backends import rocm\n"
        "keyed = device.get_rocm_arch\n"
        "print(hasattr(keyed, '__flydeps_original__'), before.get_rocm_arch is keyed, "
        "after.get_rocm_arch is keyed, rocm.get_rocm_arch is keyed)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert done.stdout.split() == ["True"] * 4
