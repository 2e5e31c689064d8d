"""``cached_factory``: a drop-in ``functools.lru_cache`` that never returns stale builds.

Contract: same call forms, ``cache_info()``, ``cache_clear()``, ``cache_parameters()``,
``__wrapped__`` and ``TypeError`` for unhashable arguments as ``functools.lru_cache``.
Each entry keeps the fingerprint of the factory and of the value it returned (for a
compile factory: the launcher and the kernels and helpers it reaches). Builds follow the
protocol of :mod:`flydeps.builds.protocol`: the factory's dependencies are fingerprinted *before*
the build runs and compared after it; an entry is kept only if nothing it read changed
meanwhile except the build's own writes (a registry it appends to), else the result goes
to the caller that started the build and the next call rebuilds. Environment variables
the build read (:mod:`flydeps.observe.environ`) are re-checked on every hit of that entry. A hit
costs the key lookup plus the entry's :meth:`Guard.check`. When the guard fails, the
fingerprint is recomputed and :mod:`flydeps.builds.drift` decides: nothing that matters changed
(a reload that only touched comments) or only data written by flydeps-managed builds (of
any consumer in the process) -> the entry is re-baselined and returned; code changed ->
the entry is dropped and rebuilt, and the reason is logged on the ``flydeps`` logger; a
data value changed by someone else -> ``on_drift`` decides (``rebuild``, ``raise``
GlobalDriftError, ``warn`` and keep). Concurrent callers of one key build it once; if that
build raises, every caller waiting for it gets the same exception; no lock is held while
the user's function runs. One build per (key, dependency state): a caller about to build
that finds an entry stored meanwhile (by the build it waited for, or by another thread
while it judged an older entry) checks it, and revalidates it when its guard fails, before
building: a patch that leaves the fingerprint's digest as it was (a helper rebound to an
identical one) costs a revalidation, never a second build.

Hit path. Where the optional C extension ``flydeps.builds._fastcache`` was built (CPython >= 3.10)
the decorated factory *is* a ``FastCache`` object: its ``__call__`` computes lru_cache's
key (``_plain_key``/``_typed_key``, kwargs included), finds the entry and, when the
entry's guard is "fast" (every namespace watched by ``flydeps.watch._watchext`` on CPython >=
3.12, no mutable-value checks, audit hook on), answers from two counters and the closure
cells without running any Python code; otherwise it calls the guard's generated
``check()``. Everything else (misses, failed guards, counting them) goes to
:meth:`_FactoryCache._slow`, the same code for both paths.
Without the extension, or with ``FLYDEPS_FASTCACHE=0`` in the environment when the factory
is decorated, a Python closure does the same with an ``OrderedDict`` (``_PyEntries``).
Both paths give identical ``cache_info()`` numbers, LRU order and errors. The contract
between the two halves is at the top of ``src/flydeps/builds/_fastcache.c``.
"""

from __future__ import annotations

import functools
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, TypeVar, overload

from .. import settings
from ..keys.fingerprint import Fingerprint, fingerprint_roots
from ..observe import environ as _environ
from ..observe.environ import EMPTY, EnvReads
from ..watch import audit as _audit
from . import logswitch as _logswitch
from . import protocol as build
from .drift import DriftPolicy, check_policy, decide

__all__ = ["FASTCACHE", "CacheInfo", "CachedFactory", "cached_factory"]

try:
    from . import _fastcache  # type: ignore[attr-defined]
except ImportError:  # not built (no compiler, another implementation): the Python path
    _fastcache = None

#: True when the C hit path can be used (``FLYDEPS_FASTCACHE=0`` still disables it).
FASTCACHE: bool = _fastcache is not None

log = logging.getLogger("flydeps")
F = TypeVar("F", bound=Callable[..., Any])
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)
_KWD_MARK = object()


