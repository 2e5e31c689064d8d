"""Managing every cache flydeps and flydsl_runtime write: sizes, clearing, pruning.

Contract
--------
Four caches, by name (:data:`NAMES`), each with a size limit (:func:`limit`):

* ``parse``: the CLI's static parse cache, flow facts and whole-analysis results
  (``$FLYDEPS_CACHE_DIR/static-v*/<xx>/<key>.json``, :mod:`flydeps.static.parse`), limit
  ``FLYDEPS_PARSE_CACHE_MAX_BYTES``; also enforced while it is written
  (:func:`note_parse_write`: about one check every :data:`WRITE_CHECK_EVERY` writes, each
  process starting at a random point of that period, so short runs share the checks).
* ``memo``: the installed-distribution index and the generated-code memo
  (``$FLYDEPS_CACHE_DIR/origin/*.marshal``, ``codegen/<tag>/<key>.marshal``) and
  ``flydeps migrate``'s memo of files that need nothing (``migrate-<n>/<xx>/<key>``), limit
  ``FLYDEPS_MEMO_MAX_BYTES``.
* ``index``: flydsl_runtime's persistent index (``$FLYDEPS_CACHE_DIR/runtime-index-v1.sqlite3``),
  rows deleted through SQLite (its own locks: a process that has the file open keeps a
  consistent view), limit ``FLYDEPS_INDEX_MAX_BYTES`` (as the runtime trims it), measured
  as the pages its rows use. An index an AOT build made is never pruned (only cleared).
* ``artifacts``: FlyDSL's disk cache that the index's rows point to
  (``$FLYDSL_RUNTIME_CACHE_DIR/<function>/<key>.pkl``, default ``~/.flydsl/cache``), each
  file deleted under FlyDSL's own exclusive lock on ``<key>.lock`` (the lock files stay:
  deleting a lock file another process is about to open breaks the lock), limit
  ``FLYDEPS_ARTIFACTS_MAX_BYTES``.

Nothing else is ever deleted: only regular files whose names have the layout above, found
by walking directories opened relative to their parent without following a symbolic link
(a symlink anywhere below a cache root is skipped, never followed or removed), owned by
the current user, and (``parse``, ``memo``) starting with the header of
:mod:`flydeps.store.memofile` entries; a file replaced since it was listed is kept. A cache root
and every directory walked below it must pass :func:`flydeps.store.memofile.unsafe_reason` (the
current user's, group and others cannot write it), as the writers require: otherwise
:func:`clear` and :func:`prune` raise :class:`CacheError` naming the directory before
anything is deleted, and :func:`stats` reports the problem. Least recently used means the
latest of a file's access and modification times (under ``relatime`` mounts, access
times are updated about once a day), and a row's creation time for the index.
Bad arguments (an unknown cache name, a size such as ``12Q``) raise :class:`CacheError`.

Imports nothing but the standard library, :mod:`flydeps.store.memofile`, :mod:`flydeps.settings`
and :mod:`flydeps.errors` (never FlyDSL): the parse cache's writers call it.
"""

from __future__ import annotations

import errno
import logging
import os
import random
import re
import sqlite3
import stat
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .. import settings
from ..errors import FlydepsError
from . import memofile as _memofile

__all__ = [
    "NAMES",
    "SCHEMA",
    "WRITE_CHECK_EVERY",
    "CacheError",
    "CacheStats",
    "Removed",
    "clear",
    "enforce_parse_limit",
    "limit",
    "note_parse_write",
    "parse_size",
    "prune",
    "resolve_names",
    "stats",
    "stats_document",
]

log = logging.getLogger("flydeps")

#: The JSON schema of ``flydeps cache stats --json`` (:func:`stats_document`).
SCHEMA = "flydeps.cache-stats/1"
NAMES = ("parse", "memo", "index", "artifacts")
_LIMITS = {
    "parse": ("FLYDEPS_PARSE_CACHE_MAX_BYTES", 1 << 30),
    "memo": ("FLYDEPS_MEMO_MAX_BYTES", 64 << 20),
    "index": ("FLYDEPS_INDEX_MAX_BYTES", 256 << 20),
    "artifacts": ("FLYDEPS_ARTIFACTS_MAX_BYTES", 4 << 30),
}
_WHAT = {
    "parse": "static parse, flow-fact and result cache",
    "memo": "distribution index and generated-code memos",
    "index": "flydsl_runtime persistent index",
    "artifacts": "FlyDSL artifacts",
}
# The runtime index's file (flydsl_runtime.persist.index.INDEX_NAME; not imported: that imports FlyDSL).
INDEX_NAME = "runtime-index-v1.sqlite3"
_AOT_BUILT = 0x464C4441  # PRAGMA application_id of an index an AOT build made (flydsl_runtime.persist.index)
#: The parse cache's size is checked about once per this many entries written.
WRITE_CHECK_EVERY = 1024
# How long clear/prune wait for FlyDSL's lock on one artifact before leaving it.
LOCK_TIMEOUT = 10.0
_SQLITE_TIMEOUT = 30.0

