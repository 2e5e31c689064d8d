"""Environment reads made during a build: recorded while it runs, re-checked cheaply after.

Contract
--------
``with recording() as rec: build()`` records every read of ``os.environ`` (and
``os.environb``) that the *current thread* makes while the block runs, whoever makes it: the
build's own code, a helper that did ``from os import environ`` long before, ``os.getenv``,
``environ.get(...)``, ``environ[...]``, ``name in environ``, and listing (``for k in environ``,
``dict(environ)``, ``.items()``, ``.copy()``). ``rec.reads()`` returns a frozen
:class:`EnvReads`: each variable with the value as first read (``None`` when it was absent)
and, when the build listed the environment, the set of names it saw.

* :meth:`EnvReads.holds` answers "would the build read the same values now?" with one
  C-level read per variable of the live ``os.environ`` storage and an equality check of
  the raw values (no copy of the environment); a build that listed the environment also
  compares the set of names. :meth:`EnvReads.changes` lists ``(name, old, new)`` for logs.
* Mechanism: while at least one recording is active anywhere in the process, the class of
  the one ``os.environ`` object is swapped for a subclass whose ``__getitem__`` /
  ``__iter__`` note the read and then do exactly what ``os._Environ`` does. The storage is
  never replaced, so a write made during a build (by it or by another thread) lands where
  every reader, including code that cached ``os.environ._data``, sees it. Reads made by
  other threads are not attributed to the build. The class is restored when the last
  recording ends (in ``finally``); recordings nest, and a read is noted by every active
  recording of the thread (an inner build's read is also a read of the outer build).
* :func:`paused` stops attributing the thread's reads while a block runs, for lookups
  whose *result* the consumer keys itself (the launcher keys FlyDSL's resolved target, so
  the selector variables FlyDSL reads to resolve it are not reads of the trace).
* :func:`note` adds a finished build's reads to the active recordings of the thread: a
  consumer that serves a cached result from inside another build (a ``cached_factory`` hit
  inside a trace) calls it so the outer build depends on what the inner one read.
* :func:`derive` registers a *derived read*: a value computed from the environment (and
  from what stays fixed for the process), which a build depends on by its result, not by
  the variables its computation happens to read. FlyDSL's ``get_rocm_arch()`` reads
  ``FLYDSL_GPU_ARCH``, ``HSA_OVERRIDE_GFX_VERSION``, or runs ``rocm_agent_enumerator``
  found through ``PATH``: keyed by those, a build would hold only where ``PATH`` is the same.
  Its name starts with ``=``, which no environment variable's can; :meth:`EnvReads.holds`
  and :func:`current` compute it again (memoized on :func:`version`). :func:`derive_family`
  registers a family of them whose names carry an argument (a device's properties by its
  index), so a process evaluates any member by name. A read registered with
  ``fixed=False`` is process state a library keeps (torch's default dtype:
  :mod:`flydsl_runtime.trace.statequery`), computed again on every re-check; a family registered
  ``local=True`` has values that mean something in this process only (a memo's generation:
  :mod:`flydeps.observe.memoreads`), and :attr:`EnvReads.local` tells consumers not to persist
  what such reads key. :func:`note_derived` notes a registered read with a value the caller
  computed (a wrapper that returns the library's answer and notes its description);
  :data:`RECORDING` is empty exactly while no thread records (a wrapper's first test).
* Memoized readers: while :mod:`flydeps.observe.memoreads` is imported (discovery imports it),
  each recording also notes the ``lru_cache`` memos discovery tracked that moved while it
  ran (:class:`MemoHook`).

* Writes: while a recording runs anywhere, writes through ``os.environ`` are noted with
  their thread (:func:`write_mark`, :func:`written_by_others`): a variable a build read that
  another thread wrote while it ran (and may have put back: A-B-A) is named after it.

:func:`version` is the environment's modification counter for memos on hot paths: two
equal answers (never ``None``) mean ``os.environ`` was not modified in between. It is the
PEP 509 tag of ``os.environ``'s storage dict on CPython 3.10/3.11 and the dict watchers'
counter on 3.12+ (both through :mod:`flydeps.watch.watchers`; spurious moves are allowed, missed
ones are not); ``None`` where neither exists (callers then re-read every time).

* Files and directory listings the thread reads during a recording are derived reads too,
  ``=file:PATH`` and ``=listdir:PATH``, noted by the audit hook of :mod:`flydeps.observe.filereads`
  (installed by the first recording) and evaluated by it, and so are its metadata reads
  (``os.stat``/``os.lstat`` and the ``os.path``/``pathlib`` predicates on them),
  ``=stat:VIEW:PATH``, seen through an ``os.stat`` put in the ``os`` module only while some
  thread records; :func:`label` and :func:`shown` name them in messages.

Not seen: reads that bypass ``os.environ`` (``os.environ._data`` directly, C code calling
``getenv(3)``, a subprocess). This module imports nothing outside the standard library but
:mod:`flydeps.store.codegen` (its generated checks are compiled once per interpreter build), and
:mod:`flydeps.observe.filereads` once something records or checks a file read.
"""