class _Entry(tuple):
    """``(check, value, fingerprint, cells, expected, fast, env, nsdicts)``: a tuple so both
    hit paths read it by index; ``cells, expected, fast, nsdicts`` are the guard's
    :meth:`~flydeps.keys.guard.Guard.fast_parts`, ``env`` the environment reads of the build.
    An entry whose build read the environment re-checks those reads on every hit (its
    ``check`` does, and it is never fast)."""

    __slots__ = ()

    def __new__(cls, value: object, fp: Fingerprint, env: EnvReads = EMPTY) -> "_Entry":
        guard = fp.guard()
        cells, expected, fast, nsdicts = guard.fast_parts()
        check = _env_check(guard.check, env) if env else guard.check
        return tuple.__new__(cls, (check, value, fp, cells, expected, fast and not env, env, nsdicts))

    @property
    def value(self) -> object:
        return self[1]

    @property
    def fingerprint(self) -> Fingerprint:
        return self[2]

    @property
    def env(self) -> EnvReads:
        return self[6]


def _env_check(guard_check: Callable[[], bool], env: EnvReads) -> Callable[[], bool]:
    holds = env.holds

    def check() -> bool:
        if guard_check() and holds():
            _environ.note(env)  # a hit inside another build depends on these reads too
            return True
        return False

    return check


_FAST_TYPES = frozenset({int, str})


def _plain_key(args: tuple, kwds: dict) -> object:
    """lru_cache's untyped key: a lone ``int``/``str`` argument is its own key (so f(1),
    f(1.0) and f(True) stay three entries, exactly as with ``functools.lru_cache``)."""
    if kwds:
        return (args, _KWD_MARK, *kwds.items())
    return args[0] if len(args) == 1 and type(args[0]) in _FAST_TYPES else args


def _typed_key(args: tuple, kwds: dict) -> object:
    key = (args, tuple(type(v) for v in args))
    return key if not kwds else (*key, _KWD_MARK, *kwds.items(), *(type(v) for v in kwds.values()))


def _reason(message: str, *args: object) -> None:
    """Log why a build was redone at INFO on ``flydeps`` (on stderr under ``FLYDEPS_LOG=rebuilds``)."""
    _logswitch.reasons_to_stderr(log)
    log.info(message, *args)


def _use_fastcache() -> bool:
    return FASTCACHE and settings.flag("FLYDEPS_FASTCACHE", True)


class _PyEntries:
    """The Python twin of ``_fastcache.FastCache``'s slow-path API (see ``builds/_fastcache.c``):
    key -> :class:`_Entry` in LRU order (oldest first), plus the hit/miss counters.
    Methods are called with ``_FactoryCache.lock`` held or are single dict operations."""

    __slots__ = ("data", "maxsize", "stats")

    def __init__(self, maxsize: int | None) -> None:
        self.data: dict[object, _Entry] = OrderedDict() if maxsize is not None else {}
        self.maxsize = maxsize
        self.stats = [0, 0]  # hits, misses: a list cell the Python hit path increments

    @property
    def hits(self) -> int:
        return self.stats[0]

    @property
    def misses(self) -> int:
        return self.stats[1]

    def __len__(self) -> int:
        return len(self.data)

    def get(self, key: object, default: _Entry | None = None) -> _Entry | None:
        return self.data.get(key, default)

    def touch(self, key: object) -> bool:
        if key not in self.data:
            return False
        if self.maxsize is not None:
            self.data.move_to_end(key)  # type: ignore[attr-defined]
        return True

    def store(self, key: object, entry: _Entry) -> None:
        self.data[key] = entry
        if self.maxsize is not None:
            self.data.move_to_end(key)  # type: ignore[attr-defined]
            while len(self.data) > self.maxsize:
                self.data.popitem(last=False)  # type: ignore[call-arg]

    def replace(self, key: object, old: _Entry, new: _Entry) -> bool:
        if self.data.get(key) is not old:
            return False
        self.data[key] = new
        return True

    def discard(self, key: object, entry: _Entry | None = None) -> bool:
        current = self.data.get(key)
        if current is None or (entry is not None and current is not entry):
            return False
        del self.data[key]
        return True

    def items(self) -> list[tuple[object, _Entry]]:
        return list(self.data.items())

    def clear(self) -> None:
        self.data.clear()
        self.stats[:] = [0, 0]

    def add_hit(self) -> None:
        self.stats[0] += 1

    def add_miss(self) -> None:
        self.stats[1] += 1


