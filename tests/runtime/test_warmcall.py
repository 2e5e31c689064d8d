"""The C warm path (flydsl_runtime.launch._warmcall) decides every call as the Python one does.

``Launcher._py_call`` is the specification: the same tests in the same order. Every call
sequence below runs through both (real compiles under COMPILE_ONLY=1, FlyDSL's traces
counted by a spy) and must give the same traces, hits and misses step by step; the C type's
own contract (fallbacks, errors, Python code that rebinds its state mid-decision) is
exercised on a launcher-shaped object.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("flydsl")

import torch  # noqa: E402
from flydsl.compiler.kernel_function import CompilationContext  # noqa: E402

from flydsl_runtime import Launcher  # noqa: E402
from flydsl_runtime.trace.argsig import token  # noqa: E402

jit_module = importlib.import_module("flydsl_runtime.launch.jit")
HAS_C = jit_module._WarmBase is not object  # built, and not turned off by FLYDEPS_WARMCALL=0
needs_c = pytest.mark.skipif(not HAS_C, reason="the C warm path is not built or FLYDEPS_WARMCALL=0")

pytestmark = pytest.mark.usefixtures("compile_only")

N = 1024


class PyLauncher(Launcher):
    """The Python warm path, whatever Launcher's base is."""

    __call__ = Launcher._py_call


def _fresh(launcher: Launcher, cls: type[Launcher]) -> Launcher:
    return cls(launcher.jit_function)


