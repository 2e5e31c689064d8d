"""Issue 35.6: a helper rebound by another thread while a build runs and put back before it
ends (A-B-A) never leaves an entry keyed by one state holding what was built from another.

Detected through PEP 509 dict tags (CPython 3.10/3.11, ``flydeps._dictver``); skipped where
they are not read (documented limit in flydeps.build).
"""

from __future__ import annotations

import queue
import sys
import threading
import types

import pytest

from flydeps import _watch, build, cached_factory


def _module(name: str) -> types.ModuleType:
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
