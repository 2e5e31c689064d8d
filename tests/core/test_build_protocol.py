"""The build protocol (flydeps.builds.protocol): snapshot before the build, adopt only its own writes.

Each scenario runs on both hit paths (the C FastCache and FLYDEPS_FASTCACHE=0). Changes
"made by another thread during the build" are made by a real second thread while the build
waits on an event handed to it as an argument (an argument is keyed, not read as state).
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from flydeps import GlobalDriftError, cached_factory
from flydeps.builds import factory
from flydeps.builds import protocol as build
from flydeps.builds.drift import check_policy
from flydeps.builds.writes import TRANSITIONS, Transitions, write_targets

PATHS = ["c", "py"] if factory.FASTCACHE else ["py"]


@pytest.fixture(params=PATHS)
def path(request, monkeypatch) -> str:
    monkeypatch.setenv("FLYDEPS_FASTCACHE", "1" if request.param == "c" else "0")
    return request.param


def _during_build(make: Callable[..., object], change: Callable[[], None], *args: object) -> Any:
    """Call ``make(*args, started, proceed)``; run ``change`` in another thread while it builds."""
    started, proceed = threading.Event(), threading.Event()

    def other() -> None:
        started.wait(5)
        change()
        proceed.set()

    t = threading.Thread(target=other)
    t.start()
    try:
        return make(*args, started, proceed)
    finally:
        t.join(5)


FACTORY = """
from flydeps import cached_factory

CONF = 1
LOG = []
BUILDS = []

def helper():
    return "old"

@cached_factory(on_drift={policy!r})
def make(key, started=None, proceed=None):
    BUILDS.append(key)
    first = helper()
    conf = CONF
    n = len(LOG)
    if started is not None:
        started.set()
        proceed.wait(5)
    return (key, first, conf, n)
"""


def _load(pkg, policy: str = "rebuild"):
    pkg.write("f", FACTORY.format(policy=policy))
    return pkg.load("f")


def test_helper_rebound_during_build_is_not_kept(pkg, path) -> None:
    f = _load(pkg)

    def rebind() -> None:
        f.helper = lambda: "new"

    got = _during_build(f.make, rebind, "a")
    assert got == ("a", "old", 1, 0), "the caller that started before the change gets its build"
    assert f.make("a", None, None)[1] == "new"  # a call after the change: built after it
    assert f.make("a", None, None)[1] == "new" and f.BUILDS.count("a") == 2


def test_helper_code_swap_during_build_is_not_kept(pkg, path) -> None:
    f = _load(pkg)
    helper = f.helper

    def swap() -> None:
        helper.__code__ = (lambda: "swapped").__code__

    assert _during_build(f.make, swap, "a")[1] == "old"
    assert f.make("a")[1] == "swapped"


def test_other_threads_data_change_during_build_is_not_adopted(pkg, path) -> None:
    f = _load(pkg)
    assert f.make("a") == ("a", "old", 1, 0)

    def set_conf() -> None:
        f.CONF = 2

    assert _during_build(f.make, set_conf, "b")[2] == 1
    assert f.make("a") == ("a", "old", 2, 0), "issue 8.2: make('a') must not keep CONF = 1"
    assert f.make("b") == ("b", "old", 2, 0)


def test_other_threads_append_during_build_is_not_adopted(pkg, path) -> None:
    f = _load(pkg)
    assert f.make("a")[3] == 0
    assert _during_build(f.make, lambda: f.LOG.append("x"), "b")[3] == 0
    assert f.make("a")[3] == 1 and f.make("b")[3] == 1


def test_drift_raise_after_other_threads_change_names_real_values(pkg, path) -> None:
    f = _load(pkg, "raise")
    f.make("a")
    f.LOG.append("user")
    with pytest.raises(GlobalDriftError) as err:
        f.make("a")
    assert (err.value.name, err.value.old, err.value.new) == ("LOG", "[]", "['user']")
    assert "[] -> ['user']" in str(err.value)


SHARED = """
from flydeps import cached_factory

REGISTRY = []
MEMO = {{}}
SCALE = 3

def record(name):
    REGISTRY.append(name)          # a helper that appends to a registry while building
    MEMO.setdefault(name, len(MEMO))

@cached_factory(on_drift={policy!r})
def first(n):
    record(("first", n))
    return (n * SCALE, len(REGISTRY))

@cached_factory(on_drift={policy!r})
def second(n):
    record(("second", n))
    return (n + SCALE, len(REGISTRY))
