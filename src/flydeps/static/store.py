"""Private on-disk stores: directories only their owner can write, entries bound to their key.

Contract
--------
* :func:`private_dir` creates missing cache directories with mode 0700 and refuses (returns
  None after ONE warning per directory and process) a directory that is not owned by the
  current user or that group/others may write: whoever can write a cache decides what the
  reader believes. A refused or uncreatable store means "run without the cache": answers
  stay correct, only slower. Every store of flydeps and flydsl_runtime goes through it.
* An entry is one file: a header line ``flydeps-store-1 KIND KEY`` followed by a JSON
  document. :func:`read_entry` returns the decoded document only when the file is a regular
  file (opened without following symlinks and without blocking), at most
  :data:`MAX_ENTRY_BYTES` long, and its header names exactly the kind (which carries the
  schema version) and the key it is looked up under: an entry copied from another key,
  another project or another schema is a miss. JSON decoding builds only lists, strings,
  numbers, booleans and None: nothing in an entry can run code or crash the interpreter
  (deep nesting ends in ``RecursionError``, caught like every other decoding error).
* The :class:`Shape` classes validate a decoded document field by field (exact types, exact
  lengths) while turning it into the caller's records; anything unexpected raises
  :class:`Invalid`, which the stores treat as a miss. Entries are written to a temporary
  file (0600) and renamed into place, so readers never see half an entry.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

__all__ = [
    "MAX_ENTRY_BYTES",
    "Bool",
    "Fixed",
    "Int",
    "Invalid",
    "Optional",
    "Record",
    "STORE_FORMAT",
    "Seq",
    "Shape",
    "Str",
    "Union",
    "private_dir",
    "read_entry",
    "unsafe_reason",
    "write_entry",
]

log = logging.getLogger("flydeps.static")

STORE_FORMAT = "flydeps-store-1"
# An entry larger than this is refused unread (a planted multi-gigabyte file costs nothing).
MAX_ENTRY_BYTES = 256 << 20
_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_warned: set[tuple[str, str]] = set()


def unsafe_reason(path: Path) -> str | None:
    """Why ``path`` (an existing directory) must not hold a cache, or None when it may:
    it must be a directory owned by the current user (or a symlink of the user's or
    root's to one) that neither group nor others can write."""
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    getuid = getattr(os, "getuid", None)
    if getuid is None:  # Windows: no POSIX owners or modes to check
        return None
    me = getuid()
    if st.st_uid != me:
        return f"it is owned by uid {st.st_uid}, not by you (uid {me})"
    if st.st_mode & 0o022:
        return f"group or others can write it (mode {stat.S_IMODE(st.st_mode):04o})"
    link = os.lstat(path)
    if stat.S_ISLNK(link.st_mode) and link.st_uid not in (me, 0):
        return f"it is reached through a symlink owned by uid {link.st_uid}"
    return None


def private_dir(*dirs: Path) -> Path | None:
    """The last of ``dirs`` (outermost first), each created with mode 0700 when missing and
    each checked by :func:`unsafe_reason`; None when one is refused (one warning) or cannot
    be created (a read-only home: debug log only)."""
    for directory in dirs:
        try:
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


def _header(kind: str, key: str) -> bytes:
    return f"{STORE_FORMAT} {kind} {key}\n".encode("ascii")


def read_entry(path: Path, kind: str, key: str) -> Any:
    """The JSON document stored at ``path`` for (``kind``, ``key``); None when missing,
    not a regular file, too large, undecodable, or stored for another kind or key."""
    try:
        fd = os.open(path, _READ_FLAGS)
    except FileNotFoundError:
        return None
    except OSError as exc:  # a symlink (O_NOFOLLOW), a directory, no permission
        log.debug("ignoring cache entry %s: %s", path, exc)
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_ENTRY_BYTES:
            log.debug("ignoring cache entry %s: not a regular file or too large", path)
            return None
        data = handle.read(MAX_ENTRY_BYTES + 1)
    header = _header(kind, key)
    if not data.startswith(header) or len(data) > MAX_ENTRY_BYTES:
        log.debug("ignoring cache entry %s: stored for another key, kind or format", path)
        return None
    try:
        return json.loads(data[len(header) :])
    except (ValueError, RecursionError) as exc:  # garbage, truncation, a 10,000-deep array
        log.debug("ignoring undecodable cache entry %s: %s", path, exc)
        return None


def write_entry(path: Path, kind: str, key: str, document: object) -> None:
    """Store ``document`` (JSON-able) atomically; failures (read-only or full disk) only log."""
    tmp = None
    try:
        data = _header(kind, key) + json.dumps(document, separators=(",", ":"), allow_nan=False).encode("ascii")
        if len(data) > MAX_ENTRY_BYTES:
            log.debug("not caching %s: %d bytes", path, len(data))
            return
        path.parent.mkdir(mode=0o700, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except (OSError, ValueError, TypeError, RecursionError) as exc:
        log.debug("cannot write cache entry %s: %s", path, exc)
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)


class Invalid(ValueError):
    """A decoded entry does not have the expected shape: the store treats it as a miss."""


class Shape:
    """How one value is stored: ``decode`` validates a JSON value and rebuilds the record;
    ``encode`` turns a record into JSON-able data. ``plain`` shapes (no tagged union inside)
    are already JSON-able as they are (tuples and NamedTuples dump as arrays).

    Records and fixed tuples get a decoder generated once (as ``dataclasses`` generates
    ``__init__``): one function per record type, scalar fields checked inline, so decoding
    thousands of summaries costs one call per record rather than one per value."""

    plain = True

    def decode(self, raw: object) -> Any:
        raise NotImplementedError

    def encode(self, value: Any) -> object:
        return value

    def invalid(self, var: str) -> str | None:
        """A Python condition true when ``var`` is not of this (scalar) shape; None otherwise."""
        return None


class _Scalar(Shape):
    def __init__(self, kind: type) -> None:
        self.kind = kind

    def decode(self, raw: object) -> Any:
        if type(raw) is not self.kind:  # exact: a bool is not an int here
            raise Invalid(f"expected {self.kind.__name__}, got {type(raw).__name__}")
        return raw

    def invalid(self, var: str) -> str | None:
        return f"type({var}) is not {self.kind.__name__}"


Str = _Scalar(str)
Int = _Scalar(int)
Bool = _Scalar(bool)


class Optional(Shape):
    """None or ``item``."""

    def __init__(self, item: Shape) -> None:
        self.item, self.plain = item, item.plain

    def decode(self, raw: object) -> Any:
        return None if raw is None else self.item.decode(raw)

    def encode(self, value: Any) -> object:
        return None if value is None else self.item.encode(value)


class Seq(Shape):
    """A tuple of any length, every element of shape ``item``."""

    def __init__(self, item: Shape) -> None:
        self.item, self.plain = item, item.plain

    def decode(self, raw: object) -> Any:
        if type(raw) is not list:
            raise Invalid(f"expected a list, got {type(raw).__name__}")
        if self.item is Str:
            try:
                "".join(raw)  # C-speed check that every item is a str
            except TypeError:
                raise Invalid("expected a list of strings") from None
            return tuple(raw)
        decode = self.item.decode
        return tuple([decode(x) for x in raw])

    def encode(self, value: Any) -> object:
        return value if self.plain else [self.item.encode(x) for x in value]


class Fixed(Shape):
    """A tuple of exactly ``len(items)`` elements of the given shapes."""

    def __init__(self, *items: Shape) -> None:
        self.items, self.plain = items, all(i.plain for i in items)
        self.decode = _generate(items, tuple, tagged=False)  # type: ignore[method-assign,assignment]

    def encode(self, value: Any) -> object:
        return value if self.plain else [item.encode(x) for item, x in zip(self.items, value)]


class Record(Fixed):
    """A NamedTuple ``cls`` stored as the array of all its fields, in order."""

    def __init__(self, cls: Callable[..., Any], *fields: Shape) -> None:
        names = getattr(cls, "_fields", ())
        if len(names) != len(fields):
            raise TypeError(f"{cls.__name__} has {len(names)} fields, the shape lists {len(fields)}")
        super().__init__(*fields)
        self.cls = cls
        self.decode = _generate(fields, cls, tagged=False)  # type: ignore[method-assign,assignment]
        self.decode_tagged = _generate(fields, cls, tagged=True)


class Union(Shape):
    """One of several record types, stored as ``[tag, *fields]``."""

    plain = False

    def __init__(self, tags: Mapping[str, Record]) -> None:
        self.by_tag = {tag: record.decode_tagged for tag, record in tags.items()}
        self.by_type = {record.cls: (tag, record) for tag, record in tags.items()}

    def decode(self, raw: object) -> Any:
        if type(raw) is not list or not raw or type(raw[0]) is not str or raw[0] not in self.by_tag:
            raise Invalid("expected a tagged record")
        return self.by_tag[raw[0]](raw)

    def encode(self, value: Any) -> object:
        tag, record = self.by_type[type(value)]
        return [tag, *cast(list, record.encode(value))]


def _generate(items: tuple[Shape, ...], build: Callable[..., Any], *, tagged: bool) -> Callable[[object], Any]:
    """A decoder of a JSON array of ``items`` (after a tag when ``tagged``) into ``build``."""
    names = [f"a{i}" for i in range(len(items))]
    namespace: dict[str, Any] = {"Invalid": Invalid, "build": build}
    checks, args = [], []
    for i, (item, var) in enumerate(zip(items, names)):
        condition = item.invalid(var)
        if condition is not None:
            checks.append(condition)
            args.append(var)
        elif isinstance(item, Seq) and item.item is Str:
            namespace[f"d{i}"] = item.decode
            args.append(f"(() if {var} == [] else d{i}({var}))")
        else:
            namespace[f"d{i}"] = item.decode
            args.append(f"d{i}({var})")
    size = len(items) + tagged
    unpack = ", ".join(["_"] * tagged + names)
    built = f"build({', '.join(args)})" if build is not tuple else f"({', '.join(args)},)"
    lines = [
        "def decode(raw):",
        f"    if type(raw) is not list or len(raw) != {size}:",
        f"        raise Invalid('expected a list of {size}')",
        f"    {unpack}, = raw",
        *([f"    if {' or '.join(checks)}:", "        raise Invalid('wrong field type')"] if checks else []),
        f"    return {built}",
    ]
    exec("\n".join(lines), namespace)  # generated from the shape declarations only, never from entry data
    return namespace["decode"]  # type: ignore[no-any-return]
