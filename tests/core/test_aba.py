"""Issue 35.6: a helper rebound by another thread while a build runs and put back before it
ends (A-B-A) never leaves an entry keyed by one state holding what was built from another.

Detected through PEP 509 dict tags (CPython 3.10/3.11, ``flydeps.watch._dictver``); skipped where
they are not read (documented limit in flydeps.builds.protocol).
"""

from __future__ import annotations

import queue
import sys
import threading
import types
from typing import Any

import pytest

from flydeps import cached_factory
from flydeps.builds import protocol as build
from flydeps.watch import watchers as _watch


def _module(name: str) -> Any:  # a module whose attributes the test sets
    """A subject module whose ``read()`` meets another thread twice: after the other thread
    rebound ``helper`` (it then reads B) and before it puts it back (SimpleQueue's C
    methods: library leaves whose state is no input of the build)."""
    mod = types.ModuleType(name)
    queues = ("started", "patched", "read_done", "restored")
    mod.__dict__.update({name: queue.SimpleQueue() for name in queues})
    exec(
        "def helper():\n    return 'A'\n\ndef other():\n    return 'B'\n\n"
        "tell_started, wait_patched = started.put, patched.get\n"
        "tell_read, wait_restored = read_done.put, restored.get\n\n"
        "def read(race):\n"
        "    if race:\n        tell_started(1)\n        wait_patched()\n    seen = helper()\n"
        "    if race:\n        tell_read(1)\n        wait_restored()\n    return seen\n",
        mod.__dict__,
    )
    sys.modules[name] = mod
    return mod


@pytest.mark.skipif(not _watch.TAGS, reason="PEP 509 tags are read on CPython 3.10/3.11 only")
def test_a_helper_swapped_and_put_back_during_the_build_is_not_kept() -> None:
    mod = _module("flydeps_aba_subject")

    @cached_factory
    def make(race: bool) -> str:
        return mod.read(race)

    def swap() -> None:
        mod.started.get()  # the build has begun: its baseline saw A
        original = mod.helper
        mod.helper = mod.other
        mod.patched.put(1)
        mod.read_done.get()
        mod.helper = original  # A-B-A: the state compares equal again
        mod.restored.put(1)
        mod.patched.put(1)  # a second build passes straight through
        mod.restored.put(1)

    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        assert make(True) == "B"  # the caller that started during the swap gets what it built
        swapper.join()
        assert make(True) == "A"  # not kept: built again from A, never B served under A's key
        assert make.cache_info().misses == 2
    finally:
        del sys.modules["flydeps_aba_subject"]


@pytest.mark.skipif(not _watch.TAGS, reason="PEP 509 tags are read on CPython 3.10/3.11 only")
def test_the_builds_own_global_write_is_not_a_race() -> None:
    mod = types.ModuleType("flydeps_aba_own")
    exec("COUNT = 0\n\ndef bump():\n    global COUNT\n    COUNT += 1\n    return COUNT\n", mod.__dict__)
    sys.modules["flydeps_aba_own"] = mod
    try:

        @cached_factory
        def make(n: int) -> int:
            return mod.bump() + n

        assert make(1) == 2 and make(1) == 2 and make.cache_info().misses == 1
    finally:
        del sys.modules["flydeps_aba_own"]


def test_a_build_start_ends_on_its_thread() -> None:
    fp = __import__("flydeps").fingerprint(_module("flydeps_aba_plain").helper)
    start = build.begin(fp)
    build.note_write(type("Local", (), {}), "x")  # a class of no namespace the build binds
    build.finish(start)
    assert not build._THREAD.builds and build.conclude(start, fp.refresh()).verdict is build.Verdict.SAME
    del sys.modules["flydeps_aba_plain"]


def _memo_module(name: str) -> types.ModuleType:
    """A hand-written memo over an environment variable, read by two factories."""
    mod = types.ModuleType(name)
    exec(
        "import os\n_CACHE = {}\n\n"
        "def scale():\n"
        "    if 'scale' not in _CACHE:\n"
        "        _CACHE['scale'] = float(os.environ.get('FLYDEPS_TEST_ABA_SCALE', '0.5'))\n"
        "    return _CACHE['scale']\n\n"
        "def first(n):\n    return n * scale()\n\n"
        "def second(n):\n    return n * scale()\n",
        mod.__dict__,
    )
    sys.modules[name] = mod
    return mod