from __future__ import annotations

import functools
import itertools
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from .. import settings
from ..store import codegen as _codegen

__all__ = [
    "DERIVED",
    "EMPTY",
    "EnvReads",
    "RECORDING",
    "Recorder",
    "change",
    "current",
    "derive",
    "derive_family",
    "label",
    "note",
    "note_derived",
    "paused",
    "recording",
    "recording_in_thread",
    "shown",
    "version",
    "write_mark",
    "written_by_others",
    "while_recording",
]

_Environ = type(os.environ)
_ORIGINAL_CLASS = _Environ
_ENVIRONS = [os.environ] + ([os.environb] if os.supports_bytes_environ else [])
_DATA = getattr(os.environ, "_data", None)
# POSIX keys ``_data`` by the OS-encoded bytes of each name; elsewhere (Windows) by an
# upper-cased str. ``encodekey`` is os.environ's own key encoder on every platform.
_encodekey = getattr(os.environ, "encodekey", None)


def _raw_key(name: str) -> object:
    return _encodekey(name) if _encodekey is not None else name


@dataclass(frozen=True)
class EnvReads:
    """What one build read of the environment: ``(name, value or None)`` in first-read order,
    plus the names it saw when it listed the environment (``None`` when it never did)."""

    values: tuple[tuple[str, str | None], ...] = ()
    listed: frozenset[str] | None = None

    def __post_init__(self) -> None:
        for item in self.values:
            if not (
                type(item) is tuple and len(item) == 2 and type(item[0]) is str and type(item[1]) in (str, type(None))
            ):
                raise TypeError(
                    f"EnvReads(values=...) takes (name: str, value: str | None) pairs, got {item!r}; "
                    "build it with flydeps.observe.environ.recording() rather than by hand"
                )
        if self.listed is not None and not (
            type(self.listed) is frozenset and all(type(n) is str for n in self.listed)
        ):
            raise TypeError(f"EnvReads(listed=...) takes a frozenset of names or None, got {self.listed!r}")
        plain = [(n, v) for n, v in self.values if not n.startswith(DERIVED)]
        keys = tuple(_raw_key(name) for name, _v in plain)
        raws = tuple(None if v is None else _raw_key_value(v) for _n, v in plain)
        derived = tuple((_evaluator(n), v) for n, v in self.values if n.startswith(DERIVED))
        listed = None if self.listed is None else frozenset(_raw_key(n) for n in self.listed)
        object.__setattr__(self, "_listed_raw", listed)
        object.__setattr__(
            self, "holds", _compile_holds(keys, raws, listed, derived) if type(_DATA) is dict else self._holds_slow
        )

    def __bool__(self) -> bool:
        return bool(self.values) or self.listed is not None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _v in self.values)

    @property
    def local(self) -> bool:
        """True when a read's value means something in this process only (a memoized
        reader's generation, :mod:`flydeps.observe.memoreads`): what these reads key must not be
        persisted, another process could evaluate the same value for another state."""
        return bool(self.local_names)

    @property
    def local_names(self) -> tuple[str, ...]:
        """The reads that make :attr:`local` true, in first-read order."""
        prefixes = tuple(_local_prefixes)
        return tuple(name for name, _v in self.values if name.startswith(prefixes)) if prefixes else ()

    def holds(self) -> bool:  # replaced per instance by a generated function (see _compile_holds)
        """True when every variable still has the value the build read (and, if it listed
        the environment, the same names exist). Reads the live storage; copies nothing."""
        return self._holds_slow()

    def _holds_slow(self) -> bool:
        if any(current(name) != value for name, value in self.values):
            return False
        return self.listed is None or set(os.environ) == self.listed

    def changes(self) -> list[tuple[str, str | None, str | None]]:
        """``(name, value the build read, value now)`` for every read that no longer holds;
        a listing that no longer holds reports each added or removed name."""
        out = [(n, v, read_now) for n, v in self.values if (read_now := current(n)) != v]
        if self.listed is not None:
            now = set(os.environ)
            out += [(n, None, os.environ.get(n)) for n in sorted(now - self.listed)]
            out += [(n, "<listed>", None) for n in sorted(self.listed - now)]
        return out

    def merged(self, other: EnvReads) -> EnvReads:
        """Both builds' reads; a name read by both keeps the value ``self`` read first."""
        seen = dict(self.values)
        extra = tuple((n, v) for n, v in other.values if n not in seen)
        listed = self.listed if other.listed is None else (self.listed or frozenset()) | other.listed
        return EnvReads(self.values + extra, listed)


