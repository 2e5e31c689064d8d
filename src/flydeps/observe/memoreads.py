"""Memoized readers a build consults: ``functools.lru_cache``/``cache`` wrappers, keyed by their memo.

Contract
--------
A user function under ``functools.lru_cache`` or ``functools.cache`` that reads the
environment, a file or other state answers a hit with what an earlier call read, perhaps
long before the build and unobserved (a reader warmed at import). A build that gets such a
hit depends on the memo, not on reads :mod:`flydeps.observe.environ` could see; after the user's
``cache_clear()`` a fresh build computes from the state as it is then. So:

* :func:`track` (called by discovery for every C ``lru_cache`` wrapper it walks) registers a
  wrapper. From then on, each :func:`flydeps.observe.environ.recording` snapshots every tracked
  memo when it starts (its ``hits``/``misses`` counters and its generation, below) and, when
  it ends, notes each memo that moved meanwhile, i.e. that the build (or another thread
  meanwhile: more reads, never fewer) consulted, as the derived read
  ``=memo:<module>.<qualname>#<n>`` whose value is the memo's generation. A reader's
  computations inside the recording are ordinary reads of the build as well.
* The *generation* of a memo: a number that changes whenever an entry the memo held is gone
  or holds another object (``cache_clear()``, an eviction, a re-insert), never when entries
  are only added. The memo's entries are pinned (strong references) at each look, so
  "still there" is an identity test that cannot be fooled by a recycled address. An entry
  keyed by a generation holds exactly while every memo entry its build could have hit is
  still the one it hit: a build that added entries stays valid, a cleared memo is a miss.
  A memo whose entries changed while the build ran (cleared, evicted: an entry it used may
  be gone) is noted with a value no generation has: the build's product is never served.
* The look is one C call on the warm path while the memo's dict is unmodified (its PEP 509
  tag through :mod:`flydeps.watch.watchers` on CPython 3.10/3.11, the dict watchers' counter on
  3.12+); a moved tag re-pins the entries (one pass over the memo).
* Generations mean something in this process only: the family is *local*
  (:attr:`flydeps.observe.environ.EnvReads.local`), so a consumer persists nothing a memo keyed (a
  launcher's row: a new process's memo may hold what another state computed). In another
  process the name evaluates to a value no build read.

Not seen: readers discovery never walked (reached only through ``getattr`` with a computed
name, or from library code), the pure-Python ``lru_cache`` (no C type: its memo is a closure
cell discovery sees as data), and memo values mutated in place after they were cached
(see docs/guarantees.md). Calls no user code: counters through the C type's own
``cache_info``, the memo dict through ``gc.get_referents``.
"""

from __future__ import annotations

import functools
import gc
import itertools
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field

from ..values.containers import stable
from ..values.objects import instance_dict
from ..watch import watchers as _watch
from . import environ as _environ

__all__ = ["LRU_WRAPPER", "PREFIX", "generation", "track", "tracked"]

PREFIX = "=memo:"
LRU_WRAPPER: type = type(functools.lru_cache(maxsize=None)(lambda: None))
# The value of a memo read whose memo changed while its build ran: no generation is this.
_CHANGED = "\0the memo changed while the build ran"
_NOT_TRACKED = "\0not a memoized reader tracked in this process"
_serial = itertools.count(1)
_lock = threading.RLock()  # a weak reference callback (_forget) may run while a look holds it


@dataclass(eq=False)
class _Memo:
    """One tracked wrapper: its memo dict and what the last look saw of it."""

    name: str
    wrapper: weakref.ref[object]
    cache: dict
    version: object = None  # the memo dict's tag (or watchers' counter) at the last look
    pinned: tuple = ()  # the memo's (key, value) pairs at the last look, kept alive
    generation: int = field(default_factory=lambda: next(_serial))
    token: str = ""  # the read's value: "generation N"
    read_version: Callable[[], object] = field(init=False)

    def __post_init__(self) -> None:
        self.read_version = _version_reader(self.cache)

    def counters(self) -> tuple[int, int] | None:
        wrapper = self.wrapper()
        if wrapper is None:
            return None
        info = LRU_WRAPPER.cache_info(wrapper)  # type: ignore[attr-defined]  # the C method: no user code
        return (info.hits, info.misses)

    def look(self) -> str:
        """The memo read's value now: its generation (see the module docstring)."""
        version = self.read_version()
        if version is not None and version == self.version:
            return self.token
        with _lock:
            items = stable(_pairs, self.cache)
            if not self.token or not _kept(self.pinned, items):
                self.generation = next(_serial)
                self.token = f"generation {self.generation}"
            self.pinned, self.version = items, version
            return self.token


