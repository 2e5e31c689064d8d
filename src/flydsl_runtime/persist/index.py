"""The persistent index: a launcher's cross-process key -> FlyDSL's artifact, so a new process
can start a kernel without tracing it.

Contract
--------
Store: one SQLite file, ``runtime-index-v1.sqlite3`` under ``FLYDEPS_CACHE_DIR`` (default:
``platformdirs.user_cache_dir("flydeps")``), in WAL mode; in rollback-journal mode when an
AOT build sets it up or it is created on a network file system (:mod:`.sqlitefile`: WAL
works within one host only, and a rollback-journal file is read where nothing may be
written). One row per specialization: ``(key, env_reads) -> (launcher, ir_key, created,
python, detail)``; ``detail`` is the key's parts spelled out (:func:`key_parts`: each
argument, target, env variable, hint, version, and every node of the dependency graph with
its digest and ``file:line``), read only to explain a miss (:mod:`.strict`). Nothing is
pickled here: keys are hex digests, the rest JSON text. FlyDSL keeps the artifact itself in its own disk cache
(``FLYDSL_RUNTIME_CACHE_DIR``, pickles it writes and reads under its own file locks); a row
names it by FlyDSL's IR key, and the disk file is found the way FlyDSL finds it
(``_disk_cache_key``: the IR key namespaced by the *current* toolchain digest), so a row
written under another toolchain finds nothing.

:func:`persistent_key` maps a launcher's in-process key (``Entry.key``, spelled out) to a
hex digest that is the same in every process and on every machine that would trace the
same IR: the launcher's qualified name, the dependency digest of its owner state (a blake3
Merkle digest of code and values, stable across processes), each argument's signature
(library types by module and name, dtypes by name, scalars by type and value, floats by
bits), the resolved target (backend, arch, warp size; never a device id), the code-gen env
by effect (:mod:`flydsl_runtime.trace.envkey`), the compile hints, a bound instance's class and
``__cache_signature__()`` (without one: the digest of the instance's state, see
``Launcher._persistent_key``; ``detail`` then also holds each attribute's digest), the
FlyDSL version, flydeps' version and key format (:func:`flydeps_identity`) and the Python
minor version. It is ``None`` — the call is
never persisted, it traces in each new process — when a part has no name that is the same
across processes: a type defined in a function (``<locals>``) or in user code among the
argument signatures, a value of another type, a digest that includes source positions
(debug info) or an object's identity (``Fingerprint.identified``: a value over the
snapshot limit, an object with no readable state).

The trace's reads of ``os.environ`` are part of a row: a row applies only where every
variable it lists still has the value the trace read (a different value is another row).

:func:`lookup` returns the first applicable row or ``None``; :func:`record` adds a row
(``INSERT OR IGNORE``: two processes recording the same specialization leave one row).
Every failure of the store — unreadable, corrupt, truncated, locked for too long, not
writable — is a miss or a skipped write with one warning on the ``flydsl_runtime`` logger
naming the file; a damaged file (any error but a busy or unopenable store's, an
``OSError`` or a setting's: a damaged schema page surfaces as ``UnicodeDecodeError``) is
moved aside (``.corrupt-<time>-<pid>``) and a new one is started. Nothing here raises into
a launcher call.

Trust (:func:`_open`): the file is used only where no other user can write it or its
directory (the rules of :mod:`flydeps.store.memofile`, checked by ``fstat`` on descriptors
opened without following symlinks, its ``-wal``/``-shm``/``-journal`` files too, and
SQLite must open the very file checked: :func:`.sqlitefile.open_checked`); otherwise
:class:`IndexRefused`, one warning per process, and no persistence. Another user's
directory that group and others cannot write (a shipped one), a read-only mount, or a
directory this process cannot write is read only (:mod:`.sqlitefile`): no row is written.

For AOT builds (:mod:`flydsl_runtime.aot.build`): :func:`defer_writes` collects a worker's rows for the
parent (the one writer), :func:`collect_uses` notes the rows a worker was served and the
artifacts it touched, :func:`prune` deletes the rows a build did not use, :func:`compact`
folds the write-ahead log into the file; :func:`read_rows` reads a file read-only for
listings (``flydeps aot list``) and raises :class:`IndexReadError` naming it.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import sqlite3
import struct
import sys
import threading
import time
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from blake3 import blake3

from flydeps import settings
from flydeps.errors import FlydepsError
from flydeps.graph import Node, NodeKind
from flydeps.keys.fingerprint import Fingerprint
from flydeps.observe.environ import EnvReads, current, label
from flydeps.store import memofile as _memofile
from flydeps.store.fsmeta import file_states, real_path

from . import sqlitefile

try:  # imported with the package, as its other extension: loading a library costs ~0.2 ms
    from . import _capi  # type: ignore[attr-defined]
except ImportError:  # not built (no compiler, another platform or interpreter): ctypes
    _capi = None

__all__ = [
    "INDEX_NAME",
    "IndexReadError",
    "IndexRefused",
    "Row",
    "Uses",
    "at",
    "close",
    "collect_uses",
    "describe",
    "compact",
    "disk_key",
    "disk_key_with",
    "enabled",
    "index_path",
    "key_or_reason",
    "key_parts",
    "launcher_rows",
    "lookup",
    "note_trace",
    "parse_reads",
    "persistent_key",
    "prune",
    "read_only",
    "read_rows",
    "reads_json",
    "record",
    "stop_collecting",
    "toolchain_key",
]

log = logging.getLogger("flydsl_runtime")

INDEX_NAME = "runtime-index-v1.sqlite3"
_SCHEMA = (
    """
CREATE TABLE IF NOT EXISTS specializations (
    key TEXT NOT NULL,
    env_reads TEXT NOT NULL,
    launcher TEXT NOT NULL,
    ir_key TEXT NOT NULL,
    created REAL NOT NULL,
    python TEXT NOT NULL,
    detail TEXT NOT NULL,
    PRIMARY KEY (key, env_reads)
)
""",
    """
