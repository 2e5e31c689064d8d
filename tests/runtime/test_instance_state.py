"""A launcher bound to an instance whose class has no ``__cache_signature__`` is keyed across
processes by the instance's state: its fingerprint, taken on a miss. A serving process (and
``flydeps aot build``'s probes) calls one instance's launcher with many specializations: the
instance is walked once and its fingerprint reused while its guard holds; any change of its
state (an attribute rebound, a container in it edited in place, its class swapped)
walks it again. The oracle of every key is a fresh walk of the instance made by the test at
that call (``flydeps.fingerprint``), never the launcher's own bookkeeping."""

from __future__ import annotations

import types
from pathlib import Path

import pytest

pytest.importorskip("flydsl")

import torch  # noqa: E402

import flydeps  # noqa: E402
from flydsl_runtime.launch import miss  # noqa: E402
from flydsl_runtime.persist import index  # noqa: E402

pytestmark = pytest.mark.usefixtures("compile_only")


def test_an_instance_is_walked_once_while_its_guard_holds_and_again_after_any_change(
    fdk, traces: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("FLYDSL_RUNTIME_CACHE_DIR", str(tmp_path / "cache" / "flydsl"))
    monkeypatch.setenv("FLYDSL_RUNTIME_ENABLE_CACHE", "1")
    bound = fdk.module("bound")
    instance = bound.Quant(factor=2)
    walked: list[object] = []  # the instances the miss path fingerprinted
    real_fingerprint = miss.fingerprint

    def counting(obj: object, **kwargs: object) -> flydeps.Fingerprint:
        if obj is instance:
            walked.append(obj)
        return real_fingerprint(obj, **kwargs)  # type: ignore[arg-type]

    keyed: list[object] = []  # the instance's part of each persistent key
    real_key = index.key_or_reason

    def noting(name: str, described: tuple) -> tuple:
        keyed.append(described[5][1])
        return real_key(name, described)

    monkeypatch.setattr(miss, "fingerprint", counting)
    monkeypatch.setattr(index, "key_or_reason", noting)

    def call(dtype: torch.dtype) -> str:
        """One call of a new specialization; the state a fresh walk of the instance gives now."""
        tensors = [torch.zeros(256, dtype=dtype) for _ in range(3)]
        instance.launch(*tensors, 256)
        return f"state {flydeps.fingerprint(instance).digest}"

    states = [call(torch.float32), call(torch.float16), call(torch.int32)]
    assert len(traces) == 3 and len(walked) == 1  # three specializations, one walk
    assert keyed == states and len(set(states)) == 1

    instance.factor = 3  # an attribute rebound
    states.append(call(torch.float32))
    assert len(walked) == 2 and keyed[-1] == states[-1] != states[0]
    states.append(call(torch.float16))
    assert len(walked) == 2 and keyed[-1] == states[-1]

    instance.memo["seen"] = 1  # a container of its state edited in place
    states.append(call(torch.int32))
    assert len(walked) == 3 and keyed[-1] == states[-1] not in states[:-1]

    class Scaled(bound.Quant):  # type: ignore[name-defined]  # its class swapped for a subclass
        pass

    instance.__class__ = Scaled
    states.append(call(torch.float32))
    assert len(walked) == 4 and keyed[-1] == states[-1] not in states[:-1]
    assert len(traces) == 7


def test_an_entry_whose_instance_or_function_argument_was_rebound_to_the_same_state_serves_again(
    fdk, traces: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry of an identity-keyed instance re-checks the instance's state on a hit (its
    guard). Rebinding what the state reaches to an equal copy (an attribute to an equal
    container, a method to a function with the same code: what a reload of a helper module
    that changed nothing does) fails that guard; the entry serves again, no miss, no load,
    when a fresh walk of the instance gives the digest the entry was built under. Any real
    change still misses and traces."""
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / "cache"))
    bound = fdk.module("bound")
    instance = bound.Quant(factor=2)
    launcher = bound.Quant.launch
    tensors = [torch.zeros(256) for _ in range(3)]

    def call() -> tuple[int, int]:
        instance.launch(*tensors, 256)
        info = launcher.cache_info()
        return info.hits, info.misses

    assert call() == (0, 1) and traces == ["launch"]
    built_under = flydeps.fingerprint(instance).digest
    assert call() == (1, 1)

    instance.memo = {}  # an equal copy: the guard fails, the state is the same
    assert call() == (2, 1) and len(traces) == 1
    original = bound.Quant.scaled
    same = types.FunctionType(original.__code__, original.__globals__, original.__name__)
    same.__qualname__ = original.__qualname__
    bound.Quant.scaled = same  # the same code, another function object (a reload's effect)
    assert flydeps.fingerprint(instance).digest == built_under
    assert call() == (3, 1) and len(traces) == 1

    instance.memo["seen"] = 1  # a real change of the state the trace read: a miss, a trace
    assert call() == (3, 2) and len(traces) == 2
    assert flydeps.fingerprint(instance).digest != built_under


def test_a_function_argument_whose_global_was_rebound_to_an_equal_copy_keeps_its_entry(fdk, traces: list[str]) -> None:
    """A function passed as a compile-time value is keyed by identity and what it reads is
    guarded: a global it reads rebound to an equal copy fails the guard, and the entry serves
    again (no miss) when the function's fingerprint is the one it was built under; a change
    of the value misses and traces."""
    apply = fdk.module("apply")
    namespace: dict = {"__name__": f"{apply.__name__}_fn"}
    exec("FACTORS = (2.0,)\ndef times(x):\n    return x * FACTORS[0]\n", namespace)
    fn = namespace["times"]
    tensors = [torch.zeros(256) for _ in range(2)]
    apply.apply(*tensors, 256, fn)
    assert apply.apply.cache_info().misses == 1 and len(traces) == 1
    namespace["FACTORS"] = (2.0,)  # an equal copy: the guard fails, the state is the same
    apply.apply(*tensors, 256, fn)
    assert apply.apply.cache_info()[:2] == (1, 1) and len(traces) == 1
    namespace["FACTORS"] = (3.0,)
    apply.apply(*tensors, 256, fn)
    assert apply.apply.cache_info().misses == 2 and len(traces) == 2


@pytest.mark.parametrize("where", ["instance", "module"])
def test_a_change_by_another_thread_while_flydsl_compiles_is_not_taken_for_the_trace(
    fdk, traces: list[str], monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Another thread changes what the trace read after FlyDSL's trace returned and before
    the call ends (FlyDSL lowers and compiles in between: milliseconds to seconds). The state
    the entry is guarded by is the one the trace ended in, so the next call sees the change
    and traces; it was taken at the end of the call, which made the change look like the
    trace's own (a red team's c43/c48: the bound instance; c39/c47: a memo the trace writes).
    The oracle: FlyDSL's IR key of each call."""
    import threading

    from flydsl.compiler.jit_function import JitFunction

    bound = fdk.module("bound")
    instance = bound.Quant(factor=2)
    tensors = [torch.zeros(256) for _ in range(3)]
    traced_now = JitFunction._trace  # the runtime's hook, inside the test's spy: wrapped outside both
    pending: list[object] = []

    def change() -> None:
        if where == "instance":
            instance.factor = 3
        else:
            bound.Quant.BLOCK = 32

    def then_change(self: JitFunction, *args: object, **kwargs: object) -> object:
        result = traced_now(self, *args, **kwargs)
        while pending:  # another thread, once, while the call is still to compile
            pending.pop()
            worker = threading.Thread(target=change)
            worker.start()
            worker.join()
        return result

    monkeypatch.setattr(JitFunction, "_trace", then_change)
    launcher = bound.Quant.launch
    pending.append(1)
    instance.launch(*tensors, 256)
    first_ir = launcher._jf._last_compiled[0]
    assert len(traces) == 1
    try:
        instance.launch(*tensors, 256)
    except flydeps.GlobalDriftError:  # a class attribute read while tracing: the default policy
        assert where == "module"
        return
    assert len(traces) == 2, "the state changed while FlyDSL compiled was served as if the trace had read it"
    assert launcher._jf._last_compiled[0] != first_ir
