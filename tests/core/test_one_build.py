"""One build per (key, dependency state) under threads (issue 36.8), on both hit paths.

"Dependency state" is the digest of the factory's fingerprint (``flydeps.fingerprint(make)``
here): the state a build starts from and is kept under. A patch that installs a helper
identical to the one bound (the same code in a new function object, or a copy of its code
object) fails the entry's identity guard but leaves that digest alone, so it must not cost a
build. The factory counts its builds through its argument (``Probe``, also its key): the
fingerprint does not read arguments, so counting does not change the state it counts.
"""

from __future__ import annotations

import logging
import threading
import types
from collections import Counter
from typing import Any

import pytest

from flydeps import fingerprint
from flydeps.builds import factory

PATHS = ["c", "py"] if factory.FASTCACHE else ["py"]
THREADS, VERSIONS, COPIES = 16, 4, 6

MODULE = """
from flydeps import cached_factory

def helper():
    return 0

@cached_factory(maxsize=None)
def make(probe):
    version = helper()
    probe.built(version)
    return version
"""


class Probe:
    """The factory's argument: records the helper version each build read."""

    def __init__(self) -> None:
        self.builds: list[int] = []

    def built(self, version: int) -> None:
        self.builds.append(version)  # list.append: atomic under the GIL

    def per_version(self) -> Counter:
        return Counter(self.builds)


@pytest.fixture(params=PATHS)
def path(request, monkeypatch) -> str:
    monkeypatch.setenv("FLYDEPS_FASTCACHE", "1" if request.param == "c" else "0")
    return request.param


def _versioned_code(n: int) -> types.CodeType:
    namespace: dict = {}
    exec(compile(f"def helper():\n    return {n}\n", "<patch>", "exec"), namespace)  # noqa: S102
    return namespace["helper"].__code__


def _load(pkg, name: str, source: str) -> types.ModuleType:
    pkg.write(name, source)
    return pkg.load(name)


def _same_helper_again(module: Any, n: int) -> None:
    """Install a helper identical to the bound one: a copy of its code object (even ``n``) or
    a new function object around the same code (odd ``n``)."""
    helper = module.helper
    if n % 2 == 0:
        helper.__code__ = helper.__code__.replace()
    else:
        module.helper = types.FunctionType(helper.__code__, helper.__globals__, helper.__name__)


class _OnFirstRebuild(logging.Filter):
    """Runs ``action`` once, on ``thread``, when the ``flydeps`` logger says it rebuilds: after
    that thread judged its entry stale and before it goes on to build."""

    def __init__(self, thread: int, action) -> None:
        super().__init__()
        self.thread, self.action, self.fired = thread, action, False

    def filter(self, record: logging.LogRecord) -> bool:
        if not self.fired and threading.get_ident() == self.thread and record.getMessage().startswith("rebuilt"):
            self.fired = True
            self.action()
        return True


def test_stale_caller_does_not_rebuild_what_another_thread_built(pkg, path, caplog) -> None:
    """The caller that found its entry stale finds, when it comes to build, the entry another
    thread built for the new state meanwhile, whose guard an identical patch has failed since:
    it revalidates that entry (same digest) instead of building the same state again."""
    t = _load(pkg, "one", MODULE)
    probe = Probe()
    assert t.make(probe) == 0
    t.helper.__code__ = _versioned_code(1)  # a real change: the entry is stale
    digests: list[str] = []

    def meanwhile() -> None:
        other = threading.Thread(target=t.make, args=(probe,))
        other.start()
        other.join(60)
        digests.append(fingerprint(t.make.__wrapped__).digest)
        _same_helper_again(t, 0)
        digests.append(fingerprint(t.make.__wrapped__).digest)

    hook = _OnFirstRebuild(threading.get_ident(), meanwhile)
    log = logging.getLogger("flydeps")
    log.addFilter(hook)
    try:
        with caplog.at_level(logging.INFO, logger="flydeps"):
            assert t.make(probe) == 1
    finally:
        log.removeFilter(hook)
    assert hook.fired and digests[0] == digests[1], "the identical patch must keep the dependency state"
    assert probe.per_version() == Counter({0: 1, 1: 1}), f"builds per helper version: {probe.builds}"
    assert tuple(t.make.cache_info()) == (1, 2, None, 1)


def test_threads_build_each_state_once(pkg, path) -> None:
    """16 threads hammer one key while the helper gets ``VERSIONS`` real changes, each followed
    by ``COPIES`` identical patches: one build per version, the others wait for it or hit.

    Each patch is published only after it was made; the next one waits until a call that
    started after it has returned (so the threads ran between any two patches)."""
    t = _load(pkg, "hammer", MODULE)
    probe = Probe()
    published, seen = [0], [0]
    progress = threading.Condition()
    stop = threading.Event()
    errors: list[BaseException] = []

    def caller() -> None:
        while not stop.is_set():
            start = published[0]
            try:
                t.make(probe)
            except BaseException as exc:  # noqa: BLE001 - every escaped exception is a failure
                errors.append(exc)
                return
            if start > seen[0]:
                with progress:
                    seen[0] = max(seen[0], start)
                    progress.notify_all()

    def publish(event: int) -> None:
        published[0] = event
        with progress:
            returned = progress.wait_for(lambda: seen[0] >= event or bool(errors), 120)
        assert returned, f"no call returned within 120 s after patch {event}"

    workers = [threading.Thread(target=caller) for _ in range(THREADS)]
    for w in workers:
        w.start()
    try:
        publish(event := 1)  # the threads called the factory before any patch
        for version in range(1, VERSIONS + 1):
            t.helper.__code__ = _versioned_code(version)
            publish(event := event + 1)
            for copy in range(COPIES):
                _same_helper_again(t, copy)
                publish(event := event + 1)
    finally:
        stop.set()
        for w in workers:
            w.join(60)
    assert not errors, f"{len(errors)} exceptions escaped make(): {errors[:3]!r}"
    assert probe.per_version() == Counter(range(VERSIONS + 1)), f"builds per helper version: {probe.builds}"
    assert t.make(probe) == VERSIONS