_ENTRY_HEADER = (_memofile.STORE_FORMAT + " ").encode("ascii")
_NOFOLLOW_DIR = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW_READ = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_SIZE = re.compile(r"(\d+(?:\.\d*)?)([kmgt]?)(?:i?b)?", re.IGNORECASE)


class CacheError(FlydepsError, ValueError):
    """A bad argument (an unknown cache name, a malformed size) or a cache directory that may
    not be trusted; the message names it and says what to do (the CLI exits 2)."""


@dataclass(frozen=True)
class CacheStats:
    """One cache: where it is, how many entries and bytes, its limit, the oldest and newest
    use (seconds since the epoch, None when empty) and why it cannot be used (or None)."""

    name: str
    what: str
    locations: tuple[str, ...]
    entries: int
    bytes: int
    limit: int
    oldest: float | None
    newest: float | None
    problem: str | None = None


@dataclass(frozen=True)
class Removed:
    """What :func:`clear` or :func:`prune` did to one cache: entries and bytes deleted;
    ``notes`` (an AOT build's index left unpruned, a busy index not compacted) and
    ``problems``: entries that could not be deleted (in use, unreadable), each naming its file."""

    name: str
    entries: int
    bytes: int
    notes: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


# --- arguments -------------------------------------------------------------------------


def parse_size(text: str, *, argument: str = "--max-size") -> int:
    """``text`` as a number of bytes: digits with an optional K, M, G or T (powers of 1024;
    ``KiB``/``KB`` spellings accepted), e.g. ``500M``, ``2G``, ``1.5G``; :class:`CacheError`
    naming ``argument`` otherwise."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise CacheError(
            f"{argument} {text!r} is not a size: give a number of bytes, optionally followed by K, M, G or T "
            "(powers of 1024), such as 500M or 2G"
        )
    unit = 1024 ** " kmgt".index(match.group(2).lower() or " ")
    return int(float(match.group(1)) * unit)


def resolve_names(requested: Sequence[str]) -> tuple[str, ...]:
    """The caches ``requested`` names, in :data:`NAMES` order (all when empty); an unknown
    name raises :class:`CacheError`."""
    for name in requested:
        if name not in NAMES:
            raise CacheError(f"unknown cache {name!r}: give one or more of {', '.join(NAMES)} (or none for all)")
    return tuple(n for n in NAMES if not requested or n in requested)


def limit(name: str) -> int:
    """The size limit of cache ``name`` from its setting (``SettingError`` on a bad value)."""
    variable, default = _LIMITS[name]
    return settings.integer(variable, default)


# --- where each cache is ---------------------------------------------------------------


@dataclass(frozen=True)
class _Layout:
    """Files of a cache below its root: directories matching ``dirs`` (one pattern per
    level), then file names matching ``files``; ``header``: each starts as a
    :mod:`flydeps.store.memofile` entry; ``locked``: FlyDSL's ``<stem>.lock`` guards each."""

    dirs: tuple[re.Pattern[str], ...]
    files: re.Pattern[str]
    header: bool = True
    locked: bool = False


def _exact(name: str) -> re.Pattern[str]:
    return re.compile(re.escape(name))


_LAYOUTS: dict[str, tuple[_Layout, ...]] = {
    "parse": (
        _Layout((re.compile(r"static-v\d+-[\w.-]+"), re.compile(r"[0-9a-z]{2}")), re.compile(r"[0-9a-z-]+\.json")),
    ),
    "memo": (
        _Layout((_exact("origin"),), re.compile(r"(?:index-[0-9a-f]+|installed)\.marshal")),
        _Layout((_exact("codegen"), re.compile(r"[\w.-]+")), re.compile(r"[0-9a-f]{64}\.marshal")),
        # flydeps migrate's files-needing-nothing memo (flydeps.migrate.memo.Memo)
        _Layout((re.compile(r"migrate-\d+"), re.compile(r"[0-9a-f]{2}")), re.compile(r"[0-9a-f]{64}")),
    ),
    "artifacts": (_Layout((re.compile(r"[^.][^/]*"),), re.compile(r"[0-9a-f]{64}\.pkl"), header=False, locked=True),),
}


