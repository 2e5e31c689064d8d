"""Stable, bounded snapshots of data values (globals, defaults, closure contents).

Contract: reads values structurally and never runs user code: no ``__repr__``,
``__eq__``, ``__hash__``, ``__getattr__`` or properties of user classes are called
(instance state is read with ``object.__getattribute__(obj, "__dict__")`` and slot
descriptors of the type). A snapshot is bounded: a value with more than
``SNAPSHOT_LIMIT`` elements in all (env ``FLYDEPS_SNAPSHOT_LIMIT``, default 256) is
summarized by type and size only and marked ``oversized``; self-containing values end
in a cycle marker. The same value gives the same digest in every process and machine.

For mutable values within the bound, :func:`snapshot` also returns the containers it
walked with their items, so a guard can later detect in-place mutation with identity
checks alone (see :class:`MutableWatch`).
"""

from __future__ import annotations

import enum
import os
from dataclasses import dataclass
from types import BuiltinFunctionType, CodeType, FunctionType, MethodType, ModuleType
from typing import Any

from blake3 import blake3

from ._bytecode import canonical_const, code_digest
from ._origin import is_external_module

__all__ = ["MutableWatch", "SNAPSHOT_LIMIT", "Snapshot", "describe", "snapshot", "value_digest"]


def _limit_from_env() -> int:
    raw = os.environ.get("FLYDEPS_SNAPSHOT_LIMIT", "256")
    try:
        return max(1, int(raw))
    except ValueError:
        raise ValueError(
            f"FLYDEPS_SNAPSHOT_LIMIT={raw!r} is not an integer; set it to an element count such as 256"
        ) from None


SNAPSHOT_LIMIT = _limit_from_env()
_ATOMS = (type(None), bool, int, float, complex, str, bytes, type(Ellipsis))
_MAX_DEPTH = 32
_MAX_ATOM = 1 << 20  # bytes/str longer than this are summarized by length


@dataclass(frozen=True, slots=True)
class MutableWatch:
    """A mutable container seen by a snapshot and the identities of its items then.

    ``items`` is the flat tuple of keys and values (dict, instance ``__dict__``), the
    elements (list, set in iteration order) or the bytes (bytearray). :meth:`unchanged`
    compares by identity only, never hashing or comparing user objects; a set whose
    iteration order changed without a change of content reads as changed, which costs a
    digest recomputation, never a wrong answer.
    """

    container: Any  # dict | list | set | bytearray, dispatched on the exact type
    items: Any

    def unchanged(self) -> bool:
        c = self.container
        t = type(c)
        if t is dict:
            now = tuple(_flat_items(c))  # type: ignore[arg-type]
        elif t is list:
            now = tuple(c)  # type: ignore[call-overload]
        elif t is set:
            now = tuple(c)  # type: ignore[call-overload]  # identity only: hashing would run user code
        elif t is bytearray:
            return bytes(c) == self.items  # type: ignore[call-overload]
        else:
            return True
        old = self.items
        return len(now) == len(old) and all(map(_is, now, old))  # type: ignore[arg-type]


def _is(a: object, b: object) -> bool:
    return a is b