def _always() -> bool:
    return True


def _compile_holds(keys: tuple, raws: tuple, listed: frozenset | None, derived: tuple = ()) -> Callable[[], bool]:
    """``holds`` for one set of reads, unrolled: one dict ``get`` and one ``==`` per variable
    (bytes compare by identity first), one call per derived read (memoized on
    :func:`version`), plus one keys-view comparison for a listing."""
    ns: dict[str, object] = {"_get": _DATA.get, "_keys": _DATA.keys, "_listed": listed}  # type: ignore[union-attr]
    terms = []
    for i, (key, raw) in enumerate(zip(keys, raws)):
        ns[f"k{i}"], ns[f"v{i}"] = key, raw
        terms.append(f"_get(k{i}) is None" if raw is None else f"_get(k{i}) == v{i}")
    for i, (evaluate, value) in enumerate(derived):
        ns[f"d{i}"], ns[f"w{i}"] = evaluate, value
        terms.append(f"d{i}() == w{i}")
    if listed is not None:
        terms.append("_keys() == _listed")
    if not terms:  # no reads (EMPTY, made at import): nothing to generate
        return _always
    src = f"def holds():\n    return {' and '.join(terms)}\n"
    exec(_codegen.code(src, "<flydeps-env-reads>"), ns)
    return ns["holds"]  # type: ignore[return-value]


def _raw_key_value(value: str) -> object:
    encodevalue = getattr(os.environ, "encodevalue", None)
    return encodevalue(value) if encodevalue is not None else value


EMPTY = EnvReads()


class Recorder:
    """The reads of one recording; filled by the current thread, read with :meth:`reads`."""

    __slots__ = ("_values", "_listed", "_made")

    def __init__(self) -> None:
        self._values: dict[str, str | None] = {}
        self._listed: set[str] | None = None
        # Absolute paths of the files and directories this build created or truncated
        # (flydeps.observe.filereads): reading them back is reading its own output, not an input.
        self._made: set[str] = set()

    def _note(self, name: str, value: str | None) -> None:
        self._values.setdefault(name, value)

    def _note_listing(self, names: list[str]) -> None:
        self._listed = set(names) if self._listed is None else self._listed | set(names)

    def _note_reads(self, reads: EnvReads) -> None:
        for name, value in reads.values:
            self._values.setdefault(name, value)
        if reads.listed is not None:
            self._note_listing(list(reads.listed))

    def reads(self) -> EnvReads:
        listed = None if self._listed is None else frozenset(self._listed)
        return EnvReads(tuple(self._values.items()), listed) if self._values or listed is not None else EMPTY