def _artifacts_root() -> Path:
    """FlyDSL's disk cache directory as FlyDSL reads it (``FLYDSL_RUNTIME_CACHE_DIR``, else
    ``~/.flydsl/cache``), without importing FlyDSL."""
    configured = os.environ.get("FLYDSL_RUNTIME_CACHE_DIR", "").strip()
    return Path(configured) if configured else Path.home() / ".flydsl" / "cache"


def _root(name: str) -> Path:
    return _artifacts_root() if name == "artifacts" else Path(settings.cache_root())


def _locations(name: str) -> tuple[str, ...]:
    root = _root(name)
    if name == "index":
        return (str(root / INDEX_NAME),)
    if name == "parse":
        return (str(root / "static-v*"),)
    if name == "memo":
        return (str(root / "origin"), str(root / "codegen"), str(root / "migrate-*"))
    return (str(root),)


# --- walking files without following symlinks ------------------------------------------


@dataclass(frozen=True)
class _File:
    parts: tuple[str, ...]  # directories below the root, then the file name
    size: int
    used: float
    ident: tuple[int, int]  # (st_dev, st_ino) when listed


def _me() -> int:
    return getattr(os, "getuid", lambda: -1)()


@contextmanager
def _opened_root(root: Path) -> Iterator[int | None]:
    """The cache root opened and checked (the user's own, group and others cannot write it;
    :class:`CacheError` otherwise); None when it does not exist."""
    try:
        fd, _info = _memofile.open_dir(root)
    except (FileNotFoundError, NotADirectoryError):
        if root.is_symlink() or (root.exists() and not root.is_dir()):
            raise CacheError(f"{root}: not a directory; set FLYDEPS_CACHE_DIR to a directory") from None
        yield None
        return
    except _memofile.Untrusted as why:
        raise _untrusted(why.path, why.reason) from None
    try:
        yield fd
    finally:
        os.close(fd)


def _untrusted(path: str, reason: str) -> CacheError:
    return CacheError(
        f"{path}: not a cache directory flydeps may trust ({reason}); nothing was deleted. Make it yours and "
        "private (`chmod 700`), or point FLYDEPS_CACHE_DIR / FLYDSL_RUNTIME_CACHE_DIR at a directory only you can write"
    )


