"""The C hit path (``flydeps.builds._fastcache.FastCache``) and the Python one behave the same.

Every behavioural test runs on both paths: ``c`` (the extension, skipped where it was not
built) and ``py`` (``FLYDEPS_FASTCACHE=0``, read when a factory is decorated). LRU order
and counters are compared with ``functools.lru_cache`` on random call sequences.
"""

from __future__ import annotations

import copy
import functools
import gc
import inspect
import os
import pickle
import subprocess
import sys
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flydeps import cached_factory
from flydeps.builds import factory
from flydeps.watch import audit as _audit
from flydeps.watch import watchers as _watch

HAS_C = factory.FASTCACHE
_COUNTERS = (_watch.AVAILABLE and _watch.BACKEND == "ext") or (
    _watch.TAGS and bool(getattr(factory._fastcache, "TAGS_API", 0))
)
FAST_ON = HAS_C and _audit.ENABLED and _COUNTERS
needs_c = pytest.mark.skipif(not HAS_C, reason="flydeps.builds._fastcache was not built for this interpreter")
needs_fast = pytest.mark.skipif(
    not FAST_ON,
    reason="the counter-only hit needs flydeps.watch._watchext (3.12+) or flydeps.watch._dictver (3.10/3.11)",
)
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(params=["c", "py"])
def path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Decorate with the C or the Python hit path (the env var is read at decoration)."""
    if request.param == "c" and not HAS_C:
        pytest.skip("flydeps.builds._fastcache was not built for this interpreter")
    monkeypatch.setenv("FLYDEPS_FASTCACHE", "1" if request.param == "c" else "0")
    yield request.param


def _decorated(path: str, fn: Callable[..., Any], **kwargs: Any) -> Any:
    wrapper = cached_factory(**kwargs)(fn)
    assert (type(wrapper).__name__ == "FastCache") == (path == "c")
    return wrapper


# ----------------------------------------------------------------------- lru_cache parity

KEYS = st.one_of(st.integers(0, 3), st.sampled_from(["a", "b"]), st.sampled_from([1.0, True, (1, 2)]))
CALLS = st.lists(
    st.one_of(
        st.tuples(st.just("pos"), KEYS),
        st.tuples(st.just("two"), KEYS),
        st.tuples(st.just("kw"), KEYS),
        st.tuples(st.just("clear"), st.none()),
    ),
    max_size=25,
)


def _pure(x: object, y: object = 0) -> tuple[str, str]:
    return (type(x).__name__, type(y).__name__)


@pytest.mark.parametrize("typed", [False, True])
@pytest.mark.parametrize("maxsize", [0, 1, 2, 3, None])
@settings(max_examples=25, deadline=None)
@given(calls=CALLS)
def test_random_sequences_match_lru_cache(maxsize: int | None, typed: bool, calls: list[tuple[str, object]]) -> None:
    paths = (["c"] if HAS_C else []) + ["py"]
    for p in paths:
        os.environ["FLYDEPS_FASTCACHE"] = "1" if p == "c" else "0"
        try:
            ours = cached_factory(maxsize=maxsize, typed=typed)(_pure)
        finally:
            del os.environ["FLYDEPS_FASTCACHE"]
        ref = functools.lru_cache(maxsize=maxsize, typed=typed)(_pure)
        for op, arg in calls:
            if op == "clear":
                ours.cache_clear()
                ref.cache_clear()
                continue
            call: Callable[[Callable[..., Any]], Any] = {
                "pos": lambda f: f(arg),
                "two": lambda f: f(arg, arg),
                "kw": lambda f: f(arg, y=1),
            }[op]
            before = ref.cache_info()
            assert call(ours) == call(ref)
            hit = ref.cache_info().hits > before.hits
            assert ours.cache_info() == ref.cache_info(), (p, op, arg, "hit" if hit else "miss")


def test_lru_order_and_eviction(path: str) -> None:
    built: list[int] = []

    def f(x: int) -> int:
        built.append(x)
        return x

    ours = _decorated(path, f, maxsize=2)
    ours(1), ours(2), ours(1), ours(3)  # 2 is the least recently used: evicted
    assert built == [1, 2, 3]
    ours(1)
    assert built == [1, 2, 3]
    ours(2)
    assert built == [1, 2, 3, 2]  # 3 was evicted (1 was touched)
    info = ours.cache_info()
    assert (info.hits, info.misses, info.currsize) == (2, 4, 2)


# -------------------------------------------------------------------------- API surface


def test_wrapper_attributes_like_lru_cache(path: str) -> None:
    def build(block: int, *, warps: int = 4) -> str:
        """Docs."""
        return f"{block}/{warps}"

    ours = _decorated(path, build)
    ref = functools.lru_cache(build)
    for attr in ("__name__", "__qualname__", "__doc__", "__module__", "__wrapped__"):
        assert getattr(ours, attr) == getattr(ref, attr), attr
    assert inspect.signature(ours) == inspect.signature(build)
    assert ours.cache_parameters() == ref.cache_parameters()
    assert ours(1, warps=8) == "1/8" and ours(1, warps=8) == "1/8"
    assert ours.cache_info().hits == 1
    r = weakref.ref(ours)
    assert r() is ours
    assert copy.copy(ours) is ours and copy.deepcopy(ours) is ours


@cached_factory
def module_level_factory(n: int) -> int:
    return n + 1


def test_pickles_by_reference() -> None:
    assert pickle.loads(pickle.dumps(module_level_factory)) is module_level_factory


def test_methods_bind_like_lru_cache(path: str) -> None:
    class K:
        def build(self, n: int) -> tuple[object, int]:
            return (self, n)

    K.build = _decorated(path, K.build)  # type: ignore[method-assign]
    build: Any = K.build  # the cached wrapper (cache_info, __wrapped__)
    a, b = K(), K()
    assert a.build(2) is a.build(2)
    assert b.build(2)[0] is b
    assert build.cache_info().hits == 1 and build.cache_info().misses == 2
    assert K.__dict__["build"].__get__(None, K) is K.__dict__["build"]
    assert K.build(a, 2) is a.build(2)
    bound: Any = a.build
    assert bound.__self__ is a and bound.__wrapped__ is build.__wrapped__


@pytest.mark.parametrize("typed", [False, True])
def test_unhashable_arguments_same_error(path: str, typed: bool) -> None:
    ours = _decorated(path, lambda x, y=0: x, typed=typed)
    ref: Any = functools.lru_cache(typed=typed)(lambda x, y=0: x)  # called with unhashable args on purpose
    for args, kwargs in [(([1],), {}), (({},), {}), ((1,), {"y": [2]})]:
        with pytest.raises(TypeError) as ours_err:
            ours(*args, **kwargs)
        with pytest.raises(TypeError) as ref_err:
            ref(*args, **kwargs)
        assert str(ours_err.value) == str(ref_err.value)
    assert ours.cache_info() == ref.cache_info()


def test_exceptions_propagate_and_are_not_cached(path: str) -> None:
    attempts: list[int] = []

    def flaky(x: int) -> int:
        attempts.append(x)
        if len(attempts) % 2:
            raise KeyError(f"build {len(attempts)} fails")
        return x

    ours = _decorated(path, flaky, maxsize=4)
    with pytest.raises(KeyError, match="build 1 fails"):
        ours(1)
    assert ours(1) == 1 and ours(1) == 1
    assert attempts == [1, 1]
    info = ours.cache_info()
    assert (info.hits, info.misses, info.currsize) == (1, 2, 1)  # what lru_cache counts too


# ---------------------------------------------------------------------------- reentrancy


def test_factory_that_clears_its_own_cache(path: str) -> None:
    holder: dict[str, Any] = {}

    def build(n: int) -> int:
        holder["f"].cache_clear()
        return n * 2

    holder["f"] = f = _decorated(path, build, maxsize=2)
    assert [f(1), f(2), f(3), f(1)] == [2, 4, 6, 2]
    assert f(1) == 2 and f.cache_info().currsize == 1


def test_recursive_factory(path: str) -> None:
    holder: dict[str, Any] = {}

    def fib(n: int) -> int:
        return n if n < 2 else holder["f"](n - 1) + holder["f"](n - 2)

    holder["f"] = f = _decorated(path, fib, maxsize=3)
    assert f(25) == 75025
    ref = functools.lru_cache(maxsize=3)(lambda n: n if n < 2 else ref(n - 1) + ref(n - 2))
    ref(25)
    assert f.cache_info().currsize == ref.cache_info().currsize


class _ClearsOnDel:
    """A built value whose finalizer calls back into the cache (eviction runs user code)."""

    def __init__(self, cache: list[Any], n: int) -> None:
        self.cache, self.n = cache, n

    def __del__(self) -> None:
        if self.cache:
            self.cache[0].cache_clear()
            self.cache[0](100 + self.n)


def test_eviction_runs_finalizers_that_reenter(path: str) -> None:
    holder: list[Any] = []
    f = _decorated(path, lambda n: _ClearsOnDel(holder, n) if n < 100 else n, maxsize=1)
    holder.append(f)
    for n in range(5):
        assert f(n).n == n
    holder.clear()
    assert f.cache_info().currsize <= 1


@needs_c
def test_check_that_clears_and_raises_is_safe() -> None:
    from flydeps.builds import _fastcache  # type: ignore[attr-defined]

    calls: list[tuple] = []
    fc: Any = None

    def slow(args: tuple, kwds: Any, stale: Any) -> str:
        calls.append((args, kwds, stale is not None))
        return "slow"

    def clearing_check() -> bool:
        fc.clear()  # drops the entry (and its Link) while the call path holds it
        gc.collect()
        return True

    def raising_check() -> bool:
        raise RuntimeError("check failed loudly")

    fc = _fastcache.FastCache(2, False, slow, _audit._GEN, factory._KWD_MARK)
    fc.store(1, (clearing_check, "v1", None, (), (), False))
    assert fc(1) == "v1" and len(fc) == 0 and fc.hits == 1
    fc.store(2, (raising_check, "v2", None, (), (), False))
    with pytest.raises(RuntimeError, match="loudly"):
        fc(2)
    fc.store(3, (lambda: False, "v3", None, (), (), False))
    assert fc(3) == "slow" and calls[-1] == ((3,), None, True)
    assert fc(4, k=1) == "slow" and calls[-1] == ((4,), {"k": 1}, False)
    fc.store((((4,), factory._KWD_MARK, ("k", 1))), (lambda: True, "v4k", None, (), (), False))
    assert fc(4, k=1) == "v4k" and fc(4, k=2) == "slow"


@needs_c
def test_fastcache_slow_path_api() -> None:
    from flydeps.builds import _fastcache  # type: ignore[attr-defined]

    fc = _fastcache.FastCache(2, False, lambda *a: None, _audit._GEN, object())
    e1, e2, e3 = ((lambda: True, f"v{i}", None, (), (), False) for i in range(3))
    fc.store("a", e1), fc.store("b", e2)
    assert [k for k, _ in fc.items()] == ["a", "b"] and fc.get("a") is e1 and fc.get("zz", 5) == 5
    assert fc.touch("a") and not fc.touch("zz")
    assert [k for k, _ in fc.items()] == ["b", "a"]
    fc.store("c", e3)  # evicts b
    assert [k for k, _ in fc.items()] == ["a", "c"] and len(fc) == 2
    assert not fc.replace("a", e2, e3) and fc.replace("a", e1, e2) and fc.get("a") is e2
    assert not fc.discard("a", e1) and fc.discard("a", e2) and fc.get("a") is None
    assert fc.discard("c") and len(fc) == 0 and fc.items() == []
    fc.add_hit(), fc.add_miss(), fc.add_miss()
    assert (fc.hits, fc.misses, fc.maxsize, fc.typed) == (1, 2, 2, False)
    fc.clear()
    assert (fc.hits, fc.misses) == (0, 0)
    with pytest.raises(TypeError, match="tuple"):
        fc.store("x", ("not", "an", "entry"))
    with pytest.raises(TypeError, match="cell"):
        fc.store("x", (lambda: True, 1, None, (1,), (1,), True))
    with pytest.raises(TypeError, match="equal length"):
        fc.store("x", (lambda: True, 1, None, (), (1,), True))
    with pytest.raises(TypeError, match="unhashable"):
        fc.store([], e1)
    with pytest.raises(AttributeError):
        fc.hits = 3  # counters change through add_hit/add_miss only (atomic under the GIL)
    assert _fastcache.FastCache(None, True, print, [0], None).maxsize is None
    assert _fastcache.FastCache(-5, True, print, [0], None).maxsize == 0


def test_collected_with_its_cycles(path: str) -> None:
    def build(n: int) -> Callable[[], int]:
        def kernel() -> int:
            return n

        return kernel

    f = _decorated(path, build)
    f(1)
    r = weakref.ref(f)
    del f
    gc.collect()
    assert r() is None


# ------------------------------------------------------------------------------- threads


def test_concurrent_callers_build_once(path: str) -> None:
    builds: list[int] = []
    gate = threading.Event()

    def slow(n: int, gate: threading.Event) -> object:  # the gate's state is an argument, not a read
        builds.append(n)
        gate.wait(5)
        return object()

    f = _decorated(path, slow)
    results: list[object] = []
    threads = [threading.Thread(target=lambda: results.append(f(7, gate))) for _ in range(8)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join(10)
    assert builds == [7] and len({id(r) for r in results}) == 1


def test_threads_hammering_hits_stores_and_clears(path: str) -> None:
    f = _decorated(path, lambda n: [n], maxsize=3)
    errors: list[BaseException] = []

    def worker(seed: int) -> None:
        try:
            for i in range(300):
                n = (seed * 7 + i) % 5
                assert f(n) == [n]
                if i % 97 == seed:
                    f.cache_clear()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        threads = [threading.Thread(target=worker, args=(s,)) for s in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        sys.setswitchinterval(old)
    assert not errors
    assert f.cache_info().currsize <= 3


# ---------------------------------------------------------------- guards through the C path

HELPERS = """
def helper(x):
    return x + 1
