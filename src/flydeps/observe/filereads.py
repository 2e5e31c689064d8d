"""Files and directory listings a build reads: recorded while it runs, re-checked after.

Contract
--------
While a recording of :mod:`flydeps.observe.environ` is active in a thread, every regular file that
thread opens for reading and every directory it lists is noted as a *derived read* of the
build (names start with ``=``, which no environment variable's can):

* ``=file:PATH`` -> ``"b3:<blake3 of the bytes>"``, ``None`` when the file is absent,
  ``"unreadable:<errno>"`` when it cannot be read;
* ``=listdir:PATH`` -> ``"b3:<blake3 of the sorted names>"``, ``None`` when absent;
* ``=stat:VIEW:PATH`` -> what a metadata check answered: ``os.stat`` / ``os.lstat`` (VIEW
  prefixed ``l``) and what the standard library builds on them, seen through an ``os.stat``
  / ``os.lstat`` of ours put in the ``os`` module (and CPython 3.10 pathlib's accessor) only
  while some thread records (outside recordings the process runs the builtins). VIEW is
  what the caller asked, named by the outermost ``os.path`` / ``pathlib`` function between
  it and the stat: ``exists`` (``exists``, ``lexists``) -> ``"exists"``; ``type`` (``isfile``, ``isdir``, ``islink``,
  ``Path.is_*``) -> ``"type:<S_IFMT octal>"``; ``size`` (``getsize``) -> ``"size:<n>"``;
  ``link`` (``realpath``, ``Path.resolve``) -> the type, and a link's inode and mtime (a
  retargeted link is a new one); ``meta`` (``os.stat`` / ``Path.stat`` asked directly) ->
  mode, size, mtime, device, inode, links, owner (not the access and change times). Absent:
  ``None``; unreadable: ``unreadable:<errno>``. Not seen: a stat by descriptor or with
  ``dir_fd``, ``os.access``, ``os.scandir`` entries' cached answers (the listing is keyed),
  and a module that bound ``os.stat`` under its own name before the recording.

PATH is the path as the build gave it (``str`` or ``os.fsdecode`` of ``bytes``): a relative
path is re-read relative to the working directory of the process that checks, as the build
would read it there (re-resolved, rather than keying the working directory: a ``chdir`` into
a directory where every such path answers the same keeps the entry, one where any answers
otherwise does not). Seen through CPython's ``open``, ``os.listdir`` and ``os.scandir`` audit
events: ``open()``, ``io.open``, ``os.open``, ``pathlib`` reads, ``json.load(open(...))``,
``numpy.load(path)``, ``glob``, ``Path.iterdir``.

Not noted, because the key holds them otherwise or they are not inputs:

* opens for writing, opens of anything but a regular file (directories, devices, pipes);
* files and directories the build itself created or emptied before reading them (``w``/``x``
  opens, ``O_TRUNC``, ``O_CREAT | O_EXCL``, ``os.mkdir``: a temporary file written and read
  back, ``tempfile.mkdtemp``): what it reads there is its own output. A file it appended
  to or rewrote in place (``a``, ``r+``) stays an input;
* the import system's reads (``importlib._bootstrap`` on the stack): a module's code is
  walked by the fingerprint;
* reads by flydeps, flydsl_runtime and FlyDSL themselves (their caches, locks, the source
  FlyDSL re-reads for locations): their behaviour is keyed by their versions. A read is
  attributed to the nearest calling frame that is user code or one of these, walking
  through the standard library and other libraries (``numpy.load(path)`` called by a
  kernel is the kernel's read);
* files under library directories (stdlib, site-packages), unless they belong to a package
  named in ``FLYDEPS_USER_PACKAGES``: counted by their distribution (its version and RECORD);
* opens by file descriptor (``open(fd)``) and relative to one (``os.open(name, dir_fd=fd)``:
  the audit event does not carry ``dir_fd``; documented in docs/guarantees.md).

Values are computed when the build opens the file (before it reads). Re-checks
(:meth:`flydeps.observe.environ.EnvReads.holds`, :func:`flydeps.observe.environ.current`) ``stat`` the path
and digest the bytes again only when its identity moved (device, inode, size, mode,
modification and change times); an identity less than :data:`_RACY_NS` old is never
trusted (file times are coarser than writes: "racy git"). An entry whose build read files
pays one ``stat`` per file per check; others pay nothing. A metadata read is one ``stat``
per check (its value is the answer: nothing to memoize); a path a build stats again is
attributed and valued once.

The events come from flydeps' one audit hook (:mod:`flydeps.watch.audit`), asked for on the
first recording (audit hooks cannot be removed); other events pay nothing here.
``FLYDEPS_AUDIT_HOOK=0`` never installs it: file reads are then not recorded
(docs/guarantees.md).
"""