def _subdir(name: str, dir_fd: int, where: str) -> int | None:
    """The directory ``name`` in ``dir_fd`` opened without following a symlink (None: a
    symlink or not a directory, skipped); :class:`CacheError` when another user could write it."""
    try:
        fd = os.open(name, _NOFOLLOW_DIR, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
            return None
        raise
    info = os.fstat(fd)
    reason = _memofile.stat_reason(info, (_me(),))
    if reason is not None:
        os.close(fd)
        raise _untrusted(os.path.join(where, name), reason)
    return fd


def _walk(root_fd: int, root: Path, layout: _Layout) -> list[_File]:
    """Every file of ``layout`` below the root (see the module's contract)."""
    found: list[_File] = []
    me = _me()

    def visit(fd: int, parts: tuple[str, ...], level: int) -> None:
        where = os.path.join(root, *parts)
        with os.scandir(fd) as entries:
            names = [(e.name, e.stat(follow_symlinks=False)) for e in entries]
        for name, info in names:
            if level < len(layout.dirs):
                if stat.S_ISDIR(info.st_mode) and layout.dirs[level].fullmatch(name):
                    sub = _subdir(name, fd, where)
                    if sub is not None:
                        try:
                            visit(sub, (*parts, name), level + 1)
                        finally:
                            os.close(sub)
            elif stat.S_ISREG(info.st_mode) and layout.files.fullmatch(name) and info.st_uid in (me, -1):
                used = max(info.st_atime, info.st_mtime)
                found.append(_File((*parts, name), info.st_size, used, (info.st_dev, info.st_ino)))

    visit(root_fd, (), 0)
    return found


def _files(name: str) -> list[_File]:
    """Every file of the cache ``name`` (a file-based one); :class:`CacheError` when a
    directory may not be trusted."""
    root = _root(name)
    with _opened_root(root) as fd:
        if fd is None:
            return []
        return [f for layout in _LAYOUTS[name] for f in _walk(fd, root, layout)]


def _layout_of(name: str, parts: tuple[str, ...]) -> _Layout:
    return next(lay for lay in _LAYOUTS[name] if len(lay.dirs) == len(parts) - 1 and lay.dirs[0].fullmatch(parts[0]))


def _delete(name: str, files: Sequence[_File]) -> tuple[int, int, list[str]]:
    """Delete ``files`` of cache ``name`` (listed by :func:`_files`): (count, bytes, why
    some were kept)."""
    count = size = 0
    kept: list[str] = []
    root = _root(name)
    with _opened_root(root) as root_fd:
        if root_fd is None:
            return 0, 0, []
        for file in files:
            layout = _layout_of(name, file.parts)
            try:
                done = _delete_one(root_fd, root, file, layout)
            except OSError as exc:
                done = f"{os.path.join(root, *file.parts)}: {exc.strerror or exc}"
            if done is None:
                count, size = count + 1, size + file.size
            elif done:
                kept.append(done)
    return count, size, kept


def _delete_one(root_fd: int, root: Path, file: _File, layout: _Layout) -> str | None:
    """Unlink one listed file: None when deleted, '' when it is gone or was replaced since
    (kept silently), else why it was kept."""
    fd = root_fd
    opened: list[int] = []
    try:
        for part in file.parts[:-1]:
            sub = _subdir(part, fd, str(root))
            if sub is None:
                return ""
            opened.append(sub)
            fd = sub
        leaf = file.parts[-1]
        if layout.locked:
            return _delete_locked(fd, leaf, file, os.path.join(root, *file.parts))
        if not _same(fd, leaf, file):
            return ""
        if layout.header and not _has_header(fd, leaf):
            return ""
        os.unlink(leaf, dir_fd=fd)
        return None
    except FileNotFoundError:
        return ""
    finally:
        for sub in opened:
            os.close(sub)


def _same(dir_fd: int, leaf: str, file: _File) -> bool:
    """``leaf`` is still the regular file (no symlink) that was listed."""
    info = os.stat(leaf, dir_fd=dir_fd, follow_symlinks=False)
    return stat.S_ISREG(info.st_mode) and (info.st_dev, info.st_ino) == file.ident


def _has_header(dir_fd: int, leaf: str) -> bool:
    """``leaf`` starts as a :mod:`flydeps.store.memofile` entry (a file flydeps wrote)."""
    fd = os.open(leaf, _NOFOLLOW_READ, dir_fd=dir_fd)
    try:
        return os.read(fd, len(_ENTRY_HEADER)) == _ENTRY_HEADER
    finally:
        os.close(fd)


def _delete_locked(dir_fd: int, leaf: str, file: _File, shown: str) -> str | None:
    """Unlink an artifact under FlyDSL's exclusive lock on its ``.lock`` file (as FlyDSL
    writes and reads it); kept when the lock is not had within :data:`LOCK_TIMEOUT`."""
    import fcntl

    lock = leaf[: -len(".pkl")] + ".lock"
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(lock, flags, 0o600, dir_fd=dir_fd)
    except OSError as exc:
        return f"{shown}: its lock file cannot be opened ({exc.strerror or exc})"
    try:
        deadline = time.monotonic() + LOCK_TIMEOUT
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    return f"{shown}: in use (FlyDSL's lock is held by another process)"
                time.sleep(0.05)
        if not _same(dir_fd, leaf, file):
            return ""
        os.unlink(leaf, dir_fd=dir_fd)
        return None
    finally:
        os.close(fd)  # releases the lock


# --- the runtime index (SQLite) --------------------------------------------------------


@contextmanager
def _index(*, write: bool) -> Iterator[sqlite3.Connection | None]:
    """The runtime index, checked as flydsl_runtime checks it (its directory the user's own
    and private, the file and its journal files regular files of a trusted owner, no
    symlink) and opened by SQLite only if the path still names the checked file; None when
    there is none. :class:`CacheError` when it may not be trusted."""
    root = _root("index")
    path = root / INDEX_NAME
    with _opened_root(root) as dir_fd:
        if dir_fd is None:
            yield None
            return
        owners = _memofile.trusted_owners(os.fstat(dir_fd))
        try:
            fd, checked = _memofile.open_entry(INDEX_NAME, dir_fd, owners, where=root)
        except FileNotFoundError:
            yield None
            return
        except _memofile.Untrusted as why:
            raise _untrusted(why.path, why.reason) from None
        os.close(fd)
        try:
            for suffix in ("-wal", "-shm", "-journal"):
                _memofile.check_entry(INDEX_NAME + suffix, dir_fd, owners, where=root)
        except _memofile.Untrusted as why:
            raise _untrusted(why.path, why.reason) from None
    uri = f"file:{urllib.parse.quote(str(path))}?mode={'rw' if write else 'ro'}"
    conn = sqlite3.connect(uri, uri=True, timeout=_SQLITE_TIMEOUT, isolation_level=None)
    try:
        now = os.stat(path, follow_symlinks=False)
        if (now.st_dev, now.st_ino) != (checked.st_dev, checked.st_ino):
            raise _untrusted(str(path), "it was replaced while being checked")
        yield conn
    finally:
        conn.close()


def _pragma(conn: sqlite3.Connection, name: str) -> int:
    return int(conn.execute(f"PRAGMA {name}").fetchone()[0])


def _used_bytes(conn: sqlite3.Connection) -> int:
    return (_pragma(conn, "page_count") - _pragma(conn, "freelist_count")) * _pragma(conn, "page_size")


def _index_stats() -> CacheStats:
    locations = _locations("index")
    path = Path(locations[0])
    with _index(write=False) as conn:
        if conn is None:
            return CacheStats("index", _WHAT["index"], locations, 0, 0, limit("index"), None, None)
        count, oldest, newest = conn.execute(
            "SELECT count(*), min(created), max(created) FROM specializations"
        ).fetchone()
        size = sum(_size(Path(f"{path}{suffix}")) for suffix in ("", "-wal"))
    return CacheStats("index", _WHAT["index"], locations, int(count), size, limit("index"), oldest, newest)


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size
    except FileNotFoundError:
        return 0


def _index_delete(max_bytes: int | None) -> Removed:
    """Delete every row (``max_bytes`` None) or the oldest rows until the rows' pages take at
    most ``max_bytes``, in transactions SQLite locks; then give the pages back (``VACUUM``,
    skipped while another process holds the file busy)."""
    with _index(write=True) as conn:
        if conn is None:
            return Removed("index", 0, 0)
        before = sum(_size(Path(f"{_locations('index')[0]}{s}")) for s in ("", "-wal"))
        if max_bytes is not None and _pragma(conn, "application_id") == _AOT_BUILT:
            return Removed("index", 0, 0, (f"{_locations('index')[0]}: an AOT build's index is never pruned",))
        deleted = 0
        while True:
            conn.execute("BEGIN IMMEDIATE")
            try:
                rows = int(conn.execute("SELECT count(*) FROM specializations").fetchone()[0])
                used = _used_bytes(conn)
                if max_bytes is None:
                    excess = rows
                elif used <= max_bytes or rows == 0:
                    excess = 0
                else:  # rows in proportion to the excess bytes, at least one
                    excess = max(1, rows - int(rows * max_bytes / used))
                if excess:
                    conn.execute(
                        "DELETE FROM specializations WHERE rowid IN "
                        "(SELECT rowid FROM specializations ORDER BY created LIMIT ?)",
                        (excess,),
                    )
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")
            deleted += excess
            if not excess or max_bytes is None:
                break
        notes: tuple[str, ...] = ()
        if deleted:
            try:
                conn.execute("VACUUM")
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.OperationalError as error:  # busy: the pages are reused by later rows
                notes = (f"{_locations('index')[0]}: file not compacted ({error})",)
        after = sum(_size(Path(f"{_locations('index')[0]}{s}")) for s in ("", "-wal"))
    return Removed("index", deleted, max(0, before - after), notes)


# --- the public operations -------------------------------------------------------------


def stats(names: Sequence[str] = ()) -> list[CacheStats]:
    """Each requested cache's :class:`CacheStats` (all when ``names`` is empty); a cache that
    may not be trusted or cannot be read has ``problem`` set."""
    out = []
    for name in resolve_names(names):
        try:
            out.append(_stats(name))
        except (CacheError, OSError, sqlite3.Error) as error:
            if isinstance(error, OSError):
                problem = f"{error.filename}: {error.strerror}"
            elif isinstance(error, sqlite3.Error):
                problem = f"{_locations(name)[0]}: not a readable index ({error})"
            else:
                problem = str(error)
            out.append(CacheStats(name, _WHAT[name], _locations(name), 0, 0, limit(name), None, None, problem))
    return out


def _stats(name: str) -> CacheStats:
    if name == "index":
        return _index_stats()
    files = _files(name)
    used = [f.used for f in files]
    return CacheStats(
        name,
        _WHAT[name],
        _locations(name),
        len(files),
        sum(f.size for f in files),
        limit(name),
        min(used, default=None),
        max(used, default=None),
    )


def stats_document(found: Sequence[CacheStats]) -> dict[str, object]:
    """The JSON document of ``flydeps cache stats --json`` (schema :data:`SCHEMA`)."""
    return {
        "schema": SCHEMA,
        "caches": [
            {
                "name": s.name,
                "what": s.what,
                "locations": list(s.locations),
                "entries": s.entries,
                "bytes": s.bytes,
                "limit": s.limit,
                "oldest": s.oldest,
                "newest": s.newest,
                "problem": s.problem,
            }
            for s in found
        ],
        "total": {"entries": sum(s.entries for s in found), "bytes": sum(s.bytes for s in found)},
    }


def _checked(names: Sequence[str]) -> dict[str, list[_File]]:
    """Every requested file-based cache listed (and every directory checked) before anything
    is deleted: :class:`CacheError` for the first one that may not be trusted."""
    listed: dict[str, list[_File]] = {}
    for name in names:
        if name == "index":
            with _index(write=False):
                pass
        else:
            listed[name] = _files(name)
    return listed


def clear(names: Sequence[str] = ()) -> list[Removed]:
    """Delete every entry of the requested caches (all when empty); :class:`CacheError`, with
    nothing deleted, when a name is unknown or a cache directory may not be trusted."""
    chosen = resolve_names(names)
    listed = _checked(chosen)
    out = []
    for name in chosen:
        if name == "index":
            out.append(_index_delete_safely(None))
        else:
            count, size, kept = _delete(name, listed[name])
            out.append(Removed(name, count, size, problems=tuple(kept)))
    return out


def prune(names: Sequence[str] = (), max_size: int | None = None) -> list[Removed]:
    """Delete the least recently used entries of each requested cache until it takes at most
    ``max_size`` bytes (each cache's :func:`limit` when None); errors as :func:`clear`."""
    chosen = resolve_names(names)
    limits = {name: limit(name) if max_size is None else max_size for name in chosen}
    listed = _checked(chosen)
    out = []
    for name in chosen:
        if name == "index":
            out.append(_index_delete_safely(limits[name]))
        else:
            count, size, kept = _delete(name, _oldest_over(listed[name], limits[name]))
            out.append(Removed(name, count, size, problems=tuple(kept)))
    return out


def _index_delete_safely(max_bytes: int | None) -> Removed:
    """:func:`_index_delete`; a file SQLite cannot use (damaged, not SQLite, locked for too
    long) is left as it is and named."""
    try:
        return _index_delete(max_bytes)
    except sqlite3.Error as error:
        return Removed("index", 0, 0, problems=(f"{_locations('index')[0]}: left as it is: {error}",))


def _oldest_over(files: Sequence[_File], max_bytes: int) -> list[_File]:
    """The least recently used of ``files`` whose removal brings their total to ``max_bytes``."""
    total = sum(f.size for f in files)
    gone = []
    for file in sorted(files, key=lambda f: (f.used, f.parts)):
        if total <= max_bytes:
            break
        gone.append(file)
        total -= file.size
    return gone


# --- the parse cache's limit while it is written ---------------------------------------

# Writes until the next check; starts at a random point of the period, so processes that
# write a few entries each still check about once per WRITE_CHECK_EVERY writes in all.
_until_check = random.randrange(1, WRITE_CHECK_EVERY + 1)


def note_parse_write() -> None:
    """One entry was written to the parse cache (under :func:`settings.cache_root`): about
    once per :data:`WRITE_CHECK_EVERY` calls, :func:`enforce_parse_limit`. Never raises."""
    global _until_check
    _until_check -= 1
    if _until_check > 0:
        return
    _until_check = WRITE_CHECK_EVERY
    try:
        enforce_parse_limit()
    except Exception as error:  # a bad setting, an unreadable directory: the run goes on
        log.debug("flydeps: parse cache size not checked: %s", error)


def enforce_parse_limit() -> int:
    """When the parse cache takes more than its limit, delete its least recently used
    entries down to 3/4 of it (so the next checks find room); the number deleted."""
    cap = limit("parse")
    files = _files("parse")
    if sum(f.size for f in files) <= cap:
        return 0
    count, size, _kept = _delete("parse", _oldest_over(files, cap * 3 // 4))
    log.info("flydeps: parse cache over %d bytes: %d least recently used entries (%d bytes) deleted", cap, count, size)
    return count