"""

FACTORY = """
from flydeps import cached_factory
from {pkg} import helpers

BLOCK = 4
REGISTRY = []

def make(n):
    def kernel(x):
        return helpers.helper(x) + n
    return kernel

def make_logged(n):
    REGISTRY.append(n)  # reads a small mutable global: guarded by a value check, never "fast"
    return lambda x: x + n + BLOCK

def make_closure(n):
    step = n
    def kernel(x):
        return x + step
    def rebind(v):
        nonlocal step
        step = v
    kernel.rebind = rebind
    return kernel
"""


@pytest.fixture
def kmod(pkg: Any) -> Any:
    pkg.write("helpers", HELPERS)
    pkg.write("kernels", FACTORY.format(pkg=pkg.name))
    return pkg.load("kernels")


def test_monkeypatched_helper_rebuilds(path: str, kmod: Any, pkg: Any) -> None:
    f = _decorated(path, kmod.make)
    k = f(1)
    assert f(1) is k and k(1) == 3
    if path == "c" and FAST_ON:
        assert f._link_state(1) == (True, True), "warm entry answers from the counters"
    helpers = sys.modules[f"{pkg.name}.helpers"]
    helpers.helper = lambda x: x * 100  # type: ignore[attr-defined]  # monkeypatching the module
    k2 = f(1)
    assert k2 is not k and k2(1) == 101
    assert f(1) is k2
    info = f.cache_info()
    assert (info.hits, info.misses) == (2, 2)


def test_code_swap_rebuilds(path: str, kmod: Any, pkg: Any) -> None:
    f = _decorated(path, kmod.make)
    k = f(1)
    assert f(1) is k
    sys.modules[f"{pkg.name}.helpers"].helper.__code__ = (lambda x: -x).__code__
    k2 = f(1)
    assert k2 is not k and k2(1) == 0


def test_closure_cell_rebinding_rebuilds(path: str, kmod: Any) -> None:
    f = _decorated(path, kmod.make_closure)
    k = f(5)
    assert f(5) is k and k(1) == 6
    k.rebind(50)  # the returned kernel's own cell: nothing but the cell check sees it
    k2 = f(5)
    assert k2 is not k and k2(1) == 6


@needs_fast
def test_unrelated_watched_writes_only_cost_a_check(kmod: Any, pkg: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLYDEPS_FASTCACHE", "1")
    f = _decorated("c", kmod.make)
    k = f(1)
    f(1)
    assert f._link_state(1) == (True, True)
    sys.modules[f"{pkg.name}.helpers"].UNRELATED = 1  # type: ignore[attr-defined]  # bumps the watch counter
    assert f(1) is k  # full check() passed: still the same build
    assert f._link_state(1) == (True, True)
    assert f.cache_info().misses == 1


@needs_fast
def test_mutable_globals_use_the_full_check(kmod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLYDEPS_FASTCACHE", "1")
    f = _decorated("c", kmod.make_logged)
    k = f(1)
    assert f(1) is k and f._link_state(1) == (False, False)
    kmod.REGISTRY.append("external write")
    assert f(1) is not k


@needs_fast
def test_a_pending_function_store_keeps_the_generation_unvalidated(kmod: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 8.4: the audit hook announces a store before CPython makes it. A check that
    passes meanwhile (old code still in place) must not let later hits skip the check."""
    monkeypatch.setenv("FLYDEPS_FASTCACHE", "1")
    f = _decorated("c", kmod.make)
    k = f(1)
    assert f(1) is k and f._link_state(1) == (True, True)
    swapped = (lambda n: ("swapped", n)).__code__
    with _audit._pending_lock:  # what the hook does first...
        _audit._PENDING[-1] = (kmod.make, "__code__", swapped)
    _audit._GEN[0] += 1  # ...then the generation; the store itself has not landed
    assert f(1) is k, "the store is not visible yet: the old build is still right"
    monkeypatch.setattr(_audit, "_EVENTS", frozenset())  # land it without a second event
    kmod.make.__code__ = swapped
    monkeypatch.undo()
    assert f(1) == ("swapped", 1), "the next call saw the landed store (no counter-only hit)"
    assert not _audit._PENDING.get(-1), "a check drops records whose store is visible"