from __future__ import annotations

import logging
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType

from blake3 import blake3

from ..code import origin as _origin
from ..watch import audit as _audit
from . import environ as _environ

__all__ = ["FILE", "LISTDIR", "STAT", "evaluator", "install", "label", "observe_stats"]

FILE = "=file:"
LISTDIR = "=listdir:"
# Packages whose own file reads are not inputs of a build (keyed by their versions).
_MACHINERY = frozenset({"flydeps", "flydsl_runtime", "flydsl"})
_IMPORT_SYSTEM = "importlib._bootstrap"
# An identity younger than this is re-digested on every check: a write within one tick of
# the file-system clock keeps size and times.
_RACY_NS = 50_000_000
_WRITE_MODES = frozenset("wax+")

_local = threading.local()


def install() -> bool:
    """Have flydeps' audit hook send the file events here (idempotent); False when
    ``FLYDEPS_AUDIT_HOOK=0``."""
    return _audit.forward_file_events(_received)


def _received(event: str, args: tuple) -> None:
    """An ``open``/``os.listdir``/``os.scandir``/``os.mkdir`` event, from
    :func:`flydeps.watch.audit._hook`. A failure here never reaches the build's own call: its
    recordings get a read that never holds instead (their entries are rebuilt, never
    stale), and one warning names the error."""
    if not _environ._active:
        return
    recorders = _environ._recorders()
    if not recorders or getattr(_local, "busy", False):
        return
    _local.busy = True
    try:
        with _environ.paused():  # what deciding reads (sysconfig on first use) is not the build's
            if event == "open":
                made = _made_by_open(args)
                noted = _opened(args) if made is None else None
            elif event == "os.mkdir":
                made, noted = _name(args[0] if args else None), None
            else:
                path = args[0] if args else None
                made, noted = None, _listed("." if path is None else path)
        if made is not None:
            made = os.path.abspath(made)
            for rec in recorders:
                rec._made.add(made)
        elif noted is not None:
            mine = os.path.abspath(noted[0].partition(":")[2])
            for rec in recorders:
                if mine not in rec._made:
                    rec._note(*noted)
    except Exception as error:  # noqa: BLE001 - an audit hook must never break the build's own open
        _unrecorded(recorders, error)
    finally:
        _local.busy = False


# Noted when recording failed: a path that never exists, so the read never holds.
_UNRECORDED = FILE + "<flydeps: a file read that could not be recorded>"
_warned: list[BaseException] = []


def _made_by_open(args: tuple) -> str | None:
    """The path of an open that creates or empties a file (``w``, ``x``, ``O_TRUNC``,
    ``O_CREAT | O_EXCL``): what the build reads there later is its own output."""
    path, mode, flags = (tuple(args) + (None, None, None))[:3]
    if type(mode) is str:
        fresh = "w" in mode or "x" in mode
    elif type(flags) is int:
        fresh = bool(flags & getattr(os, "O_TRUNC", 0)) or (
            flags & (os.O_CREAT | os.O_EXCL) == (os.O_CREAT | os.O_EXCL)
        )
    else:
        fresh = False
    return _name(path) if fresh else None