# thread ident -> the active recorders of that thread, outermost first
_active: dict[int, list[Recorder]] = {}
# Empty exactly while no recording runs in any thread: a wrapper on a hot path that notes
# reads tests it before asking recording_in_thread() (one truth test, no call).
RECORDING: dict[int, list[Recorder]] = _active
# thread ident -> depth of paused() blocks: reads there are attributed to no recording
_paused: dict[int, int] = {}
_lock = threading.Lock()
_get_ident = threading.get_ident


def _as_name(key: object) -> str:
    return os.fsdecode(key) if isinstance(key, bytes) else str(key)


def _recorders() -> list[Recorder] | None:
    ident = _get_ident()
    return None if ident in _paused else _active.get(ident)


# name -> (sequence number, writer thread) of the last write through ``os.environ`` while
# a recording ran anywhere (the class is swapped only then): a consumer compares it after
# a build to find variables the build read that another thread wrote meanwhile (A-B-A).
_WRITES: dict[str, tuple[int, int]] = {}
_write_seq = itertools.count(1)


def _note_write(key: object) -> None:
    _WRITES[_as_name(key)] = (next(_write_seq), _get_ident())


def write_mark() -> int:
    """The sequence number the next write through ``os.environ`` during a recording exceeds."""
    return next(_write_seq)


def written_by_others(mark: int, names: Iterable[str]) -> tuple[str, ...]:
    """Of ``names``, those whose last write since :func:`write_mark` returned ``mark`` was
    made by another thread than the caller's, while a recording ran."""
    ident, writes = _get_ident(), _WRITES
    return tuple(n for n in names if (w := writes.get(n)) is not None and w[0] > mark and w[1] != ident)


class _RecordingEnviron(_Environ):  # type: ignore[misc,valid-type]
    """``os._Environ`` that notes the reads of threads that are recording."""

    def __getitem__(self, key):  # type: ignore[no-untyped-def]
        recorders = _recorders()
        try:
            value = _Environ.__getitem__(self, key)
        except KeyError:
            if recorders:
                for rec in recorders:
                    rec._note(_as_name(key), None)
            raise
        if recorders:
            name, text = _as_name(key), (os.fsdecode(value) if isinstance(value, bytes) else value)
            for rec in recorders:
                rec._note(name, text)
        return value

    def __setitem__(self, key, value):  # type: ignore[no-untyped-def]
        _Environ.__setitem__(self, key, value)
        _note_write(key)

    def __delitem__(self, key):  # type: ignore[no-untyped-def]
        _Environ.__delitem__(self, key)
        _note_write(key)

    def __iter__(self):  # type: ignore[no-untyped-def]
        keys = list(_Environ.__iter__(self))
        recorders = _recorders()
        if recorders:
            names = [_as_name(k) for k in keys]
            for rec in recorders:
                rec._note_listing(names)
        return iter(keys)


def _swap(cls: type) -> None:
    for environ in _ENVIRONS:
        environ.__class__ = cls


@contextmanager
def recording() -> Iterator[Recorder]:
    """Record the current thread's environment reads while the block runs, and the files and
    directory listings it reads (:mod:`flydeps.observe.filereads`, derived reads)."""
    if not _files_hooked:
        _hook_files()
    rec = Recorder()
    ident = _get_ident()
    memos = _memo_hook[0] if _memo_hook else None
    started = memos.begin() if memos is not None else None
    with _lock:
        if not _active:
            _swap(_RecordingEnviron)
            for switch in _switches:
                switch(True)
        _active.setdefault(ident, []).append(rec)
    try:
        yield rec
        if memos is not None:
            memos.end(started, rec._note)
    finally:
        with _lock:
            stack = _active[ident]
            stack.remove(rec)
            if not stack:
                del _active[ident]
            if not _active:
                _swap(_ORIGINAL_CLASS)
                for switch in _switches:
                    switch(False)