@needs_c
def test_pending_argument_must_be_a_dict() -> None:
    from flydeps.builds import _fastcache  # type: ignore[attr-defined]

    with pytest.raises(TypeError, match="pending must be a dict"):
        _fastcache.FastCache(2, False, print, [0], None, [])


# ------------------------------------------------------------- the other suites, Python path


@needs_c
def test_factory_suites_pass_on_the_python_path() -> None:
    """The C path is the default where it is built: run the factory/guard suites once more
    on the Python path, in a subprocess (the env var is read at decoration time)."""
    env = dict(os.environ, FLYDEPS_FASTCACHE="0", PYTHONPATH=str(ROOT / "src"))
    suites = [str(ROOT / "tests" / "core" / name) for name in ("test_factory.py", "test_guard.py")]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *suites],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]


def test_fastcache_flag_matches_build() -> None:
    try:
        from flydeps.builds import _fastcache  # type: ignore[attr-defined]  # noqa: F401
    except ImportError:
        assert not factory.FASTCACHE
    else:
        assert factory.FASTCACHE
        if sys.version_info >= (3, 12) and _watch.BACKEND == "ext":
            assert _fastcache.WATCH_API == 1


@needs_c
def test_entry_with_a_bad_namespace_tuple_is_never_fast_and_never_errors() -> None:
    """An entry whose namespace tuple (index 7) holds a non-dict is served through check(),
    with no exception left set by the tag reader (3.10/3.11) or anything else."""
    fc = factory._fastcache.FastCache(None, False, lambda a, k, s: "slow", [0], object())
    fc.store(1, (lambda: True, "v", None, (), (), True, None, ({}, 1)))
    assert fc(1) == "v" and fc(1) == "v"
    if not factory._fastcache.WATCH_API:  # 3.12+: the watcher counter, not the tuple, decides
        assert fc._link_state(1) == (False, False)