def _opened(args: tuple) -> tuple[str, str | None] | None:
    path, mode, flags = (tuple(args) + (None, None, None))[:3]
    if type(mode) is str:
        if not _WRITE_MODES.isdisjoint(mode):
            return None
    elif type(flags) is int:
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & getattr(os, "O_CREAT", 0):
            return None
    name = _name(path)
    if name is None or not _attributed() or _library_file(name):
        return None
    try:
        st = os.stat(name)
    except OSError as error:
        return (FILE + name, _absent_or_unreadable(error))
    if not stat.S_ISREG(st.st_mode):
        return None
    return (FILE + name, _file_value(name))


def _listed(path: object) -> tuple[str, str | None] | None:
    name = _name(path)
    if name is None or not _attributed() or _library_file(name):
        return None
    return (LISTDIR + name, _listing_value(name))


def _name(path: object) -> str | None:
    """The path as the build gave it, or None for a descriptor (not named by a path)."""
    if type(path) is str:
        return path
    if type(path) is bytes:
        return os.fsdecode(path)
    if isinstance(path, os.PathLike):
        text = os.fspath(path)
        return text if type(text) is str else os.fsdecode(text)
    return None


def _attributed(frame: FrameType | None = None) -> bool:
    """True when the nearest calling frame that decides is user code (see the module
    docstring): frames of the standard library and other libraries are walked through.
    ``frame``: the frame that made the read (default: the one the audit hook reports on)."""
    if frame is None:
        hook = _audit._hook.__code__
        frame = sys._getframe(1)
        while frame is not None and frame.f_code is not hook:  # up to the audit hook: ours
            frame = frame.f_back
        frame = frame.f_back if frame is not None else None  # the frame that opened or listed
    while frame is not None:
        module = frame.f_globals.get("__name__")
        if type(module) is str:
            if module == _IMPORT_SYSTEM:
                return False
            if module.partition(".")[0] in _MACHINERY:
                return False
            if not _origin.is_external_module(module):
                return True
        frame = frame.f_back
    return True


def _library_file(name: str) -> bool:
    """True for a file under a library directory (stdlib, site-packages) that belongs to no
    package named in ``FLYDEPS_USER_PACKAGES``."""
    real = os.path.realpath(name)
    inside = [d for d in _origin._library_dirs() if real.startswith(d)]
    if not inside:
        return False
    directory = max(inside, key=len)  # site-packages, not the stdlib directory holding it
    return real[len(directory) :].partition(os.sep)[0] not in _origin._USER_PACKAGES


def _absent_or_unreadable(error: OSError) -> str | None:
    if isinstance(error, (FileNotFoundError, NotADirectoryError)):
        return None
    return f"unreadable:{error.errno if error.errno is not None else type(error).__name__}"


def _identity(st: os.stat_result) -> tuple[int, ...]:
    return (st.st_dev, st.st_ino, st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _settled(st: os.stat_result) -> bool:
    """True when the file's times are old enough that a later write moves them."""
    return time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) > _RACY_NS


def _file_value(name: str) -> str | None:
    try:  # blake3 maps and reads the file itself (no Python open: no audit event)
        return "b3:" + blake3().update_mmap(name).hexdigest()
    except OSError as error:
        return _absent_or_unreadable(error)


def _listing_value(name: str) -> str | None:
    try:
        names = sorted(os.fsencode(n) for n in os.listdir(name))
    except OSError as error:
        return _absent_or_unreadable(error)
    return "b3:" + blake3(b"\0".join(names)).hexdigest()


def evaluator(name: str) -> Callable[[], str | None]:
    """``evaluate()`` of the derived read ``name`` (``=file:...``, ``=listdir:...`` or
    ``=stat:...``): its value now, memoized on the path's identity (see the module docstring)."""
    if name.startswith(STAT):
        return _stat_evaluator(name)
    if name.startswith(FILE):
        path, regular_only = name[len(FILE) :], True
    elif name.startswith(LISTDIR):
        path, regular_only = name[len(LISTDIR) :], False
    else:
        raise ValueError(f"not a file read: {name!r}")
    memo: list[tuple[tuple[int, ...] | None, str | None]] = [(None, None)]

    def evaluate() -> str | None:
        try:
            st = os.stat(path)
        except OSError as error:
            return _absent_or_unreadable(error)
        except ValueError:  # a NUL in a name no build could have opened (a damaged index row)
            return "unreadable:invalid path"
        if regular_only and not stat.S_ISREG(st.st_mode):
            return "not a regular file"
        identity = _identity(st)
        known, value = memo[0]
        if known == identity:
            return value
        with _environ.paused():
            value = _file_value(path) if regular_only else _listing_value(path)
        memo[0] = (identity if _settled(st) else None, value)
        return value

    return evaluate