class CacheInfo(NamedTuple):
    """``cache_info()``, as ``functools.lru_cache`` reports it (the same named tuple)."""

    hits: int
    misses: int
    maxsize: int | None
    currsize: int


class CachedFactory(Protocol[R_co]):
    """What ``@cached_factory`` makes, typed as ``functools.lru_cache``'s wrapper is: a
    callable returning the factory's result, with the lru_cache methods."""

    @property
    def __wrapped__(self) -> Callable[..., R_co]: ...

    def __call__(self, *args: Any, **kwargs: Any) -> R_co: ...
    def cache_info(self) -> CacheInfo: ...
    def cache_clear(self) -> None: ...
    def cache_parameters(self) -> dict[str, Any]: ...


@overload
def cached_factory(maxsize: Callable[..., R], typed: bool = False) -> CachedFactory[R]: ...
@overload
def cached_factory(
    maxsize: int | None = 128, typed: bool = False, *, on_drift: DriftPolicy = "rebuild"
) -> Callable[[Callable[..., R]], CachedFactory[R]]: ...


def cached_factory(maxsize: Any = 128, typed: bool = False, *, on_drift: DriftPolicy = "rebuild") -> Any:
    """Memoize a factory like ``functools.lru_cache``, rebuilding entries whose code changed.

    ``@cached_factory``, ``@cached_factory()``, ``@cached_factory(maxsize=None, typed=True)``
    all work as with ``lru_cache``. ``on_drift`` chooses what happens when only a
    data-valued global read by the build changed: ``"rebuild"`` (default), ``"raise"``
    (:class:`~flydeps.errors.GlobalDriftError`) or ``"warn"`` (log and keep the entry).
    """
    on_drift = check_policy(on_drift, "cached_factory")
    if isinstance(maxsize, int) and not isinstance(maxsize, bool):
        maxsize = max(maxsize, 0)
    elif callable(maxsize) and isinstance(typed, bool):
        user_function, maxsize = maxsize, 128
        return _FactoryCache(user_function, maxsize, typed, on_drift).wrapper
    elif maxsize is not None:
        raise TypeError("Expected first argument to be an integer, a callable, or None")

    def decorating_function(user_function: F) -> F:
        return _FactoryCache(user_function, maxsize, typed, on_drift).wrapper  # type: ignore[return-value]

    return decorating_function


