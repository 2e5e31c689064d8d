"""Under ``on_drift='raise'`` a data change is judged by FlyDSL's IR (issue 35, finding 1).

A data value the launcher reads changed: each entry traced before the change is re-traced
once (no launch) on its next call; the same IR key keeps it (later calls hit), another IR
key raises ``GlobalDriftError`` naming the value. Real compiles, CPU only (COMPILE_ONLY=1).
"""

from __future__ import annotations

import logging
import os
import threading

import pytest

pytest.importorskip("flydsl")

import torch  # noqa: E402

from flydeps import GlobalDriftError  # noqa: E402

pytestmark = pytest.mark.usefixtures("compile_only")

N = 1024


def _args(mode: int) -> tuple:
    return (torch.zeros(N), torch.zeros(N), N, mode)


def test_an_unread_attribute_change_neither_raises_nor_retraces_twice(fdk, traces, caplog) -> None:
    mod = fdk.module("drift_ir")
    mod.scale(*_args(0))
    mod.CONFIG.note = "changed, still read by nothing"
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        mod.scale(*_args(0))  # re-traced once: same IR, the entry is kept
    assert "same IR" in caplog.text and "CONFIG" in caplog.text
    mod.scale(*_args(0))
    mod.scale(*_args(0))
    assert traces == ["scale", "scale"]
    assert mod.scale.cache_info().hits >= 2 and mod.scale.cache_info().misses == 1


def test_a_change_that_reaches_the_ir_still_raises_each_call(fdk, traces) -> None:
    mod = fdk.module("drift_ir")
    mod.scale(*_args(0))
    mod.CONFIG.factor = 5
    with pytest.raises(GlobalDriftError, match="CONFIG") as info:
        mod.scale(*_args(0))
    assert info.value.name == "CONFIG" and "scale" in info.value.consumer
    with pytest.raises(GlobalDriftError, match="CONFIG"):
        mod.scale(*_args(0))  # known to reach this IR: raised without another trace
    assert traces == ["scale", "scale"]
    mod.CONFIG.factor = 2  # restored: the old entry serves again
    mod.scale(*_args(0))
    assert traces == ["scale", "scale"]


def test_each_entry_is_judged_by_its_own_ir(fdk, traces) -> None:
    """A value one specialization reads and another does not: kept for one, raised for the other."""
    mod = fdk.module("drift_ir")
    mod.scale(*_args(0))
    mod.scale(*_args(1))
    mod.TABLE["factor"] = 7
    mod.scale(*_args(0))  # mode 0 reads CONFIG, not TABLE: same IR, kept
    with pytest.raises(GlobalDriftError, match="TABLE"):
        mod.scale(*_args(1))
    mod.scale(*_args(0))
    assert traces == ["scale", "scale", "scale", "scale"]


def test_a_neutral_change_then_a_reaching_one_raises(fdk, traces) -> None:
    mod = fdk.module("drift_ir")
    mod.scale(*_args(1))
    mod.TABLE["unused"] = 1
    mod.scale(*_args(1))  # kept
    mod.TABLE["factor"] = 8
    with pytest.raises(GlobalDriftError, match="TABLE"):
        mod.scale(*_args(1))


def test_a_call_with_no_entry_before_the_change_is_traced_without_raising(fdk, traces) -> None:
    mod = fdk.module("drift_ir")
    mod.scale(*_args(0))
    mod.TABLE["factor"] = 9
    mod.scale(*_args(1))  # nothing compiled from the old value for this call: nothing to contradict
    mod.scale(*_args(1))
    assert traces == ["scale", "scale"]


def _memo_args() -> tuple:
    return (torch.zeros(N), torch.zeros(N), N)


def test_a_memo_another_launcher_filled_then_emptied_after_its_input_changed(fdk, traces, monkeypatch) -> None:
    """Issue 35 (memo/manual_memo_filled_by_other_launcher): ``memo_scale``'s trace got a memo
    hit on what ``memo_fill``'s trace computed from the environment. The variable changed and
    the user emptied the memo: not kept (its IR changes), and no GlobalDriftError either."""
    monkeypatch.delenv("FLYDEPS_TEST_DRIFT_FACTOR", raising=False)
    mod = fdk.module("drift_ir")
    mod.memo_fill(*_memo_args())
    mod.memo_scale(*_memo_args())
    (before,) = mod.memo_scale.entries()
    monkeypatch.setenv("FLYDEPS_TEST_DRIFT_FACTOR", "3")
    mod._FACTOR_CACHE.clear()
    mod.memo_scale(*_memo_args())
    assert mod._FACTOR_CACHE == {"factor": 3}
    assert {e.ir_key for e in mod.memo_scale.entries()} - {before.ir_key}, "served the IR of the old factor"


def test_a_memo_another_launcher_filled_then_emptied_alone_is_kept(fdk, traces) -> None:
    mod = fdk.module("drift_ir")
    mod.memo_fill(*_memo_args())
    mod.memo_scale(*_memo_args())
    mod._FACTOR_CACHE.clear()
    mod.memo_scale(*_memo_args())  # re-traced once (refills the memo): the same IR, kept
    mod.memo_scale(*_memo_args())
    assert traces == ["memo_fill", "memo_scale", "memo_scale"]
    assert mod.memo_scale.cache_info().misses == 1


def _in_thread(fn, *args) -> None:
    worker = threading.Thread(target=fn, args=args)
    worker.start()
    worker.join()


def test_an_env_variable_another_thread_sets_and_removes_during_the_trace(fdk, traces, monkeypatch) -> None:
    """Issue 35 (threads/env_variable): the trace read the variable absent, then set by
    another thread, then absent again; its first read (absent) holds after it, but its IR
    mixes both: not kept, the next call traces again."""
    monkeypatch.delenv("FLYDEPS_TEST_RACE_FACTOR", raising=False)
    mod = fdk.module("drift_ir")
    mod.RACE_HOOKS[:] = [
        lambda: None,
        lambda: _in_thread(os.environ.__setitem__, "FLYDEPS_TEST_RACE_FACTOR", "3"),
        lambda: _in_thread(os.environ.pop, "FLYDEPS_TEST_RACE_FACTOR"),
    ]
    mod.env_scale(*_memo_args())  # the caller that raced gets its result (factor 7)
    raced = {e.ir_key for e in mod.env_scale.entries()}
    mod.env_scale(*_memo_args())
    mod.env_scale(*_memo_args())
    assert traces == ["env_scale", "env_scale"], "the raced trace was kept"
    (entry,) = mod.env_scale.entries()
    assert entry.ir_key not in raced


def test_an_env_variable_the_trace_writes_itself_is_no_race(monkeypatch) -> None:
    from flydeps.observe import environ as _environ

    monkeypatch.delenv("FLYDEPS_TEST_RACE_OTHER", raising=False)
    monkeypatch.delenv("FLYDEPS_TEST_RACE_OWN", raising=False)
    with _environ.recording():
        mark = _environ.write_mark()
        _in_thread(os.environ.__setitem__, "FLYDEPS_TEST_RACE_OTHER", "1")
        os.environ["FLYDEPS_TEST_RACE_OWN"] = "1"
        names = ("FLYDEPS_TEST_RACE_OTHER", "FLYDEPS_TEST_RACE_OWN", "PATH")
        assert _environ.written_by_others(mark, names) == ("FLYDEPS_TEST_RACE_OTHER",)
    later = _environ.write_mark()
    assert _environ.written_by_others(later, names) == ()
    os.environ.pop("FLYDEPS_TEST_RACE_OTHER")
    os.environ.pop("FLYDEPS_TEST_RACE_OWN")