def label(name: str) -> str:
    """``file PATH`` / ``directory listing PATH`` / ``metadata (exists) of PATH``."""
    if name.startswith(FILE):
        return f"file {name[len(FILE) :]}"
    if name.startswith(STAT):
        view, _, path = name[len(STAT) :].partition(":")
        return f"metadata ({view}) of {path}"
    return f"directory listing {name[len(LISTDIR) :]}"


def shown(value: str | None) -> str:
    """A recorded value for messages: ``contents b3:1a2b3c4d5e6f``, ``<absent>``, ..."""
    if value is None:
        return "<absent>"
    if value.startswith(("exists", "type:", "size:", "meta:")):
        return value
    if value.startswith("b3:"):
        return f"contents {value[:15]}"
    return value


# --- metadata reads: os.stat / os.lstat and what is built on them ----------------------

STAT = "=stat:"
_os_stat, _os_lstat = os.stat, os.lstat  # the originals (checks call these: never noted)
# The standard-library path functions a stat serves (the outermost of them on the stack
# names what the caller asked) -> the view of the answer keyed; any other caller gets "meta".
_PATH_MODULES = frozenset({"genericpath", "posixpath", "ntpath", "pathlib", "os"})
_ASKED = {
    "exists": "exists",
    "lexists": "exists",
    "isfile": "type",
    "isdir": "type",
    "islink": "type",
    "is_file": "type",
    "is_dir": "type",
    "is_symlink": "type",
    "getsize": "size",
    "realpath": "link",
    "resolve": "link",
}
_VIEWS = frozenset({"exists", "type", "size", "link", "meta"})


def _view_of(frame: FrameType | None) -> str:
    """What the caller asked of a stat: the view named by the outermost standard-library
    path function between the stat and its caller (``Path.exists`` -> ``Path.stat`` ->
    ``os.stat``: "exists"), "meta" when the caller asked ``os.stat`` itself."""
    asked = None
    while frame is not None:
        module = frame.f_globals.get("__name__")
        if type(module) is not str or module.partition(".")[0] not in _PATH_MODULES:
            break
        asked = frame.f_code.co_name
        frame = frame.f_back
    return _ASKED.get(asked or "", "meta")


def _stat_value(view: str, answer: os.stat_result | BaseException) -> str | None:
    """A metadata read's value: what ``view`` of the answer a fresh trace would get. Absent:
    ``None``; unreadable: ``unreadable:<errno>``."""
    if isinstance(answer, OSError):
        return _absent_or_unreadable(answer)
    if not isinstance(answer, os.stat_result):
        return "unreadable:invalid path"  # a NUL in the name (ValueError)
    kind = stat.S_IFMT(answer.st_mode)
    if view == "exists":
        return "exists"
    if view == "type":
        return f"type:{kind:o}"
    if view == "size":
        return f"size:{answer.st_size}"
    if view == "link":  # what resolving through it answers: a link's target moves its inode/mtime
        return f"type:{kind:o}" + (f":{answer.st_ino}:{answer.st_mtime_ns}" if stat.S_ISLNK(kind) else "")
    st = answer  # meta: every field a caller could branch on but the access and change times
    fields = (st.st_size, st.st_mtime_ns, st.st_dev, st.st_ino, st.st_nlink, st.st_uid, st.st_gid)
    return f"meta:{st.st_mode:o}:" + ":".join(map(str, fields))


