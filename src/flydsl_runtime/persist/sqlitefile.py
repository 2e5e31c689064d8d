"""How this process opens an SQLite file, by where the file lives.

Contract
--------
Reads the file system, never writes it. (Whether this process may create or write a file
is ``flydeps.settings.can_write_file``.) :func:`on_network_fs` says whether a
directory is on a file system hosts share over a network (``/proc/self/mountinfo``), where
SQLite's WAL mode does not work (it shares memory within one host): a file created there is
for the rollback journal. :func:`open_read_only` opens a file this process cannot write:
SQLite reads a rollback-journal file read-only with its usual locks; a WAL file needs its
``-shm`` beside it, so on a read-only mount, with nothing in its write-ahead log, it is
opened ``immutable`` (no locks: nothing writes through a read-only mount); otherwise, and
for a rollback journal a writer died in (SQLite must roll it back first), the error stands
and says what to do.

SQLite opens a file by its path. :func:`open_checked` opens one the caller checked through
a descriptor (:func:`flydeps.store.memofile.open_entry`: no symlink, a regular file of a trusted
owner) and makes sure SQLite opened that very file: on Linux, one of the descriptors the
connection opened (``/proc/self/fd``, listed before and after, under one lock) is the
checked inode, or (SQLite reused a descriptor it kept for that file) no new one is another
file than its journal files and the path still names it; elsewhere, the path still names
it after the open. Otherwise it raises
:class:`flydeps.store.memofile.Untrusted` (the file was replaced between the check and the
open). The read-write open never creates the file (``mode=rw``): the caller created it
0600 without following a symlink.
"""

from __future__ import annotations

import os
import sqlite3
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from flydeps.store.memofile import Untrusted

__all__ = ["NETWORK_FS", "fs_type", "on_network_fs", "open_checked", "open_read_only"]

# File system types that hosts share over a network (``/proc/self/mountinfo``'s names).
NETWORK_FS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "afs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs", "9p", "panfs"}
    | {"fuse.sshfs", "fuse.glusterfs", "fuse.ceph", "fuse.gcsfuse", "fuse.s3fs", "fuse.juicefs", "ocfs2", "gfs2"}
)


def on_network_fs(directory: Path) -> bool:
    """``directory`` is on a file system shared over a network (by :func:`fs_type`)."""
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="surrogateescape") as file:
            mountinfo = file.read()
    except OSError:  # not Linux: WAL, as SQLite's default advice
        return False
    return fs_type(os.path.realpath(directory), mountinfo) in NETWORK_FS


def fs_type(path: str, mountinfo: str) -> str | None:
    """The type of the file system ``path`` (absolute, resolved) is on, by the innermost
    mount point containing it in ``mountinfo`` (``/proc/self/mountinfo``'s text)."""
    best, kind = -1, None
    for line in mountinfo.splitlines():
        fields, _, rest = line.partition(" - ")
        parts = fields.split()
        if len(parts) < 5 or not rest:
            continue
        point = parts[4].replace("\\040", " ").replace("\\011", "\t").replace("\\012", "\n").replace("\\134", "\\")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= best:  # a later mount on the same point hides an earlier one
            best, kind = len(point), rest.split()[0]
    return kind


