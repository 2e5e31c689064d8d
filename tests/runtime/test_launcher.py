"""The dependency-aware launcher on real FlyDSL compiles (CPU-only, COMPILE_ONLY=1)."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest

pytest.importorskip("flydsl")

import torch  # noqa: E402

from flydeps import GlobalDriftError  # noqa: E402
from flydsl_runtime import CacheInfo, Launcher
from flydsl_runtime.persist import index  # noqa: E402

pytestmark = pytest.mark.usefixtures("compile_only")

N = 1024


def _tensors(k: int = 3, n: int = N) -> tuple[torch.Tensor, ...]:
    return tuple(torch.zeros(n) for _ in range(k))


def _ir_keys(launcher: Launcher) -> list[str]:
    return [e.ir_key for e in launcher.entries()]


def test_vector_add_warm_call_is_a_hit_without_trace(fdk, traces) -> None:
    vadd = fdk.module("vadd")
    assert isinstance(vadd.vadd, Launcher)
    a, b, c = _tensors()
    assert vadd.vadd(a, b, c, N) is None  # COMPILE_ONLY: compiled, not launched
    assert traces == ["vadd"]
    for _ in range(5):
        vadd.vadd(a, b, c, N)
    vadd.vadd(a, b, c=c, n=N)  # keyword form keys alike
    assert traces == ["vadd"]
    assert vadd.vadd.cache_info() == CacheInfo(hits=6, misses=1, currsize=1)
    (entry,) = vadd.vadd.entries()
    assert entry.compiled is None and len(entry.ir_key) == 64


def test_helper_monkeypatch_retraces_with_different_ir(fdk, traces, monkeypatch, caplog) -> None:
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    vadd.vadd(a, b, c, N)
    monkeypatch.setattr(vadd, "scale", lambda x: x * 3)
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        vadd.vadd(a, b, c, N)
    assert traces == ["vadd", "vadd"]
    first, second = _ir_keys(vadd.vadd)
    assert first != second
    assert "scale" in caplog.text and "retracing" in caplog.text


def test_code_swap_of_helper_retraces(fdk, traces) -> None:
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    vadd.vadd(a, b, c, N)
    vadd.scale.__code__ = (lambda x: x - x).__code__
    vadd.vadd(a, b, c, N)
    assert len(set(_ir_keys(vadd.vadd))) == 2 and len(traces) == 2


def test_reduction_helper_edit_and_reload_retraces(fdk, traces) -> None:
    red = fdk.module("reduce")
    x, out = torch.zeros(4 * N), torch.zeros(N)
    red.partial_sum(x, out, N)
    red.partial_sum(x, out, N)
    assert len(traces) == 1
    fdk.edit("reduce_helpers", "return acc + x", "return acc * x")
    red.partial_sum(x, out, N)
    assert len(traces) == 2
    assert len(set(_ir_keys(red.partial_sum))) == 2


def test_comment_and_docstring_edit_and_reload_does_not_retrace(fdk, traces) -> None:
    red = fdk.module("reduce")
    x, out = torch.zeros(4 * N), torch.zeros(N)
    red.partial_sum(x, out, N)
    fdk.edit("reduce_helpers", "def combine(acc, x):\n", "def combine(acc, x):\n    # sums two partials\n")
    fdk.edit("reduce_helpers", '"""Helpers of', '"""Reworded docstring of the helpers of')
    red.partial_sum(x, out, N)
    assert traces == ["partial_sum"]
    assert red.partial_sum.cache_info().hits == 1


def test_unrelated_function_edit_does_not_retrace(fdk, traces) -> None:
    vadd = fdk.module("vadd")
    a, c = _tensors(2)
    vadd.axpy(a, c, N, 2)
    vadd.scale = lambda x: x  # vadd's helper, not axpy's
    vadd.axpy(a, c, N, 2)
    assert traces == ["axpy"]


def test_constexpr_and_argument_signature_changes_retrace(fdk, traces, caplog) -> None:
    vadd = fdk.module("vadd")
    a, c = _tensors(2)
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        vadd.axpy(a, c, N, 2)
        vadd.axpy(a, c, N, 3)  # Constexpr value
        vadd.axpy(a.half(), c, N, 3)  # dtype
        vadd.axpy(a, c, 2 * N, 3)  # runtime scalar: same key
    assert len(traces) == 3
    assert "argument 'factor'" in caplog.text and "argument 'a'" in caplog.text
    assert len(set(_ir_keys(vadd.axpy))) == 3


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("FLYDSL_COMPILE_OPT_LEVEL", "1"),
        ("FLYDSL_COMPILE_BACKEND", "rocm"),
        ("FLYDSL_DEBUG_ENABLE_DEBUG_INFO", "1"),
        ("FLYDSL_KTRACE_BLOCKS", "0,0,0"),
        ("FLYDSL_KTRACE_BUFFER_BYTES", "8192"),
    ],
)
def test_each_codegen_env_var_gives_a_new_key(fdk, traces, monkeypatch, caplog, name, value) -> None:
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    monkeypatch.delenv(name, raising=False)
    vadd.vadd(a, b, c, N)
    monkeypatch.setenv(name, value)
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        vadd.vadd(a, b, c, N)
    assert len(traces) == 2 and vadd.vadd.cache_info().currsize == 2
    assert f"env {name}" in caplog.text
    monkeypatch.delenv(name)
    vadd.vadd(a, b, c, N)  # back to the first key: a hit
    assert len(traces) == 2


def test_arch_env_and_detection_give_the_same_key(fdk, traces, monkeypatch, caplog) -> None:
    """Seed 003: an AOT build with ARCH=gfx942 and a runtime that detects gfx942 share entries."""
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    monkeypatch.setenv("ARCH", "gfx942")
    vadd.vadd(a, b, c, N)
    for name in ("ARCH", "FLYDSL_GPU_ARCH", "HSA_OVERRIDE_GFX_VERSION"):
        monkeypatch.delenv(name, raising=False)
    vadd.vadd(a, b, c, N)
    monkeypatch.setenv("FLYDSL_GPU_ARCH", "gfx942")
    vadd.vadd(a, b, c, N)
    assert traces == ["vadd"]
    monkeypatch.setenv("ARCH", "gfx950")
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        vadd.vadd(a, b, c, N)
    assert traces == ["vadd", "vadd"]
    # Under COMPILE_ONLY the key has a device only once the process has launched (jit._device).
    assert re.search(r"target gfx942( \(device 0\))? -> gfx950( \(device 0\))?", caplog.text)


def test_data_global_drift_raises_naming_global_and_module(fdk, traces) -> None:
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    vadd.vadd(a, b, c, N)
    vadd.SCALE = 5
    with pytest.raises(GlobalDriftError) as info:
        vadd.vadd(a, b, c, N)
    err = info.value
    assert (err.module, err.name) == (fdk.name + ".vadd", "SCALE")
    assert "vadd" in err.consumer and "2" in err.old and "5" in err.new
    vadd.SCALE = 2  # restored: the old entry is valid again
    vadd.vadd(a, b, c, N)
    assert traces == ["vadd", "vadd"]  # one re-trace found the change in the IR (no launch)


def test_drift_policy_rebuild_and_warn(fdk, traces, caplog, monkeypatch) -> None:
    import flydsl_runtime.flyc as flyc

    monkeypatch.setenv("FLYDEPS_INDEX", "0")  # two launchers of one function would share index rows

    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    rebuild = flyc.jit(on_drift="rebuild")(vadd.vadd.jit_function.func)
    warn = flyc.jit(on_drift="warn")(vadd.vadd.jit_function.func)
    rebuild(a, b, c, N)
    warn(a, b, c, N)
    vadd.SCALE = 7
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        rebuild(a, b, c, N)
        warn(a, b, c, N)
        warn(a, b, c, N)
    assert len(traces) == 3  # rebuild retraced; warn kept its entry
    assert len(set(_ir_keys(rebuild))) == 2
    assert caplog.text.count("on_drift='warn'") == 1
    assert "SCALE" in caplog.text


def _launch_base_and_sub(classy) -> tuple[Any, Any, tuple[torch.Tensor, ...]]:
    """One call of the class-bound launcher through a Base and a Sub instance."""
    tensors = _tensors(n=64)
    base, sub = classy.Base(), classy.Sub()
    base.launch(*tensors)
    sub.launch(*tensors)
    return base, sub, tensors


def test_class_bound_launcher_per_owner_class(fdk, traces) -> None:
    classy = fdk.module("classy")
    base, sub, tensors = _launch_base_and_sub(classy)
    base.launch(*tensors)
    sub.launch(*tensors)
    assert len(traces) == 2
    keys = {e.key[5][0]: e.ir_key for e in classy.Base.launch.entries()}
    assert keys[classy.Base] != keys[classy.Sub]  # Sub's override is in Sub's IR only


def test_sub_only_global_drift_is_caught_for_sub_and_not_base(fdk) -> None:
    """Seed 000 review: baselines per owner class, so a global only Sub's override reads is guarded."""
    classy = fdk.module("classy")
    base, sub, tensors = _launch_base_and_sub(classy)
    classy.BIAS = 9
    base.launch(*tensors)  # Base never reads BIAS
    with pytest.raises(GlobalDriftError, match="BIAS"):
        sub.launch(*tensors)