def _stat_seen(path: object, kwargs: dict, follow: bool, answer: object, frame: FrameType | None) -> None:
    """A stat made while some thread records: noted as a metadata read by the recordings of
    this thread when user code asked it (attribution as for file reads)."""
    recorders = _environ._recorders()
    if not recorders or getattr(_local, "busy", False) or kwargs.get("dir_fd") is not None:
        return
    follow = follow and bool(kwargs.get("follow_symlinks", True))
    _local.busy = True
    try:
        with _environ.paused():
            name = _name(path)
            if name is None:
                return
            view = _view_of(frame)
            key = f"{STAT}{'' if follow else 'l'}{view}:{name}"
            if all(key in rec._values for rec in recorders):  # asked again: its first answer stands
                return
            if not _attributed(frame) or ("\0" not in name and _library_file(name)):
                return
            noted = (key, _stat_value(view, answer))  # type: ignore[arg-type]
            mine = os.path.abspath(name)
        for rec in recorders:
            if mine not in rec._made:
                rec._note(*noted)
    except Exception as error:  # noqa: BLE001 - never break the build's own stat
        _unrecorded(recorders, error)
    finally:
        _local.busy = False


def _observed(original: Callable[..., os.stat_result], follow: bool) -> Callable[..., os.stat_result]:
    """``os.stat`` / ``os.lstat`` that notes what a recording thread asks (same answers)."""

    def observed(path: object, *args: object, **kwargs: object) -> os.stat_result:
        try:
            answer = original(path, *args, **kwargs)
        except (OSError, ValueError) as error:
            if _environ._active:
                _stat_seen(path, kwargs, follow, error, sys._getframe(1))
            raise
        if _environ._active:
            _stat_seen(path, kwargs, follow, answer, sys._getframe(1))
        return answer

    observed.__wrapped__ = original  # type: ignore[attr-defined]
    observed.__name__, observed.__qualname__, observed.__doc__ = original.__name__, original.__name__, original.__doc__
    return observed


_OBSERVED = {"stat": (_os_stat, _observed(_os_stat, True)), "lstat": (_os_lstat, _observed(_os_lstat, False))}


def observe_stats(on: bool) -> None:
    """Put the observing ``os.stat`` / ``os.lstat`` in the ``os`` module while some thread
    records (``on``), the originals back when none does (:func:`flydeps.observe.environ.recording`
    calls it under its lock). A function someone else put there is left alone."""
    namespace = vars(os)
    for attribute, (original, observing) in _OBSERVED.items():
        current, wanted = (original, observing) if on else (observing, original)
        if namespace.get(attribute) is current:
            namespace[attribute] = wanted
    accessor = getattr(sys.modules.get("pathlib"), "_NormalAccessor", None)
    if isinstance(accessor, type):  # CPython 3.10's pathlib bound os.stat in a class at import
        for attribute, (original, observing) in _OBSERVED.items():
            found = accessor.__dict__.get(attribute)
            if on and found is original:
                setattr(accessor, attribute, staticmethod(observing))
            elif not on and isinstance(found, staticmethod) and found.__func__ is observing:
                setattr(accessor, attribute, original)


def _unrecorded(recorders: list, error: BaseException) -> None:
    """A read that could not be recorded: a read that never holds, and one warning."""
    for rec in recorders:
        rec._note(_UNRECORDED, "unrecorded")
    if not _warned:
        _warned.append(error)
        logging.getLogger("flydeps").warning(
            "flydeps: a file read by a build could not be recorded (%s: %s); the entries of builds it "
            "happened in are rebuilt on every call, never served stale. Please report it to flydeps.",
            type(error).__name__,
            error,
        )


def _stat_evaluator(name: str) -> Callable[[], str | None]:
    """``evaluate()`` of a metadata read: one stat (or lstat) of the path, as the build gave it."""
    view, _, path = name[len(STAT) :].partition(":")
    ask: Callable[..., os.stat_result] = _os_stat
    if view not in _VIEWS and view[:1] == "l":
        ask, view = _os_lstat, view[1:]
    if view not in _VIEWS:
        raise ValueError(f"not a metadata read: {name!r} (views: {sorted(_VIEWS)}, 'l' before one for lstat)")

    def evaluate() -> str | None:
        try:
            return _stat_value(view, ask(path))
        except (OSError, ValueError) as error:
            return _stat_value(view, error)

    return evaluate


_environ.attach_files(sys.modules[__name__])  # type: ignore[arg-type]