def open_read_only(path: Path) -> sqlite3.Connection:
    """``path`` opened read-only (see the module's contract); raises ``sqlite3.Error`` when
    it cannot be read."""
    uri = path.resolve().as_uri()

    def opened(query: str) -> sqlite3.Connection:
        conn = sqlite3.connect(f"{uri}?{query}", uri=True, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA user_version").fetchone()  # opens the file (and its log)
        except sqlite3.Error:
            conn.close()
            raise
        return conn

    try:
        return opened("mode=ro")
    except sqlite3.OperationalError as error:
        if not _in_wal_mode(path):  # a rollback journal left by a writer that died: not for us to undo
            raise
        if not _on_read_only_mount(path):
            todo = "make the directory writable for this user"
        elif _log_is_empty(path):
            return opened("mode=ro&immutable=1")
        else:
            todo = "its write-ahead log holds rows the file does not: copy it again after its last writer closed it"
        raise sqlite3.OperationalError(
            f"{error} (an index in WAL mode that this process cannot write beside: {todo}, or rebuild "
            "it with `flydeps aot build`, which leaves it readable without write access)"
        ) from None


_open_lock = threading.Lock()


def open_checked(path: Path, checked: os.stat_result, *, read_only: bool) -> sqlite3.Connection:
    """``path`` opened by SQLite (read-only by :func:`open_read_only`, else read-write without
    creating it), after the caller checked the file it names (``checked``: its ``fstat``):
    :class:`flydeps.store.memofile.Untrusted` when SQLite opened another file."""

    def read_write() -> sqlite3.Connection:
        uri = f"{path.absolute().as_uri()}?mode=rw"
        conn = sqlite3.connect(uri, uri=True, timeout=30.0, isolation_level=None, check_same_thread=False)
        try:
            conn.execute("PRAGMA user_version").fetchone()  # opens the file (and its log)
        except BaseException:
            conn.close()
            raise
        return conn

    connect: Callable[[], sqlite3.Connection] = (lambda: open_read_only(path)) if read_only else read_write
    with _open_lock:  # no other connection opens meanwhile: the new descriptors are this one's
        before = _descriptors()
        conn = connect()
        same = _opened(before, checked, path) if before is not None else _names(path, checked)
    if not same:
        conn.close()
        raise Untrusted(path, "it was replaced by another file while it was opened")
    return conn


_FD_DIR = "/proc/self/fd"


def _descriptors() -> set[str] | None:
    """This process's open descriptors (Linux), or None where they cannot be listed. Not the
    one the listing itself used (closed by now: the next file opened may take its number)."""
    try:
        names = os.listdir(_FD_DIR)
    except OSError:
        return None
    numbers = sorted(int(name) for name in names)
    for fd in numbers:  # the listing took the lowest free number: every one below it is open
        try:
            os.fstat(fd)
        except OSError:
            numbers.remove(fd)
            break
    return {str(fd) for fd in numbers}


def _opened(before: set[str], checked: os.stat_result, path: Path) -> bool:
    """SQLite's connection to ``path`` (opened since ``before`` was listed) is to the file
    ``checked`` describes: a descriptor opened since is that file; or SQLite took one it had
    kept open for that file (it keeps a closed connection's descriptor while another
    connection of the process holds a lock on it, and reuses it for the same file) - then
    no new descriptor is another regular file than its journal files, and ``path`` still
    names the checked file."""
    ours = (checked.st_dev, checked.st_ino)
    others = []
    for name in set(os.listdir(_FD_DIR)) - before:
        try:
            info = os.stat(os.path.join(_FD_DIR, name))
        except OSError:
            continue
        if (info.st_dev, info.st_ino) == ours:
            return True
        if stat.S_ISREG(info.st_mode):
            others.append((info.st_dev, info.st_ino))
    journals = set()
    for suffix in ("-wal", "-shm", "-journal"):
        try:
            info = os.lstat(f"{path}{suffix}")
        except OSError:
            continue
        journals.add((info.st_dev, info.st_ino))
    return all(other in journals for other in others) and _names(path, checked)


def _names(path: Path, checked: os.stat_result) -> bool:
    """``path`` names the file ``checked`` describes (without following a symlink)."""
    try:
        info = os.lstat(path)
    except OSError:
        return False
    return (info.st_dev, info.st_ino) == (checked.st_dev, checked.st_ino)


def _on_read_only_mount(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # AttributeError: no statvfs on this platform
        return False


def _in_wal_mode(path: Path) -> bool:
    """The SQLite file at ``path`` is in WAL mode (its header's format version bytes are 2)."""
    try:
        with open(path, "rb") as file:
            header = file.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"


def _log_is_empty(path: Path) -> bool:
    try:
        return os.stat(f"{path}-wal").st_size == 0
    except FileNotFoundError:
        return True
    except OSError:
        return False