_files_hooked = False
# Called with True when the first recording of the process starts and False when the last
# ends (under _lock): flydeps.observe.filereads.observe_stats (os.stat observed only meanwhile).
_switches: list[Callable[[bool], None]] = []


class MemoHook(Protocol):
    """What :func:`recording` asks of :mod:`flydeps.observe.memoreads` (set there, once imported):
    ``begin()`` before the block, ``end(begun, note)`` after it, which notes the memoized
    readers the block consulted as derived reads."""

    def begin(self) -> object: ...

    def end(self, begun: object, note: Callable[[str, str | None], None]) -> None: ...


# [the memoized readers' hook] once flydeps.observe.memoreads is imported (discovery imports it).
_memo_hook: list[MemoHook] = []


def while_recording(switch: Callable[[bool], None]) -> None:
    """Have ``switch(True)`` called when the first recording of the process starts and
    ``switch(False)`` when the last one ends (under this module's lock; at once with True
    when a recording runs now): for an observer that wraps a function only while some
    thread records, so that nothing else in the process pays for it."""
    with _lock:
        if switch not in _switches:
            _switches.append(switch)
            if _active:
                switch(True)


class FileReads(Protocol):
    """What this module asks of :mod:`flydeps.observe.filereads`, which attaches itself with
    :func:`attach_files` when imported (the package :mod:`flydeps.observe` imports it, so it
    is attached before any module of the package is used): the file, listing and metadata
    reads of a build, as derived reads named ``=file:``, ``=listdir:``, ``=stat:``."""

    def install(self) -> bool: ...

    def observe_stats(self, on: bool) -> None: ...

    def evaluator(self, name: str) -> Callable[[], str | None]: ...

    def label(self, name: str) -> str: ...

    def shown(self, value: str | None) -> str: ...


_file_reads: list[FileReads] = []  # [the file observer] once attached


def attach_files(observer: FileReads) -> None:
    """Called once by :mod:`flydeps.observe.filereads` at its import."""
    _file_reads[:] = [observer]


def _files() -> FileReads:
    if not _file_reads:
        raise RuntimeError(
            "flydeps.observe.filereads is not attached: import flydeps.observe (not its environ module alone)"
        )
    return _file_reads[0]


def _hook_files() -> None:
    global _files_hooked
    files = _files()
    files.install()
    while_recording(files.observe_stats)
    _files_hooked = True


@contextmanager
def paused() -> Iterator[None]:
    """Attribute no read of this thread to any recording while the block runs: for a
    consumer that keys the *result* of a lookup itself (a resolved compile target) and
    would otherwise depend on the variables that lookup happens to read."""
    ident = _get_ident()
    _paused[ident] = _paused.get(ident, 0) + 1
    try:
        yield
    finally:
        depth = _paused.pop(ident) - 1
        if depth:
            _paused[ident] = depth


def recording_in_thread() -> bool:
    """True when a recording of this thread would note a read now (one is active, none paused)."""
    return bool(_recorders())


def note(reads: EnvReads) -> None:
    """Add ``reads`` (a finished build's) to every recording active in this thread."""
    if reads:
        for rec in _recorders() or ():
            rec._note_reads(reads)


# --- derived reads ---------------------------------------------------------------------

DERIVED = "="  # the first character of a derived read's name: no environment variable's can be
# A value no build read: what a derived read no consumer registered in this process reads as
# (an environment value cannot hold NUL), so a build that depends on one never holds here.
_UNREGISTERED = "\0derived read not registered in this process"
# name -> (evaluate: the value now, memoized on version() for a fixed read; what it is, for messages)
_derived: dict[str, tuple[Callable[[], str | None], str]] = {}