def _pairs(cache: dict) -> tuple:
    return tuple(dict.items(cache))


def _kept(pinned: tuple, items: tuple) -> bool:
    """Every pinned entry is still in ``items``, the same key object with the same value
    object (the pins keep them alive: an equal ``id`` is the same object)."""
    if not pinned:
        return True
    now = {id(key): value for key, value in items}
    missing = object()
    return all(now.get(id(key), missing) is value for key, value in pinned)


def _version_reader(cache: dict) -> Callable[[], object]:
    """A reader of what moves when ``cache`` is modified: its PEP 509 tag (one C call, no
    Python frame), the dict watchers' counter, or nothing (every look re-reads the memo)."""
    if _watch.TAGS:
        return functools.partial(_watch.tags_max, (cache,))
    if _watch.AVAILABLE:
        _watch.watch_dict(cache)
        return _watched
    return _no_version


def _watched() -> object:
    return _watch.version() if _watch.AVAILABLE else None  # degraded later: no memo


def _no_version() -> None:
    return None


# name -> memo; id(wrapper) -> memo (identity re-checked through the weak reference)
_by_name: dict[str, _Memo] = {}
_by_id: dict[int, _Memo] = {}


def _cache_of(wrapper: object) -> dict | None:
    """The memo dict of a C ``lru_cache`` wrapper (what its ``tp_traverse`` visits first;
    its ``__dict__`` is the other dict)."""
    own = instance_dict(wrapper)
    for referent in gc.get_referents(wrapper):
        if type(referent) is dict and referent is not own:
            return referent
    return None


def track(wrapper: object) -> None:
    """Register a C ``lru_cache``/``cache`` wrapper (once; others are ignored): recordings
    note it when they consult it (module docstring)."""
    if type(wrapper) is not LRU_WRAPPER:
        return
    memo = _by_id.get(id(wrapper))
    if memo is not None and memo.wrapper() is wrapper:
        return
    cache = _cache_of(wrapper)
    if cache is None or LRU_WRAPPER.cache_info(wrapper).maxsize == 0:  # type: ignore[attr-defined]
        return  # maxsize=0 keeps nothing: every call computes (and is observed)
    own = instance_dict(wrapper) or {}
    module, qualname = dict.get(own, "__module__"), dict.get(own, "__qualname__")
    label = f"{module if type(module) is str else '?'}.{qualname if type(qualname) is str else '?'}"
    name = f"{PREFIX}{label}#{next(_serial)}"
    with _lock:
        memo = _Memo(name, weakref.ref(wrapper, functools.partial(_forget, id(wrapper), name)), cache)
        _by_id[id(wrapper)] = memo
        _by_name[name] = memo
    memo.look()


def _forget(key: int, name: str, _ref: object) -> None:
    """A tracked wrapper died: its memo (and the entries it pinned) go with it."""
    with _lock:
        memo = _by_name.pop(name, None)
        if memo is not None and _by_id.get(key) is memo:
            del _by_id[key]


def tracked() -> list[str]:
    """The names of the memo reads of the live tracked wrappers."""
    return [name for name, memo in list(_by_name.items()) if memo.wrapper() is not None]


def generation(name: str) -> str | None:
    """The value of the memo read ``name`` now (another process: a value no build read)."""
    memo = _by_name.get(name)
    return _NOT_TRACKED if memo is None else memo.look()


def _what(name: str) -> str:
    return f"the memo of {name[len(PREFIX) :].rpartition('#')[0]}()"


def _shown(value: str | None) -> str:
    if value == _CHANGED:
        return "changed while the build ran"
    return (value or "").lstrip("\0")


def _differ(old: str | None, new: str | None) -> str | None:
    if old == _CHANGED:
        return "it changed while the build ran (the build is never served)"
    return f"cleared, evicted or refilled since the build ({_shown(old)} -> {_shown(new)})"


class _Hook:
    """:class:`flydeps.observe.environ.MemoHook`: the memos a recording consulted."""

    def begin(self) -> object:
        return [(memo, memo.counters(), memo.look()) for memo in list(_by_name.values())]

    def end(self, begun: object, note: Callable[[str, str | None], None]) -> None:
        for memo, counters, before in begun:  # type: ignore[attr-defined]
            after = memo.counters()
            if after is None:  # the wrapper died: no later build can consult it (its graph moved)
                continue
            now = memo.look()
            if now != before:
                note(memo.name, _CHANGED)
            elif after != counters:
                note(memo.name, now)


_environ.derive_family(PREFIX, generation, _what, _shown, _differ, fixed=False, local=True)
_environ._memo_hook[:] = [_Hook()]