def _script(fdk: Any, cls: type[Launcher], traces: list[str]) -> list[tuple]:
    """One sequence of calls and changes; (step, traces so far, cache infos) after each.
    Every change is undone at the end."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        return _steps(fdk, cls, traces, monkeypatch)


def _steps(fdk: Any, cls: type[Launcher], traces: list[str], monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    monkeypatch.setenv("FLYDEPS_INDEX", "0")  # the second run would load the first run's rows
    vadd_mod, defaults_mod = fdk.module("vadd"), fdk.module("defaults")
    vadd = _fresh(vadd_mod.vadd, cls)
    axpy = _fresh(vadd_mod.axpy, cls)
    copy = _fresh(defaults_mod.scaled_copy, cls)
    a, b, c = (torch.zeros(N) for _ in range(3))
    h = torch.zeros(N, dtype=torch.float16)
    log: list[tuple] = []

    def step(name: str, call: Callable[[], object]) -> None:
        assert call() is None  # COMPILE_ONLY: decided, never launched
        log.append((name, len(traces), vadd.cache_info(), axpy.cache_info(), copy.cache_info()))

    step("first", lambda: vadd(a, b, c, N))
    for i in range(3):
        step(f"warm {i}", lambda: vadd(a, b, c, N))
    step("keywords", lambda: vadd(a, b, c=c, n=N))
    step("other dtype", lambda: vadd(h, h, h, N))
    step("back", lambda: vadd(a, b, c, N))
    step("constexpr 2", lambda: axpy(a, c, N, 2))
    step("constexpr 3", lambda: axpy(a, c, N, 3))
    step("constexpr 2 again", lambda: axpy(a, c, N, 2))
    step("defaults omitted", lambda: copy(a, c, N))
    step("defaults omitted, warm", lambda: copy(a, c, N))
    step("default passed", lambda: copy(a, c, N, 2))
    step("stream passed", lambda: copy(a, c, N, 2, None))
    with CompilationContext.compile_hints({"fast_fp_math": True}):
        step("hint overlay", lambda: vadd(a, b, c, N))
    step("overlay gone", lambda: vadd(a, b, c, N))
    monkeypatch.setenv("FLYDSL_COMPILE_OPT_LEVEL", "1")
    step("code-gen env", lambda: vadd(a, b, c, N))
    monkeypatch.setenv("FLYDEPS_UNRELATED_VARIABLE", "x")
    step("unrelated env", lambda: vadd(a, b, c, N))
    monkeypatch.delenv("FLYDSL_COMPILE_OPT_LEVEL")
    step("env back", lambda: vadd(a, b, c, N))
    monkeypatch.setattr(vadd_mod, "SCALE", 3)  # a data global the trace read: drift raises
    with pytest.raises(Exception, match="SCALE"):
        vadd(a, b, c, N)
    monkeypatch.setattr(vadd_mod, "SCALE", 2)
    step("global restored", lambda: vadd(a, b, c, N))
    monkeypatch.setattr(vadd_mod, "scale", lambda x: x * 3)  # a helper replaced: retrace
    step("helper replaced", lambda: vadd(a, b, c, N))
    step("helper replaced, warm", lambda: vadd(a, b, c, N))
    return log


@needs_c
def test_launcher_base_is_the_c_warm_path() -> None:
    from flydsl_runtime.launch import _warmcall  # type: ignore[attr-defined]

    assert issubclass(Launcher, _warmcall.WarmCall)
    assert Launcher.__call__ is _warmcall.WarmCall.__call__


def test_both_warm_paths_decide_every_step_alike(fdk, traces) -> None:
    native = _script(fdk, Launcher, traces)
    traces.clear()
    python = _script(fdk, PyLauncher, traces)
    assert native == python
    assert native[1][1] == native[0][1] and native[1][2].hits == 1  # the warm calls were hits


@needs_c
def test_warm_hits_and_fallbacks_of_the_c_path(fdk, traces, monkeypatch) -> None:
    """Warm plain calls (stream and defaults omitted included) never reach the Python warm
    path; keywords, a new argument type or a hint overlay do, and still hit or miss correctly."""
    slow: list[tuple] = []
    python_path = Launcher._py_call

    def counted(self: Launcher, *args: object, **kwargs: object) -> object:
        slow.append(args)
        return python_path(self, *args, **kwargs)

    monkeypatch.setattr(Launcher, "_py_call", counted)
    copy = fdk.module("defaults").scaled_copy
    a, c = torch.zeros(N), torch.zeros(N)
    copy(a, c, N)  # first call: the general path traces
    assert len(slow) == 1 and traces == ["scaled_copy"]
    for _ in range(5):
        copy(a, c, N)
    copy(a, c, N, 2, None)
    assert len(slow) == 1 and copy.cache_info().hits == 6
    copy(a, c, n=N)
    assert len(slow) == 2 and copy.cache_info().hits == 7
    with CompilationContext.compile_hints({"fast_fp_math": True}):
        copy(a, c, N)
    assert len(slow) == 3 and len(traces) == 2
    copy(a, c, N, 3)  # a new constexpr value: new key, a miss through the Python path
    assert len(slow) == 4 and len(traces) == 3
    copy(a, c, N, 3)
    assert len(slow) == 4 and copy.cache_info().hits == 8


@pytest.fixture
def unbound_device(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No device reader bound, as in a new process (the C path holds the same one-item list)."""
    from flydsl_runtime.trace import target

    monkeypatch.setattr(target, "_device_id", None)
    monkeypatch.setattr(jit_module, "_device_id", None)
    cell = jit_module._device_cell
    saved = cell[0]
    cell[0] = None
    yield
    cell[0] = saved


