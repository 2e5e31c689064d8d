"""Private on-disk stores of the static front-end: JSON documents in
:mod:`flydeps.store.memofile` entries, validated field by field.

Contract
--------
* Directories and entries are :mod:`flydeps.store.memofile`'s (re-exported here): a cache
  directory goes through :func:`private_dir` (0700, owner checked, one warning and no
  cache when refused); an entry is read back only from a regular file (no symlink
  followed), at most :data:`MAX_ENTRY_BYTES` long, whose header names exactly the kind
  (which carries the schema version) and the key it is looked up under, and is written to
  a temporary file renamed into place.
* :func:`read_entry` decodes the entry's JSON document: decoding builds only lists,
  strings, numbers, booleans and None, so nothing in an entry can run code or crash the
  interpreter (deep nesting ends in ``RecursionError``, caught like every other decoding
  error).
* The :class:`Shape` classes validate a decoded document field by field (exact types, exact
  lengths) while turning it into the caller's records; anything unexpected raises
  :class:`Invalid`, which the stores treat as a miss.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, cast

from ..store.memofile import MAX_ENTRY_BYTES, STORE_FORMAT, private_dir, read_file, unsafe_reason, write_file

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


def read_entry(path: Path, kind: str, key: str) -> Any:
    """The JSON document stored at ``path`` for (``kind``, ``key``); None when missing,
    not a regular file, too large, undecodable, or stored for another kind or key
    (:func:`flydeps.store.memofile.read_file`)."""
    body = read_file(path, kind, key)
    if body is None:
        return None
    try:
        return json.loads(body)
    except (ValueError, RecursionError) as exc:  # garbage, truncation, a 10,000-deep array
        log.debug("ignoring undecodable cache entry %s: %s", path, exc)
        return None


def write_entry(path: Path, kind: str, key: str, document: object) -> None:
    """Store ``document`` (JSON-able) atomically; failures (read-only or full disk) only log."""
    try:
        body = json.dumps(document, separators=(",", ":"), allow_nan=False).encode("ascii")
    except (ValueError, TypeError, RecursionError) as exc:
        log.debug("cannot write cache entry %s: %s", path, exc)
        return
    write_file(path, kind, key, body)


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