CREATE TABLE IF NOT EXISTS toolchains (
    files TEXT PRIMARY KEY,
    flydsl_key TEXT NOT NULL
)
""",
)
# PRAGMA user_version of a file whose tables and journal mode are set up: WAL (a runtime's
# cache on a local disk), or rollback journal (an AOT build's directory, or a cache on a
# network file system, where SQLite's WAL mode does not work across hosts). 0: not yet.
_SET_UP_WAL = 1
_SET_UP_ROLLBACK = 2
# PRAGMA application_id of an index an AOT build made (its directory is shipped): never trimmed.
_AOT_BUILT = 0x464C4441  # "FLDA"
# Top-level packages whose types may appear by name in a persistent key: their code is
# covered by the versions in the key. A user type's definition is not, so it is not named.
_LIBRARY_TYPES = frozenset({"builtins", "flydsl", "torch", "numpy"})


@dataclass(frozen=True, slots=True)
class Row:
    """One recorded specialization."""

    key: str
    env_reads: tuple[tuple[str, str | None], ...]
    launcher: str
    ir_key: str


def enabled() -> bool:
    """True when rows may be read and written: ``FLYDEPS_INDEX`` is on and FlyDSL's disk
    cache, which holds the artifacts rows point to, is enabled (read on each miss)."""
    if not settings.flag("FLYDEPS_INDEX", True):
        return False
    from flydsl.utils import env

    return bool(env.runtime.cache_dir) and bool(env.runtime.enable_cache)


_path_override: Path | None = None


@contextmanager
def at(directory: Path) -> Iterator[None]:
    """Read and write the index in ``directory`` instead of ``FLYDEPS_CACHE_DIR`` (AOT builds'
    parent writing into the directory it builds)."""
    global _path_override
    saved, _path_override = _path_override, Path(directory) / INDEX_NAME
    try:
        yield
    finally:
        _path_override = saved


# (cache root, its index path) of the last index_path(): a Path costs ~10 µs to build.
_path_memo: tuple[str, Path] | None = None


def index_path() -> Path:
    global _path_memo
    if _path_override is not None:
        return _path_override
    base = settings.cache_root()
    memo = _path_memo
    if memo is None or memo[0] != base:
        memo = _path_memo = (base, Path(base) / INDEX_NAME)
    return memo[1]


# --- the cross-process key ---------------------------------------------------------


class _Unnamed(Exception):
    """A key part without a name that is the same in every process."""


def _type_name(tp: type, *, user_ok: bool) -> str:
    qualname = getattr(tp, "__qualname__", "")
    module = getattr(tp, "__module__", "") or ""
    if "<locals>" in qualname or not qualname or not module:
        raise _Unnamed(f"type {tp!r}")
    if not user_ok and module.split(".")[0] not in _LIBRARY_TYPES:
        raise _Unnamed(f"user type {module}.{qualname}")
    return f"{module}:{qualname}"


def _canonical(value: object, *, user_types: bool = False) -> object:
    """A JSON-able description of a key part, equal across processes exactly when the part is."""
    tp = type(value)
    if value is None:
        return ["n"]
    if tp is bool:
        return ["b", value]
    if tp is int:
        return ["i", str(value)]
    if tp is str:
        return ["s", value]
    if tp is float:
        return ["f", struct.pack("<d", value).hex()]
    if tp is bytes:
        return ["y", value.hex()]  # type: ignore[attr-defined]
    if tp is tuple:
        return ["t", [_canonical(v, user_types=user_types) for v in value]]  # type: ignore[attr-defined]
    if isinstance(value, type):
        return ["c", _type_name(value, user_ok=user_types)]
    if tp.__module__ == "torch" and tp.__name__ == "dtype":
        return ["d", str(value)]
    raise _Unnamed(f"value of type {tp.__module__}.{tp.__qualname__}")


def _distribution_version(name: str) -> str:
    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


_VERSIONS: tuple[str, str, str] | None = None


def _versions() -> tuple[str, str, str]:
    """(FlyDSL's ``__version__``, flydeps' identity (:func:`flydeps_identity`), Python
    ``X.Y``): read once; distribution metadata only for a FlyDSL without ``__version__``."""
    global _VERSIONS
    if _VERSIONS is None:
        import flydsl

        flydsl_version = getattr(flydsl, "__version__", None)
        _VERSIONS = (
            flydsl_version if isinstance(flydsl_version, str) else _distribution_version("flydsl"),
            flydeps_identity(),
            f"{sys.version_info[0]}.{sys.version_info[1]}",
        )
    return _VERSIONS


def flydeps_identity() -> str:
    """``0.1.0 keys 2``: flydeps' version and :data:`flydeps.KEY_FORMAT`, the rules its keys
    were made by. Not its installed files: its C extensions, built per machine from a source
    distribution, differ in bytes while computing the same keys."""
    import flydeps

    return f"{flydeps.__version__} keys {flydeps.KEY_FORMAT}"


def key_parts(
    launcher: str, described: tuple, names: tuple[str, ...], fp: Fingerprint, self_state: dict | None = None
) -> dict | None:
    """The parts of a persistent key, spelled out for explanations (the row's ``detail``):
    ``{"launcher", "args": {name: canonical}, "arch", "target", "env": {variable: value},
    "hints", "self", "versions", "nodes": {node id: [digest, "file:line", kind(, detail)]}}``, plus
    ``"self_state": {attribute: [digest, summary]}`` for a bound instance keyed by its state;
    None when the key is not persistable."""
    from ..trace.envkey import named_env

    digest, signatures, (target, _device), env, hints, self_key = described
    if type(digest) is not str:
        return None
    try:
        parts = {
            "launcher": launcher,
            "args": {name: _canonical(sig) for name, sig in zip(names, signatures)},
            "arch": target[1],
            "target": _canonical(tuple(target)),
            "env": named_env(env, target[1]),
            "hints": _canonical(hints),
            "self": _canonical(self_key, user_types=True),
            "versions": list(_versions()),
            "nodes": {nid: _node_part(node) for nid, node in fp.graph.nodes.items()},
        }
    except _Unnamed:
        return None
    if self_state is not None:
        parts["self_state"] = self_state
    return parts


# Nodes whose ``detail`` says what their digest stands for: a global's value (a short
# summary that never calls a user ``__repr__``), a library's ``name==version``.
_DETAILED = frozenset({NodeKind.GLOBAL, NodeKind.EXTERNAL})


def _node_part(node: Node) -> list[str]:
    """A node in a row's explanation: ``[digest, "file:line", kind]``, plus what a global's
    or library's digest stands for (so a miss can say ``4 -> 8``)."""
    part = [node.digest, str(node.location) if node.location else "", node.kind.value]
    if node.kind in _DETAILED and node.detail:
        part.append(node.detail)
    return part


def persistent_key(launcher: str, described: tuple) -> str | None:
    """The cross-process key of a launcher call keyed ``described`` (``Entry.key`` form:
    digest, argument signatures, (target, device id), env key, hints, self key), or None
    when a part cannot be named across processes (see the module docstring)."""
    return key_or_reason(launcher, described)[0]


def key_or_reason(launcher: str, described: tuple) -> tuple[str | None, str]:
    """:func:`persistent_key`, or ``(None, why)`` naming the part without a cross-process name."""
    digest, signatures, (target, _device), env, hints, self_key = described
    if type(digest) is not str:
        return None, "the key includes source positions (FLYDSL_DEBUG_ENABLE_DEBUG_INFO=1)"
    try:
        parts = [
            ["launcher", launcher],
            ["digest", digest],
            ["args", [_canonical(s) for s in signatures]],
            ["target", _canonical(tuple(target))],
            ["env", _canonical(env)],
            ["hints", _canonical(hints)],
            ["self", _canonical(self_key, user_types=True)],
            ["versions", list(_versions())],
        ]
    except _Unnamed as why:
        log.debug("%s: not persisted (%s has no cross-process name)", launcher, why)
        return None, f"{why} has no name that is the same in every process"
    text = json.dumps(parts, separators=(",", ":"), sort_keys=False)
    return blake3(text.encode("utf-8", "surrogatepass")).hexdigest(), ""


# --- the store -----------------------------------------------------------------------

_lock = threading.Lock()
_connections: dict[tuple[Path, int], sqlite3.Connection] = {}


class IndexRefused(FlydepsError, RuntimeError):
    """The index file, or its directory, is not one this process may trust (:func:`_open`):
    another user can write it, it is a symbolic link or not a regular file."""


# Index files refused in this process (one warning each), by path.
_refused: dict[Path, IndexRefused] = {}
# The inode each index file had when this process opened it: set aside only while it still does.
_opened: dict[Path, tuple[int, int]] = {}
_SIDE_FILES = ("-wal", "-shm", "-journal")


def _connect(path: Path) -> sqlite3.Connection:
    """One connection per file and thread (sqlite3 connections are not shared across threads),
    opened by :func:`_open`; raises :class:`IndexRefused` (remembered for the process) for a
    file or directory this process may not trust."""
    key = (path, threading.get_ident())
    with _lock:
        conn = _connections.get(key)
        if conn is not None:
            return conn
    refused = _refused.get(path)
    if refused is not None:
        raise refused
    try:
        conn = _open(path)
    except _memofile.Untrusted as why:
        refused = _refused[path] = IndexRefused(
            f"persistent index {path} not used: {why.path}: {why.reason}; make the directory yours and "
            "private (`chmod 700 DIR`, the index file `chmod 600`) or set FLYDEPS_CACHE_DIR to a directory "
            "only you can write (running without persistence: every new process traces)"
        )
        raise refused from None
    with _lock:
        _connections[key] = conn
    return conn


def _open(path: Path) -> sqlite3.Connection:
    """The index file ``path``, opened only where no other user can write it or its directory.

    The directory is opened and checked by ``fstat`` (:func:`flydeps.store.memofile.open_dir`):
    the current user's, which group and others cannot write; or another user's that group
    and others cannot write (a shipped directory), which is read and never written, even by
    root. The file (created 0600 where missing and this process may write), and each
    ``-wal``/``-shm``/``-journal`` file beside it, must be a regular file (no symlink)
    owned by this user, root or the directory's owner, that group and others cannot write;
    SQLite must then open that very file (:func:`.sqlitefile.open_checked`). Where this
    process cannot write (a shipped directory, a read-only mount) the file is opened
    read-only (:mod:`.sqlitefile`): rows are read, none is written (:func:`read_only`)."""
    writable = settings.can_write_file(path)
    if writable and not os.path.isdir(path.parent):
        os.makedirs(path.parent, mode=0o700, exist_ok=True)
    dir_fd, directory = _memofile.open_dir(path.parent, shared=True)
    try:
        me = getattr(os, "getuid", lambda: directory.st_uid)()
        writable = writable and directory.st_uid == me  # another user's directory: read only
        owners = _memofile.trusted_owners(directory)
        fd, checked = _memofile.open_entry(path.name, dir_fd, owners, where=path.parent, create=writable)
        os.close(fd)
        for suffix in _SIDE_FILES:
            _memofile.check_entry(path.name + suffix, dir_fd, owners, where=path.parent)
    finally:
        os.close(dir_fd)
    if not writable:
        with _lock:
            _read_only.add(path)  # whether or not it can be read: no row is written here
    conn = sqlitefile.open_checked(path, checked, read_only=not writable)
    _opened[path] = (checked.st_dev, checked.st_ino)
    if writable:
        try:
            _set_up(conn, path)
        except BaseException:
            conn.close()
            raise
    return conn


def _set_up(conn: sqlite3.Connection, path: Path) -> None:
    """The journal mode and the tables, once per file (they persist in it, marked by user_version)."""
    conn.execute("PRAGMA synchronous=NORMAL")
    if conn.execute("PRAGMA user_version").fetchone()[0] not in (_SET_UP_WAL, _SET_UP_ROLLBACK):
        rollback = _deferred is not None or _path_override is not None or sqlitefile.on_network_fs(path.parent)
        conn.execute(f"PRAGMA journal_mode={'DELETE' if rollback else 'WAL'}")
        for statement in _SCHEMA:
            conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {_SET_UP_ROLLBACK if rollback else _SET_UP_WAL}")


# Index files this process opened read-only (it cannot write where they are).
_read_only: set[Path] = set()


def read_only(path: Path) -> bool:
    """True when this process reads the index file ``path`` without writing it (:func:`_connect`
    found it cannot write there)."""
    return path in _read_only


def close() -> None:
    """Close this thread's connection to the index at :func:`index_path` (the next use opens
    it again): an AOT build worker, which may live on in a Dask cluster, lets go of the
    file it built into, so the build can finish it (:func:`compact`)."""
    with _lock:
        conn = _connections.pop((index_path(), threading.get_ident()), None)
    if conn is not None:
        conn.close()


def _forget(path: Path) -> None:
    with _lock:
        for key in [k for k in _connections if k[0] == path]:
            _connections.pop(key).close()


# (path, what was said) of the failures already warned of in this process.
_warned: set[tuple[Path, str]] = set()


def _warn_once(path: Path, text: str) -> None:
    if (path, text) not in _warned:
        _warned.add((path, text))
        log.warning("flydsl_runtime: %s", text)


def _failed(path: Path, error: Exception, doing: str) -> None:
    """A failure of the store while ``doing`` (``read``, ``written``): a refused file is named
    once; a damaged one (:func:`_is_damage`) is set aside where this process may write it;
    anything else (locked, unwritable) is one warning per path and message."""
    if isinstance(error, IndexRefused):
        _warn_once(path, str(error))
    elif _is_damage(error) and not read_only(path):
        _set_aside(path, error)
    else:
        _warn_once(path, f"persistent index {path} not {doing}: {describe(error)}")


def describe(error: BaseException) -> str:
    """``error`` in a message: SQLite's and the OS's words as they are, any other by its type too."""
    return str(error) if isinstance(error, (sqlite3.Error, OSError)) else f"{type(error).__name__}: {error}"


def _set_aside(path: Path, error: Exception) -> None:
    """A damaged index: renamed ``<name>.corrupt-<time>-<pid>`` (kept for inspection) with its
    journal files, while ``path`` still names the file this process opened (another process
    may have set it aside and started a new one already); a new one starts on next use."""
    _forget(path)
    opened = _opened.pop(path, None)
    aside = path.with_name(f"{path.name}.corrupt-{int(time.time())}-{os.getpid()}")
    try:
        now = os.lstat(path)
        if opened is not None and (now.st_dev, now.st_ino) != opened:
            return  # already set aside and started anew by another process
        os.replace(path, aside)
        for suffix in _SIDE_FILES:  # a stale journal must never be rolled into the new file
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        log.warning(
            "flydsl_runtime: persistent index %s is unreadable (%s); moved to %s, a new one starts",
            path,
            describe(error),
            aside,
        )
    except OSError as exc:
        _warn_once(path, f"persistent index {path} is unreadable ({describe(error)}) and could not be moved: {exc}")


# SQLite's words for a store that is busy or cannot be opened or written: not damage.
_TRANSIENT = ("locked", "busy", "unable to open", "readonly", "read-only", "disk is full", "interrupted")


def _is_damage(error: Exception) -> bool:
    """``error`` says the file is damaged or foreign: any error but an ``OSError``, a
    ``MemoryError``, flydeps' own (a refusal, a bad setting) or SQLite's words for a busy, locked or unopenable store (a
    damaged schema page can surface as ``UnicodeDecodeError`` from SQLite's message)."""
    if isinstance(error, (OSError, MemoryError, FlydepsError)):  # FlydepsError: a refusal, a bad setting
        return False
    if isinstance(error, sqlite3.OperationalError):
        text = str(error).lower()
        return not any(word in text for word in _TRANSIENT)
    return True


def parse_reads(text: str) -> tuple[tuple[str, str | None], ...]:
    """A row's ``env_reads`` JSON as ``((name, value or None for unset), ...)``; raises
    ``ValueError``/``TypeError`` for text this version cannot read."""
    return tuple((str(n), None if v is None else str(v)) for n, v in json.loads(text))


def reads_json(reads: EnvReads) -> str | None:
    if reads.listed is not None or reads.local:
        return None  # the trace listed the whole environment, or hit a memo (flydeps.observe.memoreads): not persisted
    return json.dumps(sorted([name, value] for name, value in reads.values), separators=(",", ":"))


def lookup(key: str) -> Row | None:
    """The first row of ``key`` whose environment reads hold now, or None (also on any
    failure of the store, after one warning)."""
    path = index_path()
    if not os.path.exists(path):
        _check_root(path.parent)
        return None
    try:
        rows = (
            _connect(path)
            .execute("SELECT env_reads, launcher, ir_key FROM specializations WHERE key = ?", (key,))
            .fetchall()
        )
    except Exception as error:  # whatever the file makes SQLite or the driver raise: a miss
        _failed(path, error, "read")
        return None
    for reads_text, launcher, ir_key in rows:
        try:
            reads = parse_reads(reads_text)
        except (ValueError, TypeError):
            continue  # a row this version cannot read: never applies
        if all(current(name) == value for name, value in reads):  # a derived read by its value now
            if _uses is not None:
                _uses.rows.append((key, reads_text))
            return Row(key, reads, launcher, ir_key)
    return None


# Cache roots found unusable (one warning each per process).
_bad_roots: set[Path] = set()


def _check_root(root: Path) -> None:
    """One WARNING per process when the cache root is a file (a misspelt FLYDEPS_CACHE_DIR):
    no index can be read or written there, so every new process would trace, silently."""
    if root in _bad_roots or not root.exists() or root.is_dir():
        return
    _bad_roots.add(root)
    log.warning(
        "flydsl_runtime: the cache directory %s is a file: no persistent index is read or written "
        "there (every new process traces); set FLYDEPS_CACHE_DIR to a directory",
        root,
    )


def launcher_rows(launcher: str) -> list[tuple[tuple[tuple[str, str | None], ...], dict, float]]:
    """Every row of ``launcher`` as ``(env reads, detail, created)``, newest first (for
    explanations; empty when there is no index). Raises :class:`IndexReadError` naming the
    file when the store cannot be read."""
    path = index_path()
    if not path.exists():
        return []
    try:
        rows = (
            _connect(path)
            .execute(
                "SELECT env_reads, detail, created FROM specializations WHERE launcher = ? ORDER BY created DESC",
                (launcher,),
            )
            .fetchall()
        )
    except IndexRefused as error:
        raise IndexReadError(str(error)) from None
    except Exception as error:
        raise IndexReadError(f"{path}: not readable ({describe(error)})") from None
    out = []
    for reads_text, detail_text, created in rows:
        try:
            reads = parse_reads(reads_text)
            detail = json.loads(detail_text)
        except (ValueError, TypeError):
            continue
        if isinstance(detail, dict):
            out.append((reads, detail, float(created)))
    return out


_deferred: list[tuple] | None = None


@dataclass(frozen=True, slots=True)
class Uses:
    """What a process used of the index and of FlyDSL's disk cache while collecting
    (:func:`collect_uses`): the rows :func:`lookup` served, as ``(key, env_reads JSON)``,
    every FlyDSL disk key :func:`disk_key` computed (the artifacts loaded, and those a
    trace wrote before its row was recorded), and each trace of a flydsl_runtime launcher
    as ``(launcher, None)`` when a row serves it now (recorded, or an existing row whose
    artifact the trace wrote again) or ``(launcher, why not)`` (:func:`note_trace`)."""

    rows: list[tuple[str, str]] = field(default_factory=list)
    artifacts: list[str] = field(default_factory=list)
    traces: list[tuple[str, str | None]] = field(default_factory=list)


_uses: Uses | None = None


def collect_uses() -> Uses:
    """From now on (in this process) note what the index serves (:class:`Uses`), until
    :func:`stop_collecting` (AOT build workers: what a build keeps when it prunes)."""
    global _uses
    _uses = Uses()
    return _uses


def stop_collecting() -> None:
    global _uses
    _uses = None


def note_trace(launcher: str, unstored: str | None) -> None:
    """A trace of ``launcher`` ended: a row serves it now (``unstored`` None) or none does,
    and why (noted while collecting: an AOT build fails such a specialization)."""
    if _uses is not None:
        _uses.traces.append((launcher, unstored))


def defer_writes() -> list[tuple]:
    """From now on (in this process) :func:`record` collects rows into the returned list
    instead of writing them, until :func:`stop_deferring` (AOT build workers: one writer)."""
    global _deferred
    _deferred = []
    return _deferred


def stop_deferring() -> None:
    global _deferred
    _deferred = None


def record(
    key: str, launcher: str, ir_key: str, reads: EnvReads, detail: dict | None = None, *, replace: bool = False
) -> bool:
    """Add the row (an existing one is kept, or with ``replace`` overwritten); False when
    it was not written."""
    reads_text = reads_json(reads)
    if reads_text is None:
        if reads.local:  # issue 35.4: what a memo another process cannot compare answered
            shown = "; ".join(label(name) for name in reads.local_names)
            log.info("%s: not persisted, its trace consulted a memoized reader (%s)", launcher, shown)
        return False
    if _deferred is not None:  # an AOT build worker: the parent writes (aotbuild)
        _deferred.append((key, launcher, ir_key, reads, detail, replace))
        return True
    path = index_path()
    if read_only(path):
        log.debug("flydsl_runtime: persistent index %s is read-only here, row not written", path)
        return False
    detail_text = json.dumps(detail or {}, separators=(",", ":"))
    row = (key, reads_text, launcher, ir_key, time.time(), sys.version.split()[0], detail_text)
    for attempt in (1, 2):
        try:
            verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
            conn = _connect(path)
            conn.execute(f"{verb} INTO specializations VALUES (?, ?, ?, ?, ?, ?, ?)", row)
            if _path_override is None:  # a runtime process's own cache (not an AOT build's parent)
                try:
                    _trim(conn, path)
                except sqlite3.Error as error:  # the row is written; trimming waits for the next one
                    log.warning("flydsl_runtime: persistent index %s not trimmed: %s", path, error)
            return True
        except FlydepsError as error:  # a refused file is named once; a bad setting names itself
            if not isinstance(error, IndexRefused):
                raise
            _failed(path, error, "written")
            return False
        except Exception as error:  # whatever the file makes SQLite or the driver raise: not written
            _failed(path, error, "written")
            if attempt == 1 and _is_damage(error) and not read_only(path):
                continue  # set aside: a new file takes the row
            return False
    return False


def _trim(conn: sqlite3.Connection, path: Path) -> None:
    """Keep the runtime index under ``FLYDEPS_INDEX_MAX_BYTES`` of rows: past it, the oldest
    rows go, down to 3/4 of it (their pages are reused by later rows). A deleted row is only a
    miss for a process that would have loaded it (it traces, and writes the row again). An
    index an AOT build made (:func:`mark_built`) is never trimmed. Runs after a row is
    written, that is after a trace: never on a call the index serves."""
    limit = settings.integer("FLYDEPS_INDEX_MAX_BYTES", _MAX_BYTES)
    page_size, pages, free = (
        conn.execute(f"PRAGMA {name}").fetchone()[0] for name in ("page_size", "page_count", "freelist_count")
    )
    if (pages - free) * page_size <= limit or conn.execute("PRAGMA application_id").fetchone()[0] == _AOT_BUILT:
        return
    rows = conn.execute("SELECT count(*) FROM specializations").fetchone()[0]
    excess = min(rows - int(rows * (limit * 3 // 4) / ((pages - free) * page_size)), rows - 1)  # not the new row
    if excess > 0:
        conn.execute(
            "DELETE FROM specializations WHERE rowid IN (SELECT rowid FROM specializations ORDER BY created LIMIT ?)",
            (excess,),
        )
        log.info("flydsl_runtime: persistent index %s over %d bytes: its %d oldest rows deleted", path, limit, excess)


_MAX_BYTES = 256 * 1024 * 1024


def mark_built() -> None:
    """Mark the index at :func:`index_path` as an AOT build's: runtime processes writing to it
    never trim it (:func:`_trim`), whatever its size."""
    _connect(index_path()).execute(f"PRAGMA application_id = {_AOT_BUILT}")


def prune(keep: Collection[tuple[str, str]]) -> int:
    """Delete every row of the index (at :func:`index_path`) whose ``(key, env_reads JSON)``
    is not in ``keep``, in one transaction (a reader sees all the rows before or after);
    the number of rows deleted."""
    path = index_path()
    if not path.exists():
        return 0
    kept = set(keep)
    conn = _connect(path)
    conn.execute("BEGIN IMMEDIATE")
    try:
        rows = conn.execute("SELECT key, env_reads FROM specializations").fetchall()
        gone = [(key, reads) for key, reads in rows if (key, reads) not in kept]
        conn.executemany("DELETE FROM specializations WHERE key = ? AND env_reads = ?", gone)
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return len(gone)


class IndexReadError(FlydepsError, RuntimeError):
    """An index file that :func:`read_rows` cannot read (missing, not SQLite, damaged)."""


def read_rows(path: Path) -> list[tuple[str, str, str, str, float, str, str]]:
    """Every row of the index file ``path`` as ``(key, env_reads JSON, launcher, ir_key,
    created, python, detail JSON)``, opened read-only: no table is created or migrated and a
    damaged file is not set aside (for listings; a runtime's :func:`lookup` treats a damaged
    file as a miss). Raises :class:`IndexReadError` naming the file."""
    if not path.is_file():
        raise IndexReadError(f"{path}: no persistent index there (an AOT build writes {INDEX_NAME} into its --out DIR)")
    try:
        conn = sqlitefile.open_read_only(path)
        try:
            rows = conn.execute(
                "SELECT key, env_reads, launcher, ir_key, created, python, detail FROM specializations"
            ).fetchall()
        finally:
            conn.close()
    except Exception as error:  # a damaged file can make the driver raise anything (UnicodeDecodeError)
        raise IndexReadError(f"{path}: not a readable persistent index ({describe(error)})") from None
    return [(str(k), str(r), str(n), str(i), float(c), str(py), str(d)) for k, r, n, i, c, py, d in rows]


def read_toolchain_keys(path: Path) -> list[str]:
    """The FlyDSL toolchain keys the index file ``path`` remembers (those of the processes
    that traced into it: an AOT build's workers), opened read-only; [] when it cannot say."""
    try:
        conn = sqlitefile.open_read_only(path)
        try:
            return [str(k) for (k,) in conn.execute("SELECT DISTINCT flydsl_key FROM toolchains").fetchall()]
        finally:
            conn.close()
    except Exception:  # cannot say (read_rows names the failure)
        return []


def compact(*, vacuum: bool = False) -> None:
    """Make the index file (at :func:`index_path`) one self-contained file to ship: with
    ``vacuum`` the pages deleted rows left given back, and in rollback-journal mode (as an
    AOT build sets its directory's index up, :func:`_connect`; a directory an older build
    left in WAL mode has its log folded in and is switched), so a process that cannot write
    beside it (a directory owned by another user, a read-only mount) reads it with SQLite's
    usual locks. A failure is logged, never raised (the rows are written either way); a WAL
    file another process holds open stays in WAL mode, readable where its reader can write."""
    path = index_path()
    if not path.exists():
        return
    try:
        conn = _connect(path)
        if vacuum:
            conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        mode = conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
        if str(mode).lower() == "delete":
            conn.execute(f"PRAGMA user_version = {_SET_UP_ROLLBACK}")  # a directory an older build left in WAL
        else:
            log.warning(
                "flydsl_runtime: persistent index %s stays in WAL mode (another process has it open): "
                "a process that cannot write in its directory will not read it",
                path,
            )
    except (sqlite3.Error, IndexRefused) as error:
        log.warning("flydsl_runtime: persistent index %s not compacted: %s", path, error)
    finally:
        _forget(path)  # this process's next use opens it as any process would


# --- FlyDSL's disk key without re-hashing its toolchain --------------------------------


def _toolchain_place() -> tuple[str, str, str] | None:
    """``(flydsl package directory, FlyDSL version, ROCm device bitcode directory)``: where
    FlyDSL's toolchain key reads its files, or None where it reads more (extra source
    directories, an external LLVM, another backend): then the key is always computed by
    FlyDSL."""
    import flydsl
    from flydsl.compiler import jit_function as fjf
    from flydsl.compiler.backends import get_backend

    if fjf.EXTRA_SOURCE_DIRS or os.environ.get("FLYDSL_EXTRA_SOURCE_DIRS") or fjf._use_external_binary_codegen():
        return None
    if get_backend().target.backend != "rocm":
        return None
    bitcode = os.path.join(rocm_root(), "amdgcn", "bitcode")
    return _package_dir(flydsl.__file__), str(getattr(flydsl, "__version__", "?")), bitcode


def rocm_root() -> str:
    """The ROCm root whose device bitcode FlyDSL's toolchain key hashes: what
    ``_mlirDialectsFlyROCDL.rocm_path()`` returns, asked of the C function that binding
    wraps (``mlirFlyROCDLGetROCMPath`` in FlyDSL's C API library, loaded by ``import
    flydsl``), so the answer is FlyDSL's own, read now (it follows the environment). The
    binding module's first import costs ~1 ms of a new process's first call (nanobind type
    registration), the call ~10 µs. Where that library is not loaded or has no such function
    (another FlyDSL build, another platform), the binding is asked."""
    function = _rocm_root_function()
    if function is None:
        from flydsl._mlir._mlir_libs import _mlirDialectsFlyROCDL

        return str(_mlirDialectsFlyROCDL.rocm_path())
    return function().decode("utf-8", "surrogateescape")


def rocm_path_setting() -> str:
    """``ROCM_PATH=...`` or ``ROCM_PATH is not set``: what this process gives FlyDSL, for messages."""
    given = os.environ.get("ROCM_PATH")
    return f"ROCM_PATH={given}" if given else "ROCM_PATH is not set"


def linker_problem() -> str | None:
    """Why FlyDSL cannot link a kernel in this process, or None when it can: its ROCm backend
    links each kernel with ``ld.lld`` under its ROCm root (``<root>/llvm/bin/ld.lld``, never
    one found on ``PATH``), and where that file is missing every compile fails with MLIR's
    bare "lld invocation failed"."""
    from flydsl.compiler.backends import get_backend

    if get_backend().target.backend != "rocm":
        return None
    linker = os.path.join(rocm_root(), "llvm", "bin", "ld.lld")
    if os.access(linker, os.X_OK):
        return None
    return (
        f"FlyDSL links each kernel with {linker}, which is missing or not executable ({rocm_path_setting()}): set "
        "ROCM_PATH to a ROCm root holding llvm/bin/ld.lld and amdgcn/bitcode"
    )


_ROCM_ROOT_SYMBOL = "mlirFlyROCDLGetROCMPath"


@functools.lru_cache(maxsize=1)
def _rocm_root_function() -> Callable[[], bytes] | None:
    """``MlirStringRef mlirFlyROCDLGetROCMPath(void)`` of FlyDSL's loaded C API library, as a
    function returning the bytes it points to, or None: called through
    :mod:`flydsl_runtime.persist._capi` where it was built (~5 µs), else through ctypes (~0.4 ms of a
    new process's first call: the library handle, the structure class)."""
    if os.name != "posix":
        return None
    from flydsl._mlir import _mlir_libs

    directory = os.path.dirname(_mlir_libs.__file__)
    names = sorted(n for n in os.listdir(directory) if n.startswith("libFlyPythonCAPI.so"))
    libraries = [os.path.join(directory, name) for name in names]
    for path in libraries:
        if _capi is not None:  # RTLD_NOLOAD: only the copy this process already runs
            if _capi.string_ref(path, _ROCM_ROOT_SYMBOL) is not None:
                return functools.partial(_capi.string_ref, path, _ROCM_ROOT_SYMBOL)
            continue
        function = _ctypes_string_ref(path, _ROCM_ROOT_SYMBOL)
        if function is not None:
            return function
    return None


def _ctypes_string_ref(path: str, symbol: str, *, load: bool = False) -> Callable[[], bytes] | None:
    """``MlirStringRef symbol(void)`` of the library at ``path`` (if already loaded, or with
    ``load`` loaded now) through ctypes, as a function returning its bytes; None where it is
    not loaded or lacks it."""
    import ctypes

    class StringRef(ctypes.Structure):  # MLIR's C API MlirStringRef: {const char *data; size_t length}
        _fields_ = [("data", ctypes.c_void_p), ("length", ctypes.c_size_t)]

    try:  # RTLD_NOLOAD: only the copy this process already runs, never a second one
        library = ctypes.CDLL(path, mode=os.RTLD_LAZY if load else os.RTLD_NOLOAD | os.RTLD_LAZY)
        function = getattr(library, symbol)
    except (OSError, AttributeError):
        return None
    function.argtypes, function.restype = [], StringRef

    def call() -> bytes:
        ref = function()
        return ctypes.string_at(ref.data, ref.length) if ref.data else b""

    return call


@functools.lru_cache(maxsize=4)
def _package_dir(init_file: str) -> str:
    return os.path.dirname(real_path(init_file))


def _toolchain_files(place: tuple[str, str, str] | None = None) -> str | None:
    """A digest of what FlyDSL's toolchain key reads (at :func:`_toolchain_place`), by file
    metadata, or None where the key reads more.

    The ``flydsl`` package counts by its installation when it is a wheel install (its
    ``.dist-info`` beside the package directory, not editable): the version, and the inode
    and time of the ``.dist-info`` directory and of its ``RECORD`` (any install or reinstall
    writes new ones) - the way flydeps counts every installed library by its version. Any
    other ``flydsl`` (editable, a source tree on ``sys.path``) counts by the size, time and
    inode of every file under the package. The ROCm device bitcode always counts file by
    file: the ``*.bc`` files of its one directory, the files FlyDSL hashes."""
    place = place if place is not None else _toolchain_place()
    if place is None:
        return None
    package, version, bitcode = place
    h = blake3(f"flydsl {version}\0".encode())
    installed = _wheel_install(package, version)
    if installed is not None:
        h.update(installed.encode("utf-8", "surrogatepass"))
    else:
        h.update(f"root {package}\0".encode("utf-8", "surrogatepass"))
        for directory, dirs, files in os.walk(package, followlinks=True):
            dirs.sort()
            h.update(f"directory {directory}\0".encode("utf-8", "surrogatepass"))
            _files_state(h, directory, sorted(files))
    h.update(f"bitcode {bitcode}\0".encode("utf-8", "surrogatepass"))
    try:
        names = sorted(name for name in os.listdir(bitcode) if name.endswith(".bc"))
    except OSError as error:  # FlyDSL's glob finds nothing there either
        names = []
        h.update(f"unlisted {error.errno}\0".encode())
    _files_state(h, bitcode, names)
    return h.hexdigest()


def _files_state(h: Any, directory: str, names: list[str]) -> None:
    """Each file's name, size, time and inode (its target's, through symbolic links) into
    ``h``, a file whose stat fails by its error (:func:`flydeps.store.fsmeta.file_states`: the
    directory opened once, in C where built)."""
    h.update(file_states(directory, names))


def _wheel_install(package: str, version: str) -> str | None:
    """The identity of ``flydsl``'s wheel installation (see :func:`_toolchain_files`), or
    None when ``package`` (a directory) is not one."""
    parent, name = os.path.split(os.path.normpath(package))
    info = os.path.join(parent, f"{name}-{version}.dist-info")
    try:
        dir_stat, record_stat = os.stat(info), os.stat(os.path.join(info, "RECORD"))
    except OSError:
        return None
    try:
        with open(os.path.join(info, "direct_url.json"), encoding="utf-8") as handle:
            direct = json.loads(handle.read())
    except FileNotFoundError:
        direct = {}
    except (OSError, ValueError):
        return None
    if not isinstance(direct, dict):
        return None
    dir_info = direct.get("dir_info")
    if isinstance(dir_info, dict) and dir_info.get("editable"):
        return None
    return (
        f"wheel {info} {dir_stat.st_mtime_ns} {dir_stat.st_ino} "
        f"{record_stat.st_size} {record_stat.st_mtime_ns} {record_stat.st_ino}\0"
    )


# (package, version, bitcode directory) -> (digest of its files, FlyDSL's toolchain key): read
# once per process and place, as FlyDSL reads its own (its key and the bitcode hash are
# memoized per process).
_toolchain_memo: dict[tuple[str, str, str], tuple[str, str]] = {}


def _compute_toolchain_key() -> str:
    """FlyDSL's own ``_flydsl_key()`` (the one :mod:`flydsl_runtime.launch.hooks` wraps), computed."""
    from flydsl.compiler import jit_function as fjf

    return getattr(fjf._flydsl_key, "__flydeps_original__", fjf._flydsl_key)()


def toolchain_key_read_only(path: Path) -> str:
    """:func:`toolchain_key` for a reader (``flydeps aot list``): read back from the index
    file ``path`` or the user cache directory's, never written, and without importing FlyDSL
    (nor torch, which it imports) where :func:`_toolchain_place_unimported` can name its
    place; else, or when no index remembers it, FlyDSL's own, computed."""
    place = _toolchain_place() if "flydsl" in sys.modules else _toolchain_place_unimported()
    files = _toolchain_files(place) if place is not None else None
    if files is not None:
        for store in dict.fromkeys((path, *_toolchain_stores())):
            try:
                conn = sqlitefile.open_read_only(store)
                try:
                    found = conn.execute("SELECT flydsl_key FROM toolchains WHERE files = ?", (files,)).fetchone()
                finally:
                    conn.close()
            except Exception:  # not there, or unreadable: the next store, or FlyDSL computes it
                continue
            if found is not None:
                return str(found[0])
    return _compute_toolchain_key()


# FlyDSL's settings that make its toolchain key read more than its package and the ROCm
# bitcode (extra source directories, an external LLVM, another backend).
_TOOLCHAIN_SETTINGS = ("FLYDSL_EXTRA_SOURCE_DIRS", "FLYDSL_COMPILE_LLVM_DIR", "FLYDSL_COMPILE_BACKEND")


def _toolchain_place_unimported() -> tuple[str, str, str] | None:
    """:func:`_toolchain_place` in a process that has not imported FlyDSL: its package
    found (not run), its version from its installed metadata, the ROCm root asked of its C
    API library (loaded by path: the function ``import flydsl`` would call). None where any
    of it cannot be told that way, or a setting makes the key read more. A place named
    wrongly only misses (its digest is not the one a FlyDSL process remembered), unless its
    ROCm root differs from FlyDSL's, which asking FlyDSL's own function rules out."""
    import importlib.util

    if any(os.environ.get(name, "").strip() for name in _TOOLCHAIN_SETTINGS[:2]):
        return None
    if os.environ.get(_TOOLCHAIN_SETTINGS[2], "rocm").strip().lower() not in ("", "rocm") or os.name != "posix":
        return None
    try:
        spec = importlib.util.find_spec("flydsl")
        flydsl_version = version("flydsl")
    except (ImportError, ValueError, PackageNotFoundError):
        return None
    if spec is None or spec.origin is None or not spec.submodule_search_locations:
        return None
    package = _package_dir(spec.origin)
    libs = os.path.join(package, "_mlir", "_mlir_libs")
    try:
        names = sorted(n for n in os.listdir(libs) if n.startswith("libFlyPythonCAPI.so"))
    except OSError:
        return None
    root = None
    for name in names:
        function = _ctypes_string_ref(os.path.join(libs, name), _ROCM_ROOT_SYMBOL, load=True)
        if function is not None:
            root = function().decode("utf-8", "surrogateescape")
            break
    if not root:
        return None
    return package, flydsl_version, os.path.join(root, "amdgcn", "bitcode")


def toolchain_key() -> str:
    """FlyDSL's toolchain key (``jit_function._flydsl_key()``), remembered in the index (see
    :func:`_toolchain_stores`) by the digest of its files' metadata (:func:`_toolchain_files`):
    a new process with an unchanged toolchain reads it back instead of hashing every source,
    native library and device bitcode file. Within a process it is read once per toolchain
    place, as FlyDSL reads its own."""
    place = _toolchain_place()
    if place is None:
        return _compute_toolchain_key()
    known = _toolchain_memo.get(place)
    if known is not None:
        return known[1]
    files = _toolchain_files(place)
    if files is None:  # pragma: no cover - a place always has files
        return _compute_toolchain_key()
    stores = _toolchain_stores()
    found = None
    for path in stores:
        try:
            found = _connect(path).execute("SELECT flydsl_key FROM toolchains WHERE files = ?", (files,)).fetchone()
        except Exception:  # lookup() and record() report a broken or refused store; here it costs a hash
            found = None
        if found is not None:
            break
    key = found[0] if found is not None else _compute_toolchain_key()
    if found is None and _deferred is None:
        try:
            _connect(stores[-1]).execute("INSERT OR IGNORE INTO toolchains VALUES (?, ?)", (files, key))
        except Exception:  # as above: only a hash in the next process
            pass
    _toolchain_memo[place] = (files, key)
    return key


def remember_toolchain() -> None:
    """Write this process's toolchain key (:func:`toolchain_key`) into the index at
    :func:`index_path` (an AOT build's OUT, whose workers write no index), keyed by the
    digest of its files as :func:`toolchain_key` reads it back. A failure costs only that."""
    key, place = toolchain_key(), _toolchain_place()
    known = _toolchain_memo.get(place) if place is not None else None  # no place: FlyDSL computes its key
    if known is None or known[1] != key:
        return
    try:
        _connect(index_path()).execute("INSERT OR IGNORE INTO toolchains VALUES (?, ?)", known)
    except (sqlite3.Error, OSError, IndexRefused) as error:
        log.debug("flydsl_runtime: toolchain key not remembered in %s: %s", index_path(), error)


def _toolchain_stores() -> tuple[Path, ...]:
    """The index files that remember toolchain keys, read in order, the last one written: the
    index; where this process cannot write it (a shipped directory on a read-only volume,
    whose row names another machine's files), also the index in the user cache directory,
    so the toolchain is hashed once per machine there too, not once per process."""
    return tuple(Path(p) for p in settings.memo_paths(INDEX_NAME, first=str(index_path())))


def disk_key(ir_key: str) -> str:
    """FlyDSL's disk-cache key of an artifact (``jit_function._disk_cache_key``: its IR key
    namespaced by the toolchain key), with the toolchain key from :func:`toolchain_key`."""
    key = disk_key_with(toolchain_key(), ir_key)
    if _uses is not None:
        _uses.artifacts.append(key)
    return key


def disk_key_with(toolchain: str, ir_key: str) -> str:
    """FlyDSL's disk-cache key of ``ir_key`` under the toolchain key ``toolchain``."""
    import hashlib

    return hashlib.sha256(f"{toolchain}\n{ir_key}".encode()).hexdigest()