@pytest.mark.usefixtures("unbound_device")
def test_compile_only_calls_never_ask_hip_for_the_device(fdk, traces, monkeypatch, caplog) -> None:
    """FlyDSL's COMPILE_ONLY call does not touch HIP (its device query loads libamdhip64 and
    starts the runtime on a GPU machine); neither do the launcher's first and warm calls, on
    either warm path, until a call needs a device: then COMPILE_ONLY calls are keyed by it
    too, and the entry built for the device serves them."""
    import logging

    from flydsl.runtime.device_runtime import rocm

    import flydsl_runtime.flyc as flyc

    asked: list[int] = []
    real = rocm._hip_get_device

    def spy() -> int:
        asked.append(1)
        return real()

    monkeypatch.setattr(rocm, "_hip_get_device", spy)  # FlyDSL's own query, whoever asks
    vadd = fdk.module("vadd").vadd
    py = _fresh(vadd, PyLauncher)
    a = torch.zeros(N)
    for launcher in (vadd, py):
        for _ in range(3):
            assert launcher(a, a, a, N) is None
        assert launcher.cache_info().hits == 2
    assert asked == [] and traces == ["vadd"]  # the second launcher was served by the index
    monkeypatch.delenv("COMPILE_ONLY")
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        compiled = flyc.compile(vadd, a, a, a, N)  # its launchable form: bound to a device
    assert isinstance(compiled, flyc.CompiledFunction) and asked  # type: ignore[attr-defined]
    assert "the entry was compiled under COMPILE_ONLY=1 and this call launches (device 0)" in caplog.text
    monkeypatch.setenv("COMPILE_ONLY", "1")
    hits = vadd.cache_info().hits
    assert vadd(a, a, a, N) is None and vadd.cache_info().hits == hits + 1
    assert len(traces) <= 2


@needs_c
def test_bad_calls_raise_what_the_python_path_raises(fdk) -> None:
    vadd = fdk.module("vadd").vadd
    py = _fresh(vadd, PyLauncher)
    a = torch.zeros(N)
    vadd(a, a, a, N)
    py(a, a, a, N)
    for bad in [(a, a, a), (a, a, a, N, N), (a, a, object(), N), (a, a, torch.zeros(4, 4).t()[0], N)]:
        with pytest.raises(Exception) as native:
            vadd(*bad)
        with pytest.raises(Exception) as python:
            py(*bad)
        assert type(native.value) is type(python.value) and str(native.value) == str(python.value)
    with pytest.raises(TypeError, match="unexpected keyword|got an unexpected"):
        vadd(a, a, a, N, bogus=1)


# --- the C type's own contract, on a launcher-shaped object ------------------------------


class _Guard:
    def __init__(self, check: Callable[[], object]) -> None:
        self.check = check


class _State:
    def __init__(self, check: Callable[[], object], digest: str = "digest") -> None:
        self.guard, self.digest = _Guard(check), digest


class _Reads:
    def __init__(self, holds: bool = True) -> None:
        self._holds = holds

    def holds(self) -> bool:
        return self._holds


class _Entry:
    def __init__(self, compiled: object, extra_guards: tuple = (), holds: bool = True) -> None:
        self.compiled, self.extra_guards, self.env_reads = compiled, extra_guards, _Reads(holds)


class _Signer:
    def __init__(self, warm: object) -> None:
        self._warm = warm


class _Jf:
    compile_hints: dict = {}


def _shaped(check: Callable[[], object] = lambda: True) -> tuple[Any, dict, list]:
    """A WarmCall subclass instance whose warm plan is two exact ints keyed (int, value)."""
    from flydsl_runtime.launch import _warmcall  # type: ignore[attr-defined]

    calls: list = []

    class Shaped(_warmcall.WarmCall):
        def _py_call(self, *args: object, **kwargs: object) -> object:
            calls.append((args, kwargs))
            return "python path"

    jit_module._call_env()  # the environment memo, as any launcher call fills it
    reader = jit_module._device_id or jit_module._bind_device_id()
    shaped = Shaped()
    shaped._owners = {None: _State(check)}
    shaped._tails = {2: (), 1: (5,)}
    shaped._signer = _Signer(((int, int), (2, 2), (int, int)))
    shaped._jf = _Jf()
    shaped._hits = 0
    env = jit_module._call_env_memo[1]
    key = ("digest", ((int, 1), (int, 5)), env.token, reader(), (), None)
    shaped._entries = {key: _Entry(lambda *args: ("launched", args))}
    return shaped, shaped._entries, calls