class _FactoryCache:
    """State of one decorated factory; ``wrapper`` is the object users call: the C
    ``FastCache`` (which is also ``entries``) or a Python closure over ``_PyEntries``."""

    def __init__(self, func: Callable[..., Any], maxsize: int | None, typed: bool, on_drift: DriftPolicy) -> None:
        self.func, self.maxsize, self.typed, self.on_drift = func, maxsize, typed, on_drift
        self.name = getattr(func, "__qualname__", repr(func))
        self.root_id = f"{getattr(func, '__module__', '?')}:{self.name}"
        self.make_key = _typed_key if typed else _plain_key
        self.baseline = build.RootsBaseline(((func, None, self.root_id),))  # what a build reads first
        self.lock = threading.RLock()
        self.pending: dict[object, _Pending] = {}
        wrapper: Any
        if _use_fastcache():
            wrapper = self.entries = _fastcache.FastCache(
                maxsize, typed, self._slow, _audit._GEN, _KWD_MARK, _audit._PENDING
            )
        else:
            self.entries = _PyEntries(maxsize)
            wrapper = self._make_wrapper(self.entries)
        functools.update_wrapper(wrapper, func)
        wrapper.cache_info = self.cache_info
        wrapper.cache_clear = self.cache_clear
        wrapper.cache_parameters = self.cache_parameters
        self.wrapper = wrapper
        self.predecessor = _succeed(self)

    def _make_wrapper(self, entries: _PyEntries) -> Callable[..., Any]:
        # The Python hit path (no C extension, or FLYDEPS_FASTCACHE=0): the entry is read by
        # index and the counters live in a list cell. lru_cache's own hit costs ~70 ns, so
        # every avoided attribute lookup counts (benchmarks/bench_factory.py).
        make_key, slow, func = self.make_key, self._slow, self.func
        cache_get, stats = entries.data.get, entries.stats

        if self.maxsize == 0:

            def wrapper(*args: Any, **kwds: Any) -> Any:
                stats[1] += 1
                return func(*args, **kwds)

        elif self.maxsize is None:

            def wrapper(*args: Any, **kwds: Any) -> Any:
                entry = cache_get(make_key(args, kwds))
                if entry is not None and entry[0]():
                    stats[0] += 1
                    return entry[1]
                return slow(args, kwds, entry)

        else:
            move_to_end = entries.data.move_to_end  # type: ignore[attr-defined]

            def wrapper(*args: Any, **kwds: Any) -> Any:
                key = make_key(args, kwds)
                entry = cache_get(key)
                if entry is not None and entry[0]():
                    stats[0] += 1
                    try:
                        move_to_end(key)
                    except KeyError:  # another thread cleared or evicted it meanwhile
                        pass
                    return entry[1]
                return slow(args, kwds, entry)

        return wrapper

    # -- lru_cache API ---------------------------------------------------------------
    def cache_info(self) -> functools._CacheInfo:  # type: ignore[name-defined]
        entries = self.entries
        return functools._CacheInfo(entries.hits, entries.misses, self.maxsize, len(entries))  # type: ignore[attr-defined]

    def cache_clear(self) -> None:
        with self.lock:
            self.entries.clear()  # entries and counters

    def cache_parameters(self) -> dict[str, Any]:
        return {"maxsize": self.maxsize, "typed": self.typed}

    # -- slow path -------------------------------------------------------------------
    def _slow(self, args: tuple, kwds: dict | None, stale: _Entry | None) -> Any:
        """Everything the hit paths do not answer: misses, and ``stale`` entries whose
        ``check()`` failed (revalidated, else rebuilt)."""
        kwds = kwds or {}
        if self.maxsize == 0:
            self.entries.add_miss()
            return self.func(*args, **kwds)
        return self._build(self.make_key(args, kwds), args, kwds, stale)

    def _build(self, key: object, args: tuple, kwds: dict, entry: _Entry | None) -> Any:
        """The value of the entry that answers ``key`` now, else a build of it (one per key
        at a time; other callers wait for it and then look again).

        Every entry found is checked, and when its guard fails, revalidated (:mod:`.drift`)
        before anything is built, including one another thread stored while this one judged
        an older entry or waited: its guard may fail on a change that leaves the dependency
        state as it was (a helper rebound to an identical one), and building then would build
        the same state twice (issue 36.8)."""
        me = threading.get_ident()
        checked = entry is not None  # ``stale``: its check() failed on the hit path just now
        if entry is None:
            entry = self.entries.get(key)
        while True:
            if entry is not None and ((not checked and entry[0]()) or self._revalidate(key, entry)):
                self.entries.add_hit()
                self.entries.touch(key)
                return entry.value
            checked = False
            with self.lock:
                current = self.entries.get(key)
                if current is not None and current is not entry:  # stored or re-baselined meanwhile
                    entry = current
                    continue
                waiting = self.pending.get(key)
                if waiting is None or waiting.owner == me:  # nobody building, or a recursive call
                    self.entries.add_miss()
                    mine = self.pending[key] = _Pending(me)
                    break
            waiting.done.wait()
            if waiting.error is not None:  # the build this caller waited for failed: so does it
                raise waiting.error
            entry = self.entries.get(key)
        return self._build_claimed(key, args, kwds, mine)

    def _revalidate(self, key: object, entry: _Entry) -> bool:
        """The guard failed: keep the entry if nothing that matters changed (:mod:`.drift`)."""
        if entry.env and not entry.env.holds():
            changed = ", ".join(
                f"{_environ.label(name)}: {_environ.shown(name, old)} -> {_environ.shown(name, new)}"
                for name, old, new in entry.env.changes()
            )
            _reason("rebuilt %s: environment variables or files it read changed (%s)", self.name, changed)
            with self.lock:
                self.entries.discard(key, entry)
            return False
        fresh = build.stable(entry.fingerprint.refresh)
        judgement = build.judge(entry.fingerprint, fresh)
        if decide(judgement, self.on_drift, self.name):
            replacement = _Entry(entry.value, fresh, entry.env)
            with self.lock:
                self.entries.replace(key, entry, replacement)
            return True
        _reason("rebuilt %s: %s", self.name, judgement.reasons())
        with self.lock:
            self.entries.discard(key, entry)
        return False

    def _build_claimed(self, key: object, args: tuple, kwds: dict, mine: _Pending) -> Any:
        """Run the build ``mine`` claims (no lock held while the user's function runs), then
        wake the callers waiting for it; they get its exception if it raised."""
        try:
            return self._run(key, args, kwds)
        except Exception as exc:  # not KeyboardInterrupt & co: those concern this thread only
            mine.error = exc
            raise
        finally:
            with self.lock:
                if self.pending.get(key) is mine:
                    del self.pending[key]
            mine.done.set()

    def _run(self, key: object, args: tuple, kwds: dict) -> Any:
        """One build under the protocol of :mod:`flydeps.builds.protocol`: the entry is kept only when
        nothing the build read changed while it ran, except its own writes."""
        start = self.baseline.begin()
        try:
            with _environ.recording() as env:
                value = self.func(*args, **kwds)
        finally:  # a build that failed after writing a memo or registry wrote it all the same
            build.finish(start)
        fp = build.stable(fingerprint_roots, ((self.func, None, self.root_id), (value, None, f"{self.root_id}#return")))
        judgement = build.settle(start)  # after fp: nothing can slip between verdict and baseline
        previous = self.predecessor.pop(key, None) if self.predecessor else None
        if previous is not None:  # built by the factory this one replaced (a reload): say what changed
            reasons = fp.explain(previous)
            causes = [r for r in reasons if f"{self.root_id}#return" not in r] or reasons  # not its result
            shown = "; ".join(causes) if causes else "nothing it depends on changed"
            _reason("rebuilt %s after a reload of its module: %s", self.name, shown)
        if judgement.verdict is build.Verdict.SAME or judgement.verdict is build.Verdict.ADOPT:
            entry = _Entry(value, fp, env.reads())
            with self.lock:
                self.entries.store(key, entry)  # most recently used; evicts beyond maxsize
        else:
            _reason(
                "%s: not kept, what it read changed while it ran (%s); the next call rebuilds",
                self.name,
                judgement.reasons(),
            )
        return value


# The factory alive under each qualified name (``module:qualname``): a factory created under
# a name that already has one (``importlib.reload``, a notebook cell run again) takes over
# what its predecessor built, as fingerprints without live objects, to explain its builds.
_LIVE: weakref.WeakValueDictionary[str, _FactoryCache] = weakref.WeakValueDictionary()
_LIVE_LOCK = threading.Lock()


def _succeed(cache: _FactoryCache) -> dict[object, Fingerprint]:
    """Register ``cache`` under its name; what the factory it replaces built, by key (the
    graphs and digests only: nothing of the old module is kept alive)."""
    if "<locals>" in cache.root_id:  # made by each call of its enclosing function: not a reload
        return {}
    with _LIVE_LOCK:
        old = _LIVE.get(cache.root_id)
        _LIVE[cache.root_id] = cache
    if old is None:
        return {}
    with old.lock:
        items = old.entries.items()
    return {key: entry.fingerprint.detached() for key, entry in items}


class _Pending:
    """A build in progress: its thread, an event set when it ends, and its failure if any."""

    __slots__ = ("done", "error", "owner")

    def __init__(self, owner: int) -> None:
        self.owner = owner
        self.done = threading.Event()
        self.error: BaseException | None = None