def test_subclass_override_added_later_retraces_only_that_owner(fdk, traces) -> None:
    classy = fdk.module("classy")
    base, sub, tensors = _launch_base_and_sub(classy)
    classy.Sub.op = lambda self, x, y: x - y
    base.launch(*tensors)
    sub.launch(*tensors)
    assert traces == ["launch"] * 3


def test_cached_factory_rebuilds_launcher_after_helper_change(fdk, traces, monkeypatch) -> None:
    """Seed 004: an lru_cache-style factory must not keep the launcher built from old helpers."""
    factory = fdk.module("factory")
    helpers = fdk.module("reduce_helpers")
    a, c = _tensors(2)
    launch = factory.compile_pair_sum(64)
    launch(a, c, N)
    assert factory.compile_pair_sum(64) is launch
    monkeypatch.setattr(helpers, "combine", lambda acc, x: acc - x)
    rebuilt = factory.compile_pair_sum(64)
    assert rebuilt is not launch
    rebuilt(a, c, N)
    assert len(traces) == 2
    assert _ir_keys(launch) != _ir_keys(rebuilt)


def test_flyc_compile_reuses_the_launcher_entry(fdk, traces, monkeypatch) -> None:
    import flydsl_runtime.flyc as flyc

    monkeypatch.delenv("COMPILE_ONLY")
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    compiled = flyc.compile(vadd.vadd, a, b, c, N)  # CPU tensors: compiled, not launched
    assert isinstance(compiled, flyc.CompiledFunction)  # type: ignore[attr-defined]
    assert flyc.compile(vadd.vadd, a, b, c, N) is compiled
    assert traces == ["vadd"]
    vadd.scale = lambda x: x
    assert flyc.compile(vadd.vadd, a, b, c, N) is not compiled
    assert len(traces) == 2


