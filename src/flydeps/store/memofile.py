"""Private on-disk entries: the file mechanism every flydeps store and memo shares.

Contract
--------
* :func:`private_dir` creates missing cache directories with mode 0700 and refuses (returns
  None after ONE warning per directory and process) a directory that is not owned by the
  current user or that group/others may write (:func:`unsafe_reason`): whoever can write a
  cache decides what the reader believes. A refused or uncreatable store means "run without
  it": answers stay correct, only slower.
* :func:`open_dir` and :func:`open_entry` apply the same rules to a descriptor: a directory
  opened and checked by ``fstat`` (another user's directory only where the caller accepts one
  that group and others cannot write: a shipped, read-only directory, whose owner is trusted
  as whoever installed the code it serves), and a file in it opened relative to that
  descriptor without following a symlink, refused unless it is a regular file owned by a
  trusted user that group and others cannot write (:func:`entry_reason`). They raise
  :class:`Untrusted` naming the path and why; flydsl_runtime's persistent index and its
  reads of FlyDSL's artifacts go through them.
* An entry is one file that starts with the header ``flydeps-store-1 KIND KEY``: read back
  only when the file is a regular file (opened without following symlinks and without
  blocking), at most :data:`MAX_ENTRY_BYTES` long, and its header names exactly the kind
  (which carries the format version) and the key it is looked up under: an entry copied
  from another key or written by another format is a miss (:func:`read_file`). Entries are
  written to a temporary file (0600) beside them and renamed into place (:func:`write_file`),
  so readers never see half an entry; a failed write is logged at debug level.
* :func:`read` / :func:`write` store bytes (a ``marshal`` payload: the distribution index of
  :mod:`flydeps.code.origin`, the code objects of :mod:`flydeps.store.codegen`) after the header with
  the payload's blake3 digest, and return it only exactly as written: a bit changed inside a
  code object, which would still load and then run as a guard, is a miss.
  :mod:`flydeps.static.store` keeps JSON documents in the same entries.

Imports nothing but the standard library and ``blake3``: the first call of a new process
reads these files.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import tempfile
from collections.abc import Callable, Collection
from pathlib import Path

from blake3 import blake3

__all__ = [
    "MAX_ENTRY_BYTES",
    "STORE_FORMAT",
    "Untrusted",
    "check_entry",
    "entry_reason",
    "header",
    "open_dir",
    "open_entry",
    "private_dir",
    "read",
    "read_file",
    "sources_digest",
    "stat_reason",
    "trusted_owners",
    "unsafe_reason",
    "write",
    "write_file",
]

log = logging.getLogger("flydeps")

STORE_FORMAT = "flydeps-store-1"
# An entry larger than this is refused unread (a planted multi-gigabyte file costs nothing).
MAX_ENTRY_BYTES = 256 << 20
_DIGEST = 32
_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_warned: set[tuple[str, str]] = set()


def _uid() -> int | None:
    """The current user's id; None where there are no POSIX owners (Windows)."""
    getuid = getattr(os, "getuid", None)
    return None if getuid is None else getuid()


def stat_reason(info: os.stat_result, owners: Collection[int]) -> str | None:
    """Why a file or directory whose status is ``info`` must not be trusted, or None when it
    may: it is owned by one of ``owners`` and neither group nor others can write it."""
    me = _uid()
    if me is None:  # Windows: no POSIX owners or modes to check
        return None
    if info.st_uid not in owners:
        return f"it is owned by uid {info.st_uid}, not by you (uid {me})"
    if info.st_mode & 0o022:
        return f"group or others can write it (mode {stat.S_IMODE(info.st_mode):04o})"
    return None


def unsafe_reason(path: Path, *, shared: bool = False) -> str | None:
    """Why ``path`` (an existing directory) must not hold a cache, or None when it may:
    it must be a directory owned by the current user (with ``shared``: by any user) that
    neither group nor others can write, or a symlink of the user's or root's to one."""
    return _dir_reason(os.stat(path), path, shared)


def _dir_reason(info: os.stat_result, path: str | os.PathLike[str], shared: bool) -> str | None:
    if not stat.S_ISDIR(info.st_mode):
        return "it is not a directory"
    me = _uid()
    if me is None:
        return None
    reason = stat_reason(info, (info.st_uid,) if shared else (me,))
    if reason is not None:
        return reason
    link = os.lstat(path)
    if stat.S_ISLNK(link.st_mode) and link.st_uid not in (me, 0):
        return f"it is reached through a symlink owned by uid {link.st_uid}"
    return None