def derive(
    name: str,
    compute: Callable[[], str | None],
    what: str,
    *,
    fixed: bool = True,
) -> Callable[[], str | None]:
    """Register the derived read ``name`` (``"=..."``), computed by ``compute`` and described
    by ``what`` in messages; return ``read()``: ``compute()``'s value, noted as a read of
    ``name`` by the recordings of the thread, while none of the variables ``compute`` reads
    are (it runs :func:`paused`).
    ``fixed``: ``compute`` depends on nothing but the environment and what stays fixed for
    the process, so re-checks (:meth:`EnvReads.holds`, :func:`current`) remember its value
    until :func:`version` moves; with ``fixed=False`` (process state a library keeps: a
    default dtype, a determinism switch) every re-check computes it again, and ``compute``
    must read no environment variable a recording would note."""
    if not name.startswith(DERIVED) or len(name) < 2:
        raise ValueError(f"a derived read's name starts with {DERIVED!r} (no variable's can), got {name!r}")

    def read() -> str | None:
        with paused():
            value = compute()
        for rec in _recorders() or ():
            rec._note(name, value)
        return value

    _derived[name] = (_remembered(compute) if fixed else compute, what)
    return read


def note_derived(name: str, value: str | None) -> None:
    """Add a read of the registered derived read ``name`` with the ``value`` the caller
    computed (what its ``compute`` gives now) to the recordings of the thread: for a wrapper
    that returns the object it asked for and notes its description. Raises ``ValueError``
    for a name no :func:`derive` or :func:`derive_family` registered."""
    if name not in _derived and _member(name) is None:
        raise ValueError(f"{name!r} is not a registered derived read: register it with derive() or derive_family()")
    for rec in _recorders() or ():
        rec._note(name, value)


def _remembered(compute: Callable[[], str | None]) -> Callable[[], str | None]:
    """``compute`` for re-checks: run :func:`paused`, its value remembered until
    :func:`version` moves (every time where there is no version)."""
    memo: list[tuple[object, str | None]] = [(None, None)]

    def evaluate() -> str | None:
        now = version()
        seen, value = memo[0]
        if now is not None and seen == now:
            return value
        with paused():
            value = compute()
        memo[0] = (now, value)
        return value

    return evaluate


# Families of derived reads named by what they read: the file reads of flydeps.observe.filereads.
_FILE_READS = ("=file:", "=listdir:", "=stat:")
# prefix -> (compute of a member: its name -> its value now, what a member is: its name -> words,
# whether a member's value is fixed for the process); registered by derive_family.
_families: dict[str, tuple[Callable[[str], str | None], Callable[[str], str], bool]] = {}
# prefixes of the families whose values mean something in this process only (EnvReads.local).
_local_prefixes: list[str] = []
# prefix -> a member's value in messages (see shown), for families that give one.
_family_shown: dict[str, Callable[[str | None], str]] = {}
# prefix -> what differs between two of a member's values (see change), for families that say.
_family_changes: dict[str, Callable[[str | None, str | None], str | None]] = {}


def derive_family(
    prefix: str,
    compute: Callable[[str], str | None],
    what: Callable[[str], str],
    show: Callable[[str | None], str] | None = None,
    differ: Callable[[str | None, str | None], str | None] | None = None,
    *,
    fixed: bool = True,
    local: bool = False,
) -> Callable[[str, str | None], None]:
    """Register a family of derived reads: every name starting with ``prefix`` (``"=..."``)
    is a read whose argument the name carries (``=torch.cuda.get_device_properties:0``), its
    value ``compute(name)``, described by ``what(name)`` and shown in messages by
    ``show(value)`` (default: ``repr``), a change between two values by ``differ(old, new)``
    where it names one (see :func:`change`); ``fixed`` as for :func:`derive` (a fixed
    member's value is remembered until :func:`version` moves, any other is computed on
    every re-check). ``local``: a member's value means something in this process only (a
    memo's generation, :mod:`flydeps.observe.memoreads`): reads of the family make
    :attr:`EnvReads.local` true, and their consumers persist nothing keyed by them. Returns ``note(name, value)``,
    which adds a read of member ``name`` with the ``value`` the caller computed (what
    ``compute(name)`` gives) to the recordings of the thread; a process that registered the
    family evaluates any member by its name alone (a persistent row's read)."""
    if not prefix.startswith(DERIVED) or len(prefix) < 2 or prefix.startswith(_FILE_READS):
        raise ValueError(f"a derived read family's prefix starts with {DERIVED!r}, got {prefix!r}")
    _families[prefix] = (compute, what, fixed)
    if local:
        _local_prefixes.append(prefix)
    if show is not None:
        _family_shown[prefix] = show
    if differ is not None:
        _family_changes[prefix] = differ

    def note_member(name: str, value: str | None) -> None:
        if not name.startswith(prefix):
            raise ValueError(f"{name!r} is not a member of the derived read family {prefix!r}")
        for rec in _recorders() or ():
            rec._note(name, value)

    return note_member