def test_recompile_reasons_print_to_stderr_with_flydeps_log(fdk, monkeypatch, capfd) -> None:
    monkeypatch.setenv("FLYDEPS_LOG", "recompiles")
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    vadd.vadd(a, b, c, N)
    vadd.vadd(a.double(), b, c, N)
    err = capfd.readouterr().err
    assert "retracing" in err and "argument 'a'" in err and "float64" in err


def test_unknown_argument_type_and_bad_arity_name_the_problem(fdk) -> None:
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    with pytest.raises(TypeError, match=r"argument 'b' of type builtins.object"):
        vadd.vadd(a, object(), c, N)
    with pytest.raises(TypeError, match=r"vadd\(\).*missing"):
        vadd.vadd(a, b)
    with pytest.raises(ValueError, match="on_drift must be one of"):
        import flydsl_runtime.flyc as flyc

        flyc.jit(on_drift="ignore")


def test_compile_hints_are_part_of_the_key(fdk, traces, caplog) -> None:
    from flydsl.compiler.kernel_function import CompilationContext

    import flydsl_runtime.flyc as flyc

    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    vadd.vadd(a, b, c, N)
    with CompilationContext.compile_hints({"fast_fp_math": True}):
        with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
            vadd.vadd(a, b, c, N)  # thread-local overlay
    assert len(traces) == 2 and "compile hints" in caplog.text
    flyc.compile[{"waves_per_eu": 2}](vadd.vadd)  # persistent hints, FlyDSL's deferred form
    vadd.vadd(a, b, c, N)
    assert len(traces) == 3
    assert len({e.ir_key for e in vadd.vadd.entries()}) == 3


def test_facade_reexports_flydsl_compiler_api() -> None:
    import flydsl.compiler as real

    import flydsl_runtime.flyc as flyc

    for name in real.__all__:
        if name not in ("jit", "compile"):
            assert getattr(flyc, name) is getattr(real, name), name
    assert {"jit", "kernel", "compile", "cached_factory"} <= set(flyc.__all__)
    assert flyc.kernel is real.kernel


