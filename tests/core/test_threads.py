"""Never stale under threads (issue 8): threads x patches x keys, on both hit paths.

The oracle is the value a build returns: each build calls the module's helper, whose
version is the number of the patch that installed it. A patch is *published* (``DONE[0]``)
only after the assignment returned; a call that reads ``DONE[0] == p`` before it starts must
return a build made with helper version >= p. Patches alternate rebinding the helper and
swapping its ``__code__``.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

import pytest

from flydeps import fingerprint
from flydeps.builds import factory
from flydeps.watch import audit as _audit

PATHS = ["c", "py"] if factory.FASTCACHE else ["py"]
THREADS, PATCHES, KEYS = 32, 100, 6

MODULE = """
import time
from flydeps import cached_factory

DONE = [0]
REGISTRY = {}

def helper():
    return 0

@cached_factory(maxsize=None, on_drift="rebuild")
def make(key):
    version = helper()
    time.sleep(0)                # let other threads run (and patch) during the build
    return (key, version)

@cached_factory(maxsize=None, on_drift="rebuild")
def lookup(key):
    return (key, REGISTRY.get(key), len(REGISTRY))  # a registry other threads mutate
"""


@pytest.fixture(params=PATHS)
def path(request, monkeypatch) -> str:
    monkeypatch.setenv("FLYDEPS_FASTCACHE", "1" if request.param == "c" else "0")
    return request.param


def _versioned_code(n: int):
    namespace: dict = {}
    exec(compile(f"def helper():\n    return {n}\n", "<patch>", "exec"), namespace)  # noqa: S102
    return namespace["helper"]


def test_threads_patches_keys_never_stale(pkg, path) -> None:
    pkg.write("t", MODULE)
    t = pkg.load("t")
    stale: list[tuple] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def caller(seed: int) -> None:
        n = seed
        while not stop.is_set():
            key = n % KEYS
            n += 7
            published = t.DONE[0]
            try:
                got = t.make(key)
            except BaseException as exc:  # noqa: BLE001 - every escaped exception is a failure
                errors.append(exc)
                return
            if got[1] < published:
                stale.append((key, got, published))

    workers = [threading.Thread(target=caller, args=(i,)) for i in range(THREADS)]
    for w in workers:
        w.start()
    try:
        for p in range(1, PATCHES + 1):
            if p % 2:  # rebinding the name (a new function defined in the module)
                exec(compile(f"def helper():\n    return {p}\n", t.__file__, "exec"), t.__dict__)  # noqa: S102
            else:  # swapping the code of the bound function
                t.helper.__code__ = _versioned_code(p).__code__
            t.DONE[0] = p
            time.sleep(0.002)
    finally:
        stop.set()
        for w in workers:
            w.join(30)
    assert not errors, f"{len(errors)} exceptions escaped make(): {errors[:3]!r}"
    assert not stale, f"{len(stale)} stale results, e.g. {stale[:3]}"
    assert all(t.make(k)[1] == PATCHES for k in range(KEYS))


# ------------------------------------------------------------------- the audit-hook window

_SLEEPY = [False]


def _sleepy_hook(event: str, args: tuple) -> None:
    # Runs after flydeps' hook and before CPython stores the attribute: release the GIL there.
    if _SLEEPY[0] and event == "object.__setattr__" and len(args) > 1 and args[1] == "__code__":
        time.sleep(0)


_installed: list[bool] = []


def _install_sleepy_hook() -> None:
    if not _installed:
        _audit.install()  # flydeps' hook first, then this one
        sys.addaudithook(_sleepy_hook)
        _installed.append(True)


def _race(check: Callable[[int], Callable[[], bool]], swap: Callable[[int], None], rounds: int) -> list[int]:
    """Spin ``check`` in another thread while ``swap(i)`` runs; count checks that still pass
    after the swap returned (each round starts from a freshly validated state): their rounds."""
    stop = threading.Event()
    current: list = [None]

    def spin() -> None:
        while not stop.is_set():
            fn = current[0]
            if fn is not None:
                fn()

    spinner = threading.Thread(target=spin)
    spinner.start()
    stale: list[int] = []
    _SLEEPY[0] = True
    try:
        for i in range(rounds):
            current[0] = check(i)
            swap(i)
            if current[0]():
                stale.append(i)
    finally:
        _SLEEPY[0] = False
        stop.set()
        spinner.join(10)
    return stale


def test_audit_window_guard(pkg) -> None:
    _install_sleepy_hook()
    pkg.write("a", "def f():\n    return 0\n")
    f = pkg.load("a").f

    def check(i: int):
        guard = fingerprint(f).guard()
        assert guard.check()
        return guard.check

    def swap(i: int) -> None:
        f.__code__ = _versioned_code(i + 1).__code__

    assert _race(check, swap, 300) == []


def test_audit_window_cached_factory(pkg, path) -> None:
    _install_sleepy_hook()
    pkg.write("a", "def f():\n    return 0\n")
    pkg.write(
        "m",
        f"from {pkg.name} import a\nfrom flydeps import cached_factory\n\n"
        "@cached_factory(maxsize=None)\ndef make(key):\n    return a.f()\n",
    )
    a, make = pkg.load("a"), pkg.load("m").make

    def check(i: int):
        assert make(0) == make(0)  # built and validated
        return lambda: make(0) == i  # still the build made before swap i

    def swap(i: int) -> None:
        a.f.__code__ = _versioned_code(i + 1).__code__

    assert _race(check, swap, 300) == []


def test_pending_store_that_fails_only_slows_checks(pkg) -> None:
    """An assignment that fails after the audit event stays pending: answers stay right."""
    pkg.write("b", "def f():\n    return 0\ndef g():\n    x = 1\n    def h():\n        return x\n    return h\n")
    b = pkg.load("b")
    guard = fingerprint(b.f).guard()
    assert guard.check()
    with pytest.raises(ValueError):
        b.f.__code__ = b.g().__code__  # h's code needs a closure: rejected after the event
    assert guard.check() and b.f() == 0
    b.f.__code__ = _versioned_code(7).__code__
    assert not guard.check()


def test_registry_mutated_by_other_threads_never_raises(pkg, path) -> None:
    """Issue 8.3: no RuntimeError (dict changed size during iteration) escapes a call."""
    pkg.write("r", MODULE)
    r = pkg.load("r")
    errors: list[BaseException] = []
    stop = threading.Event()

    def mutator() -> None:
        n = 0
        while not stop.is_set():
            r.REGISTRY[n % 50] = n
            r.REGISTRY.pop((n + 25) % 50, None)
            n += 1
            if n % 8 == 0:
                time.sleep(0)  # let callers run: they read it while it keeps changing

    def caller(seed: int) -> None:
        n = seed
        try:
            for _ in range(60):
                got = r.lookup(n % KEYS)
                assert got[0] == n % KEYS
                n += 1
        except BaseException as exc:  # noqa: BLE001 - every escaped exception is a failure
            errors.append(exc)

    mutators = [threading.Thread(target=mutator) for _ in range(2)]
    callers = [threading.Thread(target=caller, args=(i,)) for i in range(THREADS)]
    for w in (*mutators, *callers):
        w.start()
    for w in callers:
        w.join(60)
    stop.set()
    for w in mutators:
        w.join(10)
    assert not errors, f"{len(errors)} exceptions escaped lookup(): {errors[:3]!r}"