def test_a_memo_another_build_filled_then_emptied_is_rebuilt(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 35 (memo/manual_memo_filled_by_other_launcher): ``first``'s build got a memo hit
    on what ``second``'s build computed from the environment; the environment changed and the
    user emptied the memo. The memo went back along the other build's step, but the value that
    step wrote came from an input ``first`` never read: ``first`` is rebuilt, not adopted."""
    monkeypatch.delenv("FLYDEPS_TEST_ABA_SCALE", raising=False)
    mod = _memo_module("flydeps_test_aba_memo")
    first, second = cached_factory(mod.first), cached_factory(mod.second)
    assert second(2) == 1.0  # fills the memo from the environment
    assert first(2) == 1.0  # a memo hit: reads no environment
    monkeypatch.setenv("FLYDEPS_TEST_ABA_SCALE", "0.25")
    mod._CACHE.clear()
    assert first(2) == 0.5
    del sys.modules["flydeps_test_aba_memo"]


def test_judge_names_a_value_undone_along_other_builds_steps() -> None:
    """``judge``: the memo back at the state before another build's write gives UNDONE (no
    user change to raise about, but a rebuild), the state a build started from gives ADOPT."""
    mod = _memo_module("flydeps_test_aba_judge")
    try:
        from flydeps.keys.fingerprint import fingerprint_roots

        roots = [(mod.second, None, "root")]
        empty = build.stable(fingerprint_roots, roots)
        start = build.begin(empty)
        mod.second(1)  # a managed build fills the memo
        build.finish(start)
        filled = build.stable(fingerprint_roots, roots)
        assert build.judge(empty, filled).verdict is build.Verdict.ADOPT
        mod._CACHE.clear()
        emptied = build.stable(fingerprint_roots, roots)
        judgement = build.judge(filled, emptied)
        assert judgement.verdict is build.Verdict.UNDONE
        assert any("_CACHE" in d.node for d in judgement.diffs)
        starts = build.start_states(start)
        assert build.judge(filled, emptied, starts=starts).verdict is build.Verdict.ADOPT
    finally:
        del sys.modules["flydeps_test_aba_judge"]


def _raced_module(name: str) -> types.ModuleType:
    """Like :func:`_module`, with a helper whose code or defaults can be swapped (``other``'s
    code returns 'B'; ``('B',)`` as defaults returns 'B') and a data dict it reads."""
    mod = _module(name)
    exec(
        "TABLE = {'k': ''}\n\ndef helper(v='A'):\n    return v + TABLE['k']\n\ndef other(v='A'):\n    return 'B'\n",
        mod.__dict__,
    )
    return mod


def _build_while_swapped(name: str, patch: str, unpatch: str) -> None:
    """A build meets another thread's ``patch`` (then reads) and ``unpatch`` (before it ends):
    its caller gets the mixed result, which is never kept: the next call builds again."""
    mod = _raced_module(name)

    @cached_factory
    def make(race: bool) -> str:
        return mod.read(race)

    def swap() -> None:
        mod.started.get()
        exec(patch, {"mod": mod, "code": mod.helper.__code__})
        mod.patched.put(1)
        mod.read_done.get()
        exec(unpatch, {"mod": mod, "code": saved_code})
        mod.restored.put(1)
        mod.patched.put(1)  # a second build passes straight through
        mod.restored.put(1)

    saved_code = mod.helper.__code__
    swapper = threading.Thread(target=swap)
    swapper.start()
    try:
        assert make(True) != "A"  # the caller that started during the swap gets what it built
        swapper.join()
        assert make(True) == "A"  # not kept: built again, never the mixed result under A's key
        assert make.cache_info().misses == 2
    finally:
        del sys.modules[name]


def test_a_code_swap_put_back_during_the_build_is_not_kept() -> None:
    """Issue 35 (threads/code_swapped): seen through the audit hook, on every version."""
    _build_while_swapped("flydeps_aba_code", "mod.helper.__code__ = mod.other.__code__", "mod.helper.__code__ = code")


def test_a_defaults_swap_put_back_during_the_build_is_not_kept() -> None:
    """Issue 35 (threads/defaults_swapped)."""
    _build_while_swapped("flydeps_aba_defaults", "mod.helper.__defaults__ = ('B',)", "mod.helper.__defaults__ = ('A',)")


@pytest.mark.skipif(not _watch.TAGS, reason="PEP 509 tags are read on CPython 3.10/3.11 only")
def test_a_dict_entry_set_and_put_back_during_the_build_is_not_kept() -> None:
    """Issue 35 (threads/dict_entry): a dict bound as a data value has its tag read too."""
    _build_while_swapped("flydeps_aba_dict", "mod.TABLE['k'] = 'B'", "mod.TABLE['k'] = ''")


@pytest.mark.skipif(not __import__("flydeps.watch.audit").watch.audit.ENABLED, reason="FLYDEPS_AUDIT_HOOK=0")
def test_a_function_assigned_by_the_builds_own_thread_is_no_race() -> None:
    """Only other threads' assignments are races: a build swapping code itself is judged by
    the state comparison (a code change), not discarded as raced."""
    from flydeps.watch import audit as _audit

    assigned = _audit.record_assignments()
    try:
        mod = _raced_module("flydeps_aba_own_code")
        mod.helper.__defaults__ = ("A",)
        done = threading.Event()

        def assign() -> None:
            mod.other.__defaults__ = ("A",)
            done.set()

        threading.Thread(target=assign).start()
        done.wait()
        assert id(mod.helper) not in assigned and id(mod.other) in assigned
    finally:
        _audit.stop_recording(assigned)
        del sys.modules["flydeps_aba_own_code"]
    late = threading.Thread(target=setattr, args=(mod.helper, "__defaults__", ("B",)))
    late.start()
    late.join()
    assert assigned == {id(mod.other)}  # nothing after stop_recording