class Untrusted(Exception):
    """A directory or file :func:`open_dir` / :func:`open_entry` refused: ``path`` and ``reason``."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        super().__init__(f"{os.fspath(path)}: {reason}")
        self.path, self.reason = os.fspath(path), reason


_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_CREATE_FLAGS = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def open_dir(path: str | os.PathLike[str], *, shared: bool = False) -> tuple[int, os.stat_result]:
    """``path`` opened as a directory (a descriptor the caller closes) and its status, read
    from the descriptor: accepted as :func:`unsafe_reason` accepts a directory, else
    :class:`Untrusted`; ``FileNotFoundError`` (``NotADirectoryError``) when there is none."""
    fd = os.open(path, _DIR_FLAGS)
    return fd, _checked(fd, path, lambda info: _dir_reason(info, path, shared))


def _checked(
    fd: int, path: str | os.PathLike[str], reason_of: Callable[[os.stat_result], str | None]
) -> os.stat_result:
    """The status of the open descriptor ``fd``, if ``reason_of`` finds nothing wrong with it;
    else (or on any error) ``fd`` is closed and :class:`Untrusted` (or the error) raised."""
    try:
        info = os.fstat(fd)
        reason = reason_of(info)
    except BaseException:
        os.close(fd)
        raise
    if reason is not None:
        os.close(fd)
        raise Untrusted(path, reason)
    return info


def trusted_owners(directory: os.stat_result) -> frozenset[int]:
    """Who may own a file in a directory whose status is ``directory``: the current user,
    root, and the directory's owner (who can replace any file in it anyway)."""
    me = _uid()
    return frozenset({directory.st_uid, 0} if me is None else {me, 0, directory.st_uid})