"""


@pytest.mark.parametrize("policy", ["rebuild", "raise"])
def test_managed_builds_writes_are_adopted_by_every_consumer(pkg, path, policy) -> None:
    pkg.write("s", SHARED.format(policy=policy))
    s = pkg.load("s")
    a = s.first(1)
    b = s.second(1)  # writes REGISTRY and MEMO, which first(1) read
    assert s.first(1) is a and s.second(1) is b
    s.first(2)  # and again, the other way round
    assert s.second(1) is b and s.first(1) is a
    assert s.first.cache_info().hits == 2 and s.first.cache_info().misses == 2
    assert s.second.cache_info().hits == 2 and s.second.cache_info().misses == 1
    s.REGISTRY.append("a user's own change")
    if policy == "raise":
        with pytest.raises(GlobalDriftError, match="REGISTRY"):
            s.first(1)
    else:
        assert s.first(1) is not a


def test_a_failed_builds_writes_are_its_own_effect_too(pkg, path) -> None:
    """A build that wrote the registry and memo, then raised, is still a managed build: the
    other factory, which read them, neither raises GlobalDriftError nor rebuilds."""
    broken = "\n\n@cached_factory\ndef broken(n):\n    record(('broken', n))\n    raise ValueError('no such variant')\n"
    pkg.write("s", SHARED.format(policy="raise") + broken)
    s = pkg.load("s")
    a = s.first(1)
    with pytest.raises(ValueError, match="no such variant"):
        s.broken(1)
    assert s.first(1) is a and s.first.cache_info().misses == 1


def test_user_change_between_builds_breaks_the_chain(pkg, path) -> None:
    pkg.write("s", SHARED.format(policy="rebuild"))
    s = pkg.load("s")
    a = s.first(1)
    s.MEMO["user"] = 99  # the user's change...
    s.second(1)  # ...then a managed build writes on top of it
    assert s.first(1) is not a, "the user's change must not be adopted with the build's write"


def test_waiters_of_a_failed_build_get_its_failure(path) -> None:
    calls: list[int] = []
    entered = threading.Event()

    @cached_factory
    def failing(n, entered, release):
        calls.append(n)
        entered.set()
        release.wait(5)
        raise ValueError(f"cannot build {n}")

    release = threading.Event()
    errors: list[BaseException] = []

    def call() -> None:
        try:
            failing(1, entered, release)
        except ValueError as exc:
            errors.append(exc)

    builder = threading.Thread(target=call)
    builder.start()
    assert entered.wait(5)
    waiters = [threading.Thread(target=call) for _ in range(8)]
    for t in waiters:
        t.start()
    _wait_until_blocked(waiters)
    release.set()
    for t in (builder, *waiters):
        t.join(10)
    assert calls == [1], "one build; its waiters share its failure instead of retrying in turn"
    assert len(errors) == 9 and len({id(e) for e in errors}) == 1
    assert failing.cache_info().misses == 1 and failing.cache_info().currsize == 0


def _wait_until_blocked(threads: list[threading.Thread]) -> None:
    """Until every thread waits for the pending build (its stack: ``_build`` -> ``wait``)."""
    while True:
        frames = sys._current_frames()
        blocked = 0
        for t in threads:
            names, frame = [], frames.get(t.ident)  # type: ignore[arg-type]  # None (unstarted) finds no frame
            while frame is not None:
                names.append(frame.f_code.co_name)
                frame = frame.f_back
            blocked += "_build" in names and "wait" in names
        if blocked == len(threads):
            return
        time.sleep(0.01)


def test_env_reads_of_a_build_key_its_entry(pkg, path, monkeypatch) -> None:
    pkg.write(
        "e",
        """
        import os
        from flydeps import cached_factory

        @cached_factory
        def make(n):
            return (n, os.environ.get("FLYDEPS_TEST_KNOB", "0"))
        """,
    )
    monkeypatch.setenv("FLYDEPS_TEST_KNOB", "1")
    e = pkg.load("e")
    first = e.make(1)
    assert first == (1, "1") and e.make(1) is first
    monkeypatch.setenv("FLYDEPS_TEST_KNOB", "2")
    assert e.make(1) == (1, "2")
    monkeypatch.delenv("FLYDEPS_TEST_KNOB")
    assert e.make(1) == (1, "0")
    assert e.make.cache_info().misses == 3 and e.make.cache_info().hits == 1


def test_write_targets_read_from_bytecode(pkg) -> None:
    pkg.write(
        "w",
        """
        import types
        mod = types.ModuleType("mod")
        A, B, C, D, E, F, READ = [], {}, {}, 0, [], None, 1

        def writer(k):
            global D
            A.append(k)
            B[k] = READ
            C.setdefault(k, 1)
            D = 1
            mod.attr = 2
            return READ

        def nonlocal_writer():
            memo = {}
            def inner(k):
                memo[k] = 1
            return inner
        """,
    )
    w = pkg.load("w")
    labels = {t.label for t in write_targets([w.writer])}
    assert labels == {f"{pkg.name}.w:{n}" for n in ("A", "B", "C", "D")} | {"mod:attr"}
    (cell,) = write_targets([w.nonlocal_writer()])
    # the node id discovery gives the closure's content, so judge() finds its recorded steps
    assert cell.label == f"{pkg.name}.w:nonlocal_writer.<locals>.inner#closure.memo"


def test_transitions_follow_chains_only() -> None:
    t = Transitions(limit=3)
    t.record("m:V", "a", "b")
    t.record("m:V", "b", "c")
    assert t.explains("m:V", "a", "c") and not t.explains("m:V", "c", "a") and not t.explains("m:V", "a", "z")
    assert not t.explains("m:W", "a", "b")  # another global holding equal values explains nothing
    t.record("m:V", "x", "y")
    t.record("m:V", "y", "z")  # beyond the limit: the oldest step is forgotten
    assert not t.explains("m:V", "a", "b") and t.explains("m:V", "x", "z")


def test_judge_verdicts(pkg) -> None:
    pkg.write("j", "VALUE = [1]\nCONST = 2\ndef f():\n    return VALUE, CONST\n")
    j = pkg.load("j")
    from flydeps import fingerprint

    base = fingerprint(j.f)
    assert build.judge(base, base.refresh()).verdict is build.Verdict.SAME
    j.CONST = 3
    changed = build.judge(base, base.refresh())
    assert changed.verdict is build.Verdict.DATA and "2 -> 3" in changed.reasons()
    j.CONST = 2
    j.VALUE.append(2)
    assert build.judge(base, base.refresh()).verdict is build.Verdict.DATA
    old, new = base.graph.nodes[f"{pkg.name}.j:VALUE"].digest, base.refresh().graph.nodes[f"{pkg.name}.j:VALUE"].digest
    TRANSITIONS.record(f"{pkg.name}.j:OTHER", old, new)  # another global's equal step explains nothing
    assert build.judge(base, base.refresh()).verdict is build.Verdict.DATA
    TRANSITIONS.record(f"{pkg.name}.j:VALUE", old, new)  # as a managed build would
    assert build.judge(base, base.refresh()).verdict is build.Verdict.ADOPT
    j.f.__code__ = (lambda: 0).__code__
    assert build.judge(base, base.refresh()).verdict is build.Verdict.CODE


def test_partial_reload_rebinding_to_an_identical_helper_is_not_a_code_change(pkg) -> None:
    # ``user`` imported ``load`` by value; reloading ``mem`` alone leaves two generations of
    # ``load`` alive: ``acc`` (reloaded) reads the new one, ``user`` still holds the old one.
    pkg.write("mem", "LOG = []\ndef load(x):\n    return x * 2\ndef acc(x):\n    LOG.append(x)\n    return load(x)\n")
    pkg.write("user", "from .mem import load, acc\ndef k():\n    return load(1), acc(1)\n")
    user = pkg.load("user")
    user.k()  # LOG == [1]
    from flydeps import fingerprint

    base = fingerprint(user.k)
    old_load = user.load
    mem = pkg.edit("mem", "LOG = []", "LOG = []  # reloaded")
    assert mem.load is not old_load and mem.load.__code__.co_code == old_load.__code__.co_code
    judgement = build.judge(base, base.refresh())
    # The reload emptied LOG (a data change nobody's build explains); the new ``load`` that
    # ``acc`` now reads is the same code as before, so that is not a reason.
    assert judgement.verdict is build.Verdict.DATA, judgement.reasons()
    assert "resolves" not in judgement.reasons()
    pkg.edit("mem", "return x * 2", "return x * 3")  # a real edit of the helper acc reads
    judgement = build.judge(base, base.refresh())
    assert judgement.verdict is build.Verdict.CODE and "now resolves to" in judgement.reasons()


def test_bad_drift_policy_names_the_consumer_and_choices() -> None:
    with pytest.raises(ValueError, match=r"cached_factory\(on_drift='never'\).*rebuild, raise, warn"):
        check_policy("never", "cached_factory")
    with pytest.raises(ValueError, match="on_drift must be one of"):
        cached_factory(on_drift=None)  # type: ignore[call-overload]


def test_build_not_kept_is_logged(pkg, path, caplog) -> None:
    f = _load(pkg)
    with caplog.at_level(logging.INFO, logger="flydeps"):
        _during_build(f.make, lambda: setattr(f, "CONF", 5), "a")
    assert "not kept" in caplog.text and "CONF" in caplog.text and "1 -> 5" in caplog.text


def test_a_factory_returning_what_its_code_reads_is_kept(pkg, path) -> None:
    """The returned object is also reached from the factory's own code: in a graph with the
    return value as a second root its node gets another id. The verdict compares the same
    roots before and after, so the entry is kept and the next call is a hit."""
    pkg.write(
        "ret",
        "import flydeps\n"
        "def helper(x):\n    return x + 1\n"
        "def launch(x):\n    return helper(x)\n"
        "TABLE = {'launch': launch}\n"
        "@flydeps.cached_factory\n"
        "def get(name):\n    return TABLE[name] if name in TABLE else launch\n",
    )
    ret = pkg.load("ret")
    assert ret.get("launch") is ret.launch and ret.get("other") is ret.launch
    ret.get("launch"), ret.get("other")
    assert ret.get.cache_info().misses == 2 and ret.get.cache_info().hits == 2
    ret.helper.__code__ = (lambda x: x + 2).__code__  # a real change still rebuilds
    ret.get("launch")
    assert ret.get.cache_info().misses == 3