def _flat_items(d: dict) -> list[object]:
    out: list[object] = []
    for k, v in d.items():
        out.append(k)
        out.append(v)
    return out


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a value was: ``digest`` (hex), a short safe ``summary`` for messages,
    whether it was ``oversized`` (summarized by size only) and the mutable containers
    inside it (empty for immutable values)."""

    digest: str
    summary: str
    oversized: bool
    mutables: tuple[MutableWatch, ...]


class _Walker:
    def __init__(self, limit: int) -> None:
        self.budget = limit
        self.oversized = False
        self.mutables: list[MutableWatch] = []
        self.stack: set[int] = set()

    def encode(self, value: Any, depth: int = 0) -> bytes:
        t = type(value)
        if t in _ATOMS:
            self.budget -= 1
            if (t is bytes or t is str) and len(value) > _MAX_ATOM:  # type: ignore[arg-type]
                self.oversized = True
                return b"<" + t.__name__.encode() + b" len=%d>" % len(value)  # type: ignore[arg-type]
            return canonical_const(value)
        if depth > _MAX_DEPTH:
            self.oversized = True
            return b"<deep " + _type_name(t).encode() + b">"
        key = id(value)
        if key in self.stack:
            return b"<cycle " + _type_name(t).encode() + b">"
        self.stack.add(key)
        try:
            return self._encode_compound(value, t, depth)
        finally:
            self.stack.discard(key)

    def _encode_compound(self, value: Any, t: type, depth: int) -> bytes:
        if t in (tuple, list, set, frozenset, dict, bytearray):
            size = len(value)  # type: ignore[arg-type]
            if size > self.budget:
                self.oversized = True
                self.budget = -1
                return b"<" + t.__name__.encode() + b" len=%d>" % size
            self.budget -= 1
        if t is tuple or t is list:
            if t is list:
                self.mutables.append(MutableWatch(value, tuple(value)))  # type: ignore[arg-type]
            parts = [self.encode(v, depth + 1) for v in value]  # type: ignore[attr-defined]
            return t.__name__.encode() + b"(" + b",".join(parts) + b")"
        if t is set or t is frozenset:
            if t is set:
                self.mutables.append(MutableWatch(value, tuple(value)))  # type: ignore[arg-type]
            parts = sorted(self.encode(v, depth + 1) for v in value)  # type: ignore[attr-defined]
            return t.__name__.encode() + b"{" + b",".join(parts) + b"}"
        if t is dict:
            return b"dict" + self._encode_mapping(value, depth)  # type: ignore[arg-type]
        if t is bytearray:
            self.mutables.append(MutableWatch(value, bytes(value)))  # type: ignore[arg-type]
            return b"bytearray" + canonical_const(bytes(value))  # type: ignore[arg-type]
        return self._encode_object(value, t, depth)

    def _encode_mapping(self, mapping: dict, depth: int) -> bytes:
        self.mutables.append(MutableWatch(mapping, tuple(_flat_items(mapping))))
        pairs = sorted(self.encode(k, depth + 1) + b":" + self.encode(v, depth + 1) for k, v in mapping.items())
        return b"{" + b",".join(pairs) + b"}"

    def _encode_object(self, value: object, t: type, depth: int) -> bytes:
        self.budget -= 1
        if isinstance(value, enum.Enum):
            return b"enum:" + _type_name(t).encode() + b"." + value._name_.encode()
        if isinstance(value, (FunctionType,)):
            return b"fn:" + _qual(value).encode() + b"#" + code_digest(value.__code__).encode()
        if isinstance(value, type):
            return b"class:" + _qual(value).encode()
        if isinstance(value, ModuleType):
            return b"module:" + value.__name__.encode()
        if isinstance(value, CodeType):
            return b"code:" + code_digest(value).encode()
        if isinstance(value, (BuiltinFunctionType, MethodType)):
            return b"callable:" + _qual(value).encode()
        state = _instance_state(value)
        head = b"obj:" + _type_name(t).encode()
        if state is None or (type(state) is dict and not state):
            return head + self._encode_reduced(value, t, depth)
        if type(state) is dict:
            return head + self._encode_mapping(state, depth + 1)
        return head + self.encode(state, depth + 1)

    def _encode_reduced(self, value: Any, t: Any, depth: int) -> bytes:
        """State of a stateless-looking library object (``torch.float16``, a numpy scalar)
        through its pickle protocol. Only library types: user code is never called."""
        if not is_external_module(getattr(t, "__module__", None)):
            return b""
        try:
            reduced = t.__reduce_ex__(value, 4)
        except Exception:
            return b"<opaque>"
        if isinstance(reduced, str):  # "a global of the type's module" (dtypes, singletons)
            return b"=" + reduced.encode()
        if isinstance(reduced, tuple) and len(reduced) >= 2:
            return b"=" + self.encode(_reduced_parts(reduced), depth + 1)
        return b"<opaque>"


def _reduced_parts(reduced: tuple) -> tuple:
    """The constructor's name and its arguments/state from a ``__reduce_ex__`` tuple."""
    ctor = reduced[0]
    name = f"{getattr(ctor, '__module__', '?')}.{getattr(ctor, '__qualname__', getattr(ctor, '__name__', '?'))}"
    return (name, *reduced[1:3])