def entry_reason(info: os.stat_result, owners: Collection[int]) -> str | None:
    """Why a directory entry whose ``lstat`` status is ``info`` must not be read (:func:`stat_reason`,
    and it must be a regular file, not a symlink), or None."""
    if stat.S_ISLNK(info.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISREG(info.st_mode):
        return "it is not a regular file"
    return stat_reason(info, owners)


def open_entry(
    name: str, dir_fd: int, owners: Collection[int], *, where: str | os.PathLike[str], create: bool = False
) -> tuple[int, os.stat_result]:
    """The file ``name`` in the directory open as ``dir_fd`` (at ``where``, for messages),
    opened read-only without following a symlink or blocking (with ``create``, a missing
    one created 0600 and opened read-write), and its status from the descriptor; refused
    by :func:`entry_reason` (:class:`Untrusted`); ``FileNotFoundError`` when missing."""
    path = os.path.join(where, name)
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
        try:
            fd = os.open(name, _CREATE_FLAGS, 0o600, dir_fd=dir_fd)
        except FileExistsError:  # another process created it meanwhile: checked as any existing file
            return open_entry(name, dir_fd, owners, where=where)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink
            raise Untrusted(path, "it is a symbolic link") from None
        raise Untrusted(path, f"it cannot be opened ({exc.strerror})") from None
    return fd, _checked(fd, path, lambda info: entry_reason(info, owners))


def open_shared_entry(directory: str | os.PathLike[str], name: str) -> int:
    """The file ``name`` in ``directory`` opened read-only (a descriptor the caller closes)
    once :func:`open_dir` (``shared``: another user's directory no one else can write is
    read) and :func:`open_entry` accepted both; :class:`Untrusted` when refused,
    ``FileNotFoundError`` when either is missing."""
    dir_fd, info = open_dir(directory, shared=True)
    try:
        fd, _info = open_entry(name, dir_fd, trusted_owners(info), where=directory)
    finally:
        os.close(dir_fd)
    return fd


def check_entry(name: str, dir_fd: int, owners: Collection[int], *, where: str | os.PathLike[str]) -> None:
    """Raise :class:`Untrusted` when the entry ``name`` of the directory open as ``dir_fd``
    exists and :func:`entry_reason` refuses it (by ``lstat``: a symlink is refused unread)."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    reason = entry_reason(info, owners)
    if reason is not None:
        raise Untrusted(os.path.join(where, name), reason)


def private_dir(*dirs: Path) -> Path | None:
    """The last of ``dirs`` (outermost first), each created with mode 0700 when missing and
    each checked by :func:`unsafe_reason`; None when one is refused (one warning) or cannot
    be created (a read-only home: debug log only)."""
    for directory in dirs:
        try:
            try:
                reason = unsafe_reason(directory)  # an existing directory: no failing mkdir first
            except FileNotFoundError:
                directory.mkdir(mode=0o700, parents=True, exist_ok=True)
                reason = unsafe_reason(directory)
        except OSError as exc:
            log.debug("running without the cache: cannot create %s: %s", directory, exc)
            return None
        if reason is not None:
            _refuse(directory, reason)
            return None
    return dirs[-1] if dirs else None


def _refuse(directory: Path, reason: str) -> None:
    if (str(directory), reason) in _warned:
        return
    _warned.add((str(directory), reason))
    fix = (
        f"run `chmod 700 {directory}`"
        if reason.startswith("group")
        else "use a directory of your own (`mkdir -m 700 DIR`)"
    )
    log.warning(
        "flydeps: not using the cache directory %s: %s; %s or set FLYDEPS_CACHE_DIR to a "
        "directory only you can write (running without the cache: correct, slower)",
        directory,
        reason,
        fix,
    )


def header(kind: str, key: str) -> bytes:
    """The first line of an entry of ``kind`` stored under ``key``."""
    return f"{STORE_FORMAT} {kind} {key}\n".encode("ascii")


def read_file(path: str | os.PathLike[str], kind: str, key: str) -> bytes | None:
    """What follows the header of the entry at ``path`` for (``kind``, ``key``); None when
    missing, not a regular file, too large, or stored for another kind or key."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a symlink (O_NOFOLLOW), a directory, no permission
        log.debug("ignoring cache entry %s: %s", path, exc)
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
            log.debug("ignoring cache entry %s: not a regular file or too large", path)
            return None
        data = _read_to(fd, info.st_size + 1)
    finally:
        os.close(fd)  # the descriptor alone: a file object costs ~15 µs to build and close
    first = header(kind, key)
    if not data.startswith(first) or len(data) > MAX_ENTRY_BYTES:
        log.debug("ignoring cache entry %s: stored for another key, kind or format", path)
        return None
    return data[len(first) :]


def _read_to(fd: int, expected: int) -> bytes:
    """The file's bytes to its end, at most ``MAX_ENTRY_BYTES + 1``: read in requests sized by
    ``expected`` (its size from fstat, plus one), not by the bound (a read of the bound would
    have CPython allocate, then shrink, a 256 MiB buffer: ~30 µs on a new process's first
    call). One byte more than fstat said shows a file that grew since: then read on."""
    limit = MAX_ENTRY_BYTES + 1
    parts = []
    total = 0
    want = min(expected, limit)
    while total < limit:
        chunk = os.read(fd, want)
        if not chunk:
            break
        parts.append(chunk)
        total += len(chunk)
        want = min(max(want - len(chunk), 1 << 16), limit - total)
    return parts[0] if len(parts) == 1 else b"".join(parts)


def write_file(path: str | os.PathLike[str], kind: str, key: str, body: bytes) -> bool:
    """Store ``body`` under the header of (``kind``, ``key``) at ``path``, atomically;
    False (debug log) when it could not be written or is too large."""
    data = header(kind, key) + body
    if len(data) > MAX_ENTRY_BYTES:
        log.debug("not caching %s: %d bytes", path, len(data))
        return False
    tmp = None
    try:
        parent = os.path.dirname(os.path.abspath(path))
        os.makedirs(parent, mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError as exc:
        log.debug("cannot write cache entry %s: %s", path, exc)
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        return False
    return True


def read(path: str | os.PathLike[str], kind: str, key: str = "-") -> bytes | None:
    """The payload :func:`write` stored at ``path`` for (``kind``, ``key``), or None: see
    :func:`read_file`, and None too when the payload is not exactly as written (its digest)."""
    body = read_file(path, kind, key)
    if body is None or len(body) < _DIGEST:
        return None
    payload = body[_DIGEST:]
    if blake3(payload).digest() != body[:_DIGEST]:
        log.debug("ignoring cache entry %s: damaged (its digest does not match)", path)
        return None
    return payload


def write(path: str | os.PathLike[str], kind: str, payload: bytes, key: str = "-") -> bool:
    """Store ``payload`` with its blake3 digest at ``path`` (see :func:`write_file`)."""
    return write_file(path, kind, key, blake3(payload).digest() + payload)


def sources_digest(h: "blake3", modules: Collection[str]) -> None:
    """Add the source bytes of flydeps' own ``modules`` (dotted names, found where this
    installation keeps them, never imported) to ``h``: the salt of a memo whose entries
    those modules compute, so that editing one of them never reuses an old entry."""
    root = Path(__file__).resolve().parent.parent.parent  # the directory holding flydeps/
    for name in sorted(modules):
        path = root.joinpath(*name.split(".")).with_suffix(".py")
        if not path.exists():
            path = path.with_suffix("") / "__init__.py"
        try:
            h.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
        except OSError:
            h.update(name.encode() + b"\0?\0")