@needs_c
def test_c_path_hits_and_falls_back_on_every_unusual_call(monkeypatch) -> None:
    monkeypatch.delenv("COMPILE_ONLY", raising=False)
    shaped, entries, calls = _shaped()
    assert shaped(1, 5) == ("launched", (1, 5)) and shaped._hits == 1
    assert shaped(1) == ("launched", (1, 5)) and shaped._hits == 2  # the tail completes it
    assert shaped(1, 6) == "python path"  # no entry for this key
    assert shaped(1, 5, x=1) == "python path"  # keywords
    assert shaped(True, 5) == "python path"  # bool is not the plan's exact int
    assert shaped() == "python path"  # no tail for zero arguments
    (key,) = entries
    entries[key] = _Entry(lambda *a: "never", extra_guards=(object(),))
    assert shaped(1, 5) == "python path"
    entries[key] = _Entry(lambda *a: "never", holds=False)
    assert shaped(1, 5) == "python path"
    entries[key] = _Entry(None)  # recorded under COMPILE_ONLY, this call launches
    assert shaped(1, 5) == "python path"
    monkeypatch.setenv("COMPILE_ONLY", "1")
    jit_module._call_env()
    assert shaped(1, 5) is None and shaped._hits == 3
    # No device reader bound yet (a new process): COMPILE_ONLY keys the device as None
    # (jit._device); a launch needs the reader, and goes to Python to bind it.
    cell, saved = jit_module._device_cell, jit_module._device_cell[0]
    cell[0] = None
    try:
        entries[(*key[:3], None, *key[4:])] = _Entry(None)
        assert shaped(1, 5) is None and shaped._hits == 4
        monkeypatch.delenv("COMPILE_ONLY")
        jit_module._call_env()
        assert shaped(1, 5) == "python path"
    finally:
        cell[0] = saved
    monkeypatch.setenv("COMPILE_ONLY", "1")
    jit_module._call_env()
    shaped._signer = _Signer(None)  # a plan the C path does not take (a float constexpr)
    assert shaped(1, 5) == "python path"
    assert len(calls) == 9 and shaped._hits == 4


@needs_c
def test_c_path_survives_python_code_that_rebinds_its_state() -> None:
    """The guard check (Python code) clears the tables, replaces the signer and drops the
    state while the C decision holds them: no crash, and the call is decided consistently."""
    holder: dict = {}

    def meddling() -> bool:
        shaped = holder["shaped"]
        shaped._owners.clear()
        shaped._entries = {}
        shaped._signer = _Signer(None)
        shaped._tails = {}
        return True

    shaped, _entries, calls = _shaped(meddling)
    holder["shaped"] = shaped
    assert shaped(1, 5) is None and shaped._hits == 1  # decided on the objects it started with
    assert shaped(1, 5) == "python path"  # the next call sees the new state: no owner
    assert len(calls) == 1 and shaped._hits == 1


@needs_c
def test_c_path_errors_fall_back_and_interrupts_propagate() -> None:
    def broken() -> bool:
        raise ValueError("guard exploded")

    shaped, _entries, calls = _shaped(broken)
    assert shaped(1, 5) == "python path" and len(calls) == 1  # the Python path decides (and raises)

    def interrupted() -> bool:
        raise KeyboardInterrupt

    shaped, _entries, calls = _shaped(interrupted)
    with pytest.raises(KeyboardInterrupt):
        shaped(1, 5)
    assert calls == []

    class NoTruth:
        def __bool__(self) -> bool:
            raise RuntimeError("no truth value")

    shaped, _entries, calls = _shaped(lambda: NoTruth())
    assert shaped(1, 5) == "python path"


@needs_c
def test_c_path_with_unset_members_goes_to_python() -> None:
    from flydsl_runtime.launch import _warmcall  # type: ignore[attr-defined]

    class Bare(_warmcall.WarmCall):
        def _py_call(self, *args: object, **kwargs: object) -> object:
            return ("python path", args, kwargs)

    assert Bare()(1, k=2) == ("python path", (1,), {"k": 2})
    with pytest.raises(AttributeError):
        Bare()._owners  # noqa: B018
    with pytest.raises(AttributeError, match="_py_call"):
        _warmcall.WarmCall()(1)
    with pytest.raises(TypeError, match="list"):
        _warmcall.configure({}, lambda: 0, object, object(), [None])
    assert token("x") is token("x")