def _instance_state(value: object) -> object:
    """Instance ``__dict__`` and slot values, read without running user code."""
    try:
        state = object.__getattribute__(value, "__dict__")
    except Exception:
        state = None
    slots = []
    for klass in type(value).__mro__:
        names = klass.__dict__.get("__slots__", ())
        if isinstance(names, str):
            names = (names,)
        for name in names if isinstance(names, (tuple, list)) else ():
            descr = klass.__dict__.get(name)
            if descr is not None and type(descr).__name__ == "member_descriptor":
                try:
                    slots.append((name, descr.__get__(value, klass)))
                except Exception:
                    slots.append((name, "<unset>"))
    if slots:
        return (state if type(state) is dict else None, tuple(slots))
    return state if type(state) is dict else None


def _type_name(t: type) -> str:
    return f"{getattr(t, '__module__', '?')}.{getattr(t, '__qualname__', t.__name__)}"


def _qual(obj: object) -> str:
    module = getattr(obj, "__module__", None)
    qual = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", "?")
    return f"{module}.{qual}" if isinstance(module, str) else str(qual)


def snapshot(value: object, *, limit: int | None = None) -> Snapshot:
    """The bounded structural snapshot of ``value`` (see module docstring)."""
    walker = _Walker(SNAPSHOT_LIMIT if limit is None else limit)
    try:
        encoded = walker.encode(value)
    except RecursionError:
        walker.oversized = True
        encoded = b"<deep " + _type_name(type(value)).encode() + b">"
    digest = blake3(b"flydeps-value-v1\0" + encoded).hexdigest()
    mutables = () if walker.oversized else tuple(walker.mutables)
    return Snapshot(digest, describe(value), walker.oversized, mutables)


def value_digest(value: object) -> str:
    """Hex digest of ``value``'s snapshot."""
    return snapshot(value).digest


def describe(value: object, width: int = 60) -> str:
    """A short description for messages: literal reprs for builtin atoms, ``<Type len=N>``
    for containers, ``<module.Type object>`` otherwise. Never calls a user ``__repr__``."""
    t = type(value)
    if t in _ATOMS:
        text = repr(value)
    elif t in (tuple, list, set, frozenset, dict, bytearray):
        text = f"<{t.__name__} len={len(value)}>"  # type: ignore[arg-type]
        if len(value) <= 8:  # type: ignore[arg-type]
            try:
                inner = canonical_repr(value)
                text = inner if len(inner) <= width else text
            except RecursionError:
                pass
    elif isinstance(value, (FunctionType, type, BuiltinFunctionType)):
        text = f"<{_qual(value)}>"
    elif isinstance(value, ModuleType):
        text = f"<module {value.__name__}>"
    elif isinstance(value, enum.Enum):
        text = f"{t.__qualname__}.{value._name_}"
    else:
        text = f"<{_type_name(t)} object>"
        if is_external_module(getattr(t, "__module__", None)):
            try:
                reduced = t.__reduce_ex__(value, 4)
            except Exception:
                reduced = None
            if isinstance(reduced, str):  # torch.float16 and other named singletons
                text = f"{t.__module__.partition('.')[0]}.{reduced}"
    return text if len(text) <= width else text[: width - 3] + "..."


def canonical_repr(value: object) -> str:
    """repr() of builtin atoms and containers of them; other elements as ``<Type>``."""
    t = type(value)
    if t in _ATOMS:
        return repr(value)
    if t is tuple or t is list:
        open_, close = ("(", ")") if t is tuple else ("[", "]")
        return open_ + ", ".join(canonical_repr(v) for v in value) + close  # type: ignore[attr-defined]
    if t is dict:
        return "{" + ", ".join(f"{canonical_repr(k)}: {canonical_repr(v)}" for k, v in value.items()) + "}"  # type: ignore[attr-defined]
    return f"<{_type_name(t)}>"