def _member(name: str) -> tuple[Callable[[], str | None], str] | None:
    """A registered family's member ``name``: ``(evaluate, what)``, ``evaluate`` memoized
    on :func:`version` as :func:`derive`'s for a fixed family."""
    for prefix, (compute, what, fixed) in list(_families.items()):
        if name.startswith(prefix):
            evaluate = functools.partial(compute, name)
            return (_remembered(evaluate) if fixed else evaluate), what(name)
    return None


def _evaluator(name: str) -> Callable[[], str | None]:
    found = _derived.get(name)
    if found is None and name.startswith(_FILE_READS):
        files = _files()
        found = _derived.setdefault(name, (files.evaluator(name), files.label(name)))
    if found is None and _families:
        member = _member(name)
        if member is not None:
            found = _derived.setdefault(name, member)
    return found[0] if found is not None else _unregistered


def _unregistered() -> str:
    return _UNREGISTERED


def current(name: str) -> str | None:
    """What a build reading ``name`` would read now: the variable's value (None: unset), or
    a derived read's value (one not registered in this process: a value no build read)."""
    if name.startswith(DERIVED):
        return _evaluator(name)()
    return os.environ.get(name)


def label(name: str) -> str:
    """``env NAME`` for a variable; what a derived read is, for one."""
    if name.startswith(DERIVED):
        if name.startswith(_FILE_READS):
            return _files().label(name)
        found = _derived.get(name)
        if found is None and _families:
            found = _member(name)
        return found[1] if found is not None else name[1:]
    return f"env {name}"


def change(name: str, old: str | None, new: str | None) -> str:
    """How the read ``name`` changed, for messages: what its family's ``differ`` names
    (:func:`derive_family`: the fields of a device's properties that differ), else
    ``old -> new`` as :func:`shown` gives them."""
    for prefix, differ in _family_changes.items():
        if name.startswith(prefix):
            named = differ(old, new)
            if named is not None:
                return named
    return f"{shown(name, old)} -> {shown(name, new)}"


def shown(name: str, value: str | None) -> str:
    """A value of read ``name`` for messages: ``<unset>`` for an absent variable, a file's
    contents by the start of their digest (``contents b3:1a2b3c4d5e6f``, ``<absent>``)."""
    if name.startswith(_FILE_READS):
        return _files().shown(value)
    for prefix, show in _family_shown.items():
        if name.startswith(prefix):
            return show(value)
    return "<unset>" if value is None else repr(value)


def _make_version() -> Callable[[], int | None]:
    """:func:`version` for this interpreter (see the module docstring)."""
    from ..watch import watchers as _watch

    data = _DATA
    if type(data) is not dict:
        return lambda: None
    if _watch.TAGS:  # a partial of the C reader: no Python frame on the hot path
        return functools.partial(_watch.tags_max, (data,))
    if _watch.AVAILABLE and _watch.BACKEND == "ext":
        _watch.watch_dict(data)
        watch_version = _watch.version

        def watched() -> int | None:
            return watch_version() if _watch.AVAILABLE else None  # degraded later: no memo

        return watched
    return lambda: None


version: Callable[[], int | None] = _make_version()
settings.attach_environ(paused, version)