def test_bound_instances_key_by_cache_signature_else_identity(fdk, traces) -> None:
    classy = fdk.module("classy")
    tensors = _tensors(n=64)
    classy.Keyed().launch(*tensors)
    classy.Keyed().launch(*tensors)  # equal __cache_signature__: a hit
    assert len(traces) == 1
    classy.Keyed("other").launch(*tensors)
    assert len(traces) == 2
    first, second = classy.Base(), classy.Base()  # no signature: identity, instance kept alive
    first.launch(*tensors)
    second.launch(*tensors)  # its own entry; equal state: the persistent index serves it untraced
    first.launch(*tensors)
    assert len(traces) == (3 if index.enabled() else 4)
    pinned = [e for e in classy.Base.launch.entries() if e.pinned_self is not None]
    assert [e.pinned_self for e in pinned] == [first, second]
    assert pinned[0].ir_key == pinned[1].ir_key


def test_bound_instances_without_signature_use_no_index_when_off(fdk, traces, monkeypatch) -> None:
    monkeypatch.setenv("FLYDEPS_INDEX", "0")
    classy = fdk.module("classy")
    tensors = _tensors(n=64)
    first, second = classy.Base(), classy.Base()
    first.launch(*tensors)
    second.launch(*tensors)
    first.launch(*tensors)
    assert len(traces) == 2


def test_identity_keyed_instance_state_change_retraces(fdk, traces) -> None:
    classy = fdk.module("classy")
    tensors = _tensors(n=64)
    scaled = classy.Scaled(2)
    scaled.launch(*tensors)
    scaled.launch(*tensors)
    assert len(traces) == 1
    (before,) = _ir_keys(classy.Base.launch)
    scaled.scale = 3  # read by Scaled.op at trace time: baked into the code
    scaled.launch(*tensors)
    assert len(traces) == 2
    (after,) = _ir_keys(classy.Base.launch)  # the identity-keyed entry was replaced...
    assert after != before  # ...by code built with the new value
    scaled.launch(*tensors)
    assert len(traces) == 2


def test_globals_are_baselined_after_the_trace_finishes(fdk, traces) -> None:
    """A trace that appends to a registry it reads must not invalidate its own entry."""
    registry = fdk.module("registry")
    a, c = _tensors(2)
    registry.logged_copy(a, c, N)
    assert registry.TRACED_SHAPES == [0]
    registry.logged_copy(a, c, N)
    registry.logged_copy(a, c, N)
    assert traces == ["logged_copy"] and registry.logged_copy.cache_info().hits == 2
    registry.TRACED_SHAPES.append("edited by the user")
    registry.logged_copy(a, c, N)  # nothing in the IR depends on it: one re-trace, kept
    registry.logged_copy(a, c, N)
    assert traces == ["logged_copy"] * 2 and registry.logged_copy.cache_info().hits == 4


def test_concurrent_first_calls_trace_once(fdk, traces) -> None:
    import threading

    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    start = threading.Barrier(4)
    errors: list[BaseException] = []

    def call() -> None:
        start.wait()
        try:
            vadd.vadd(a, b, c, N)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert traces == ["vadd"]
    assert vadd.vadd.cache_info() == CacheInfo(hits=3, misses=1, currsize=1)


def test_ast_rewrite_is_reported_to_flydeps(fdk) -> None:
    """FlyDSL replaces a decorated function's __code__; flydeps must digest what the user wrote."""
    from flydeps.live.discover import _rewrite_of

    vadd = fdk.module("vadd")
    func = vadd.vadd_kernel._func
    noted = _rewrite_of(func)
    assert noted is not None
    rewritten, original = noted
    assert rewritten is func.__code__ and original is not rewritten
    assert original.co_name == "vadd_kernel" and original.co_filename == func.__code__.co_filename


def test_a_reloaded_launcher_says_what_changed(fdk, traces, caplog) -> None:
    """``importlib.reload`` makes a new module-level launcher; its first trace says what
    changed against the one it replaces (issue 38), as its rebuilds do."""
    caplog.set_level(logging.INFO, logger="flydsl_runtime")
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    vadd.vadd(a, b, c, N)
    vadd = fdk.edit("vadd", "return x * SCALE", "return x * SCALE * 2")
    vadd.vadd(a, b, c, N)
    assert len(traces) == 2
    reasons = [r.getMessage() for r in caplog.records if "after a reload" in r.getMessage()]
    assert reasons == [
        f"{fdk.name}.vadd.vadd: new launcher after a reload of its module: helper {fdk.name}.vadd:scale changed"
    ]
