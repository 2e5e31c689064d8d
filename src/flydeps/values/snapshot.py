"""Stable, exact snapshots of data values (globals, defaults, closure contents).

Contract: reads values structurally and never runs user code: no ``__repr__``, ``__eq__``,
``__hash__``, ``__iter__``, ``__getattr__``, properties or metaclass methods of user
classes are called. Types are dispatched on ``type(value)`` by identity along its MRO;
contents are read through the builtin base type's own C methods (``dict.items(d)``,
``list.copy(l)``, ``int.__index__(i)``, ...), so a subclass's overrides never run; instance
state is read through the interpreter's own ``__dict__`` getset and slot descriptors
(:mod:`flydeps.values.objects`). Every container is copied once (a C-level copy, retried if
another thread resized it) and that one copy serves both the digest and the
:class:`MutableWatch` a guard re-checks, so they never disagree.

What a digest covers, per type, is the value-type table of ``docs/guarantees.md``: atoms by
exact value (floats and complex numbers by their bits: ``-0.0`` and NaN payloads differ),
containers element by element (``dict`` and ``OrderedDict`` in order, sets sorted by
encoding), ``defaultdict`` with its ``default_factory``, ``deque`` with ``maxlen``,
``array.array`` with its typecode, subclasses of builtins by their real contents plus type
and instance ``__dict__``, enum members by name and value, user instances by type and state,
library objects by their own pickle protocol (``__reduce_ex__`` defined by the library).

Values whose reading differs per thread or context are read as the reader sees them now:
a ``contextvars.ContextVar`` by its current value (or unset), a ``threading.local`` by the
attributes of the current thread; their watches re-read them through the variable on every
check, so a guard checked in another thread or context compares that one's values.

A user instance (a class defined outside the libraries) depends on its class: the snapshot
reports the instances it read and their classes (:attr:`Snapshot.instances`,
:attr:`Snapshot.types`: discovery walks the classes as nodes, class attributes, methods,
properties and bases, and guards each instance's ``type()``, re-read when an audited
``__class__`` assignment happened) and one watch over the slotted ones' ``__slots__``
members, re-read on every check (no counter exists for a slot store).

Size: a container with more than ``SNAPSHOT_LIMIT`` elements in all (env
``FLYDEPS_SNAPSHOT_LIMIT``, default 256, read at import; not a positive integer: a
``SettingError``) is *oversized*: digested by type, size and
identity (rebinding it to anything else is a change; its in-place changes are not watched),
and so is an object whose state cannot be read. ``str``/``bytes``/``bytearray``/
``array.array``/``memoryview`` contents above 1 MiB are digested in full by a streamed
blake3 (mutable ones are then not watched). Identity enters only runtime digests (never a
literal from a file), and the objects it names are held by the guard's bindings.
"""

from __future__ import annotations

import _thread
import array
import collections
import contextvars
import enum
import gc
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from types import (
    BuiltinFunctionType,
    CodeType,
    FunctionType,
    MappingProxyType,
    MemberDescriptorType,
    MethodType,
    ModuleType,
    UnionType,
)
from typing import Any

from blake3 import blake3

from .. import settings
from ..code.bytecode import canonical_const, code_digest
from .bindings import MISSING, class_dict, dict_items, is_a
from .containers import (
    MutableWatch,
    base_len,
    read_array,
    read_bytearray,
    read_defaultdict,
    read_deque,
    read_dict,
    read_instance_dict,
    read_list,
    read_memoryview,
    read_odict,
    read_set,
    sequence_items,
    stable,
)
from .objects import (
    TypeTable,
    callable_module,
    describe,
    instance_dict,
    is_external_type,
    library_reduce,
    module_dict,
    module_name,
    object_qualname,
    qualified,
    type_module,
    type_mro,
    type_name,
)

# ``describe`` lives in ``_objects`` (messages, no digest) and is re-exported for its callers.
__all__ = ["MutableWatch", "SNAPSHOT_LIMIT", "Snapshot", "describe", "sequence_items", "snapshot", "value_digest"]


SNAPSHOT_LIMIT = settings.integer("FLYDEPS_SNAPSHOT_LIMIT", 256)
_MAX_DEPTH = 32
_MAX_ATOM = 1 << 20  # str/bytes-like contents longer than this are digested by a streamed blake3
_CHUNK = 1 << 20
# The hot loop of a snapshot tests these by id (builtin types live as long as the interpreter).
_ATOM_IDS = frozenset(id(t) for t in (type(None), bool, int, float, complex, str, bytes, type(Ellipsis)))
_BIG_INT = 1 << 12_000  # beyond int->str conversion limits: encoded in hex


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a value was: ``digest`` (hex), a short safe ``summary`` for messages, whether
    (part of) it was ``oversized`` (digested by identity and size, not watched) and the
    mutable containers inside it whose in-place changes a guard can see."""

    digest: str
    summary: str
    oversized: bool
    mutables: tuple[MutableWatch, ...]
    identified: bool = False  # an object's identity is in the digest: it holds in this process only
    types: tuple[type, ...] = ()  # the user classes of the instances read (walked by discovery)
    instances: tuple[object, ...] = ()  # the user instances read (their type() is guarded)


class _Walker:
    """Encodes one value; ``identity`` says whether object identity may enter the encoding."""

    def __init__(self, limit: int | None, identity: bool) -> None:
        self.budget = limit if limit is not None else -1
        self.bounded = limit is not None
        self.identity = identity
        self.identified = False  # an identity token was written
        self.oversized = False
        self.mutables: list[MutableWatch] = []
        self.stack: set[int] = set()
        self.reduced = 0  # > 0 inside the (temporary) parts of a library object's reduction
        self.instances: list[object] = []  # user instances read: type() guarded, slots watched
        self.types: dict[int, type] = {}  # id -> the class of each one (kept alive by them)

    def note_instance(self, value: object, t: type) -> None:
        """A user instance was read: its class is a dependency, its type and slots guarded."""
        if self.reduced or is_external_type(t):
            return
        self.instances.append(value)
        self.types.setdefault(id(t), t)

    def encode(self, value: Any, depth: int = 0) -> bytes:
        t = type(value)
        if id(t) in _ATOM_IDS:
            self.budget -= 1
            if t is str or t is bytes:
                return canonical_const(value) if len(value) <= _MAX_ATOM else _encode_atom(value, t)
            if t is int and not -_BIG_INT < value < _BIG_INT:
                return _encode_atom(value, t)
            return canonical_const(value)
        if depth > _MAX_DEPTH:
            self.oversized = True
            return b"<deep " + type_name(t).encode() + b">"
        key = id(value)
        if key in self.stack:
            return b"<cycle " + type_name(t).encode() + b">"
        self.stack.add(key)
        try:
            return self._encode_compound(value, t, depth)
        finally:
            self.stack.discard(key)

    def _encode_compound(self, value: Any, t: type, depth: int) -> bytes:
        self.budget -= 1
        kind = _KIND_BY_ID.get(id(t)) or _kind_along_mro(t)
        if kind is _enum_kind:  # before int/str: IntEnum members are ints too
            return kind(self, value, depth)
        if kind is not None and kind in _BASE_KINDS:
            body = kind(self, value, depth)
            if id(t) in _BASE_TYPE_IDS:
                return body
            self.note_instance(value, t)
            return b"obj:" + type_name(t).encode() + body + self._state(value, depth, subclass=True)
        if kind is not None:
            return kind(self, value, depth)  # type: ignore[no-any-return]
        return self._encode_object(value, t, depth)

    # -- sized containers ---------------------------------------------------------------
    def _sized(self, value: Any, read: Callable[[Any], Any], watch: bool) -> tuple[Any, int]:
        """The copied items of a container and its size; items None when it is oversized
        (then identified by identity)."""
        size = base_len(value)  # before any copy: a million-entry table is not copied
        if self.bounded and size > self.budget:
            self.oversized = True
            self.budget = -1
            return None, size
        items = stable(read, value)
        if watch:
            self.mutables.append(MutableWatch(value, items if type(items) is not list else tuple(items), read))
        return items, size

    def _identity(self, value: Any, name: bytes, size: int) -> bytes:
        return b"<" + name + b" len=%d" % size + self._identity_token(value) + b">"

    def _identity_token(self, value: Any) -> bytes:
        if not self.identity or self.reduced:
            return b""
        self.identified = True
        return b" #%x" % id(value)

    def sequence(self, value: Any, read: Callable[[Any], Any], name: bytes, watch: bool, depth: int) -> bytes:
        items, size = self._sized(value, read, watch)
        if items is None:
            return self._identity(value, name, size)
        return name + b"(" + b",".join(self.encode(v, depth + 1) for v in items) + b")"

    def unordered(self, value: Any, read: Callable[[Any], Any], name: bytes, watch: bool, depth: int) -> bytes:
        items, size = self._sized(value, read, watch)
        if items is None:
            return self._identity(value, name, size)
        return name + b"{" + b",".join(sorted(self.encode(v, depth + 1) for v in items)) + b"}"

    def mapping(self, value: Any, depth: int, *, ordered: bool, read: Callable[[Any], Any] = read_dict) -> bytes:
        flat, size = self._sized(value, read, True)
        if flat is None:
            return self._identity(value, b"dict", size)
        pairs = [
            self.encode(flat[i], depth + 1) + b":" + self.encode(flat[i + 1], depth + 1) for i in range(0, len(flat), 2)
        ]
        return b"{" + b",".join(pairs if ordered else sorted(pairs)) + b"}"

    def buffer(self, value: Any, read: Callable[[Any], Any], head: bytes, watch: bool) -> bytes:
        data = stable(read, value)
        if len(data) > _MAX_ATOM:
            self.oversized = True  # in full, but in-place changes are not watched
            return head + _streamed(data)
        if watch:
            self.mutables.append(MutableWatch(value, data, read))
        return head + canonical_const(data)

    # -- objects --------------------------------------------------------------------------
    def _state(self, value: Any, depth: int, *, subclass: bool = False) -> bytes:
        """Instance ``__dict__`` (sorted) and slots; ``b""`` when there is none."""
        state = instance_dict(value)
        out = b""
        if state is not None and (dict.__len__(state) or not subclass):
            out = self.mapping(state, depth + 1, ordered=False, read=read_instance_dict)
        slots = _slot_values(value)
        if slots:
            out += b"slots" + self.encode(tuple(slots), depth + 1)
        return out

    def _encode_object(self, value: Any, t: type, depth: int) -> bytes:
        head = b"obj:" + type_name(t).encode()
        # A library object by its own reduction (a tensor's __dict__ is empty, its data is not);
        # user objects, and library objects without one, by instance dict and slots.
        reduced = library_reduce(value, t) if is_external_type(t) else None
        if type(reduced) is str:  # "a global of the type's module" (dtypes, singletons)
            return head + b"=" + reduced.encode()  # type: ignore[union-attr]
        if type(reduced) is tuple and len(reduced) >= 2:  # type: ignore[arg-type]
            self.reduced += 1  # its parts may be temporaries: no identities in there
            try:
                return head + b"=" + self.encode(_reduced_parts(reduced), depth + 1)  # type: ignore[arg-type]
            finally:
                self.reduced -= 1
        self.note_instance(value, t)
        if instance_dict(value) is not None or _slot_values(value):
            return head + self._state(value, depth)
        # Nothing readable: a library's named singleton (``dataclasses.MISSING``) by its name,
        # anything else by the object's identity, the only thing that tells two apart.
        named = _module_global_name(value, t) if is_external_type(t) else None
        if named is not None:
            return head + b"=" + named.encode()
        return head + b"<opaque" + self._identity_token(value) + b">"


def _module_global_name(value: object, t: type) -> str | None:
    """The name ``value`` is bound to in its type's module (a library's sentinel), if any."""
    module = sys.modules.get(type_module(t))
    if not is_a(module, ModuleType):
        return None
    for name, bound in dict_items(module_dict(module)):  # type: ignore[arg-type]
        if bound is value and type(name) is str:
            return name  # type: ignore[return-value]
    return None


def _encode_atom(value: Any, t: type) -> bytes:
    if t is str and len(value) > _MAX_ATOM:
        return b"s%d:" % len(value) + _streamed_str(value)
    if t is bytes and len(value) > _MAX_ATOM:
        return b"b%d:" % len(value) + _streamed(value)
    if t is int and not -_BIG_INT < value < _BIG_INT:  # beyond int->str conversion limits
        return b"ix" + int.__format__(value, "x").encode()
    return canonical_const(value)


def _streamed(data: Any) -> bytes:
    return b"blake3:" + blake3(data, max_threads=1).digest().hex().encode()


def _streamed_str(text: str) -> bytes:
    h = blake3()
    for start in range(0, len(text), _CHUNK):
        h.update(text[start : start + _CHUNK].encode("utf-8", "surrogatepass"))
    return b"blake3:" + h.digest().hex().encode()


def _slot_descriptors(t: type) -> list[tuple[str, type, MemberDescriptorType]]:
    """``(name, class, descriptor)`` of every ``__slots__`` member along ``t``'s MRO."""
    out: list[tuple[str, type, MemberDescriptorType]] = []
    for klass in type_mro(t):
        namespace = class_dict(klass)
        names = namespace.get("__slots__", ())
        names = (names,) if type(names) is str else names if type(names) is tuple or type(names) is list else ()
        for name in names:
            descr = namespace.get(name, MISSING) if type(name) is str else MISSING
            if type(descr) is MemberDescriptorType:
                out.append((name, klass, descr))
    return out


def _slot_values(value: object) -> list[tuple[str, object]]:
    """``(name, value)`` of every ``__slots__`` member along the MRO, by the slot descriptors."""
    out: list[tuple[str, object]] = []
    for name, klass, descr in _slot_descriptors(type(value)):
        try:
            out.append((name, descr.__get__(value, klass)))
        except Exception:
            out.append((name, "<unset>"))
    return out


_UNSET = object()  # a slot without a value, in a slot read


def _slot_reader(instances: tuple[object, ...]) -> Callable[[Any], list]:
    """The read of a :class:`MutableWatch` over ``instances``' ``__slots__`` members: each
    one's ``type()`` followed by its slot values (by the descriptors of the class it had)."""
    plan = tuple((obj, tuple(d for _n, _k, d in _slot_descriptors(type(obj)))) for obj in instances)

    def read(_instances: Any) -> list:
        out: list[object] = []
        for obj, descriptors in plan:
            t = type(obj)
            out.append(t)
            for descr in descriptors:
                try:
                    out.append(descr.__get__(obj, t))
                except Exception:  # unset, or __class__ now names a class without this slot
                    out.append(_UNSET)
        return out

    return read


def read_contextvar(var: Any) -> tuple:
    """A context variable's value in the current context: ``(value,)``, ``()`` when unset
    (its default is then what ``get()`` gives, and the default is a constant of the var)."""
    try:
        return (_CONTEXTVAR_GET(var),)
    except LookupError:
        return ()


def read_local(local: Any) -> tuple:
    """A ``threading.local``'s attributes in the calling thread (the items of that thread's dict)."""
    return read_dict(_LOCAL_GETATTR(local, "__dict__"))


_CONTEXTVAR_GET = contextvars.ContextVar.get
_CONTEXTVAR_NAME = contextvars.ContextVar.__dict__["name"]
_LOCAL_GETATTR = _thread._local.__getattribute__  # the C type's own: a subclass override never runs


def _reduced_parts(reduced: tuple) -> tuple:
    """The constructor's name and its arguments/state from a ``__reduce_ex__`` tuple."""
    ctor = reduced[0]
    return (f"{callable_module(ctor)}.{object_qualname(ctor)}", *reduced[1:3])


# -- per-type encoders (dispatched by identity along the MRO) --------------------------------
def _enum_kind(w: _Walker, value: Any, depth: int) -> bytes:
    state = instance_dict(value) or {}
    name, inner = state.get("_name_"), state.get("_value_", MISSING)
    text = name.encode() if type(name) is str else b"?"
    tail = b"=" + w.encode(inner, depth + 1) if inner is not MISSING else b""
    return b"enum:" + type_name(type(value)).encode() + b"." + text + tail


def _int(w: _Walker, v: Any, depth: int) -> bytes:
    return _encode_atom(int.__index__(v), int)


def _float(w: _Walker, v: Any, depth: int) -> bytes:
    return canonical_const(float.__float__(v))


def _complex(w: _Walker, v: Any, depth: int) -> bytes:
    return canonical_const(complex(complex.__dict__["real"].__get__(v), complex.__dict__["imag"].__get__(v)))


def _str(w: _Walker, v: Any, depth: int) -> bytes:
    return _encode_atom(str.__str__(v), str)


def _bytes(w: _Walker, v: Any, depth: int) -> bytes:
    return _encode_atom(bytes.__getitem__(v, slice(None)), bytes)


def _tuple(w: _Walker, v: Any, depth: int) -> bytes:
    return w.sequence(v, lambda x: tuple.__getitem__(x, slice(None)), b"tuple", False, depth)


def _list(w: _Walker, v: Any, depth: int) -> bytes:
    return w.sequence(v, read_list, b"list", True, depth)


def _set(w: _Walker, v: Any, depth: int) -> bytes:
    return w.unordered(v, read_set, b"set", True, depth)


def _frozenset(w: _Walker, v: Any, depth: int) -> bytes:
    return w.unordered(v, frozenset.copy, b"frozenset", False, depth)


def _dict(w: _Walker, v: Any, depth: int) -> bytes:
    return b"dict" + w.mapping(v, depth, ordered=True)


def _odict(w: _Walker, v: Any, depth: int) -> bytes:
    return b"odict" + w.mapping(v, depth, ordered=True, read=read_odict)


def _defaultdict(w: _Walker, v: Any, depth: int) -> bytes:
    flat, size = w._sized(v, read_defaultdict, True)
    if flat is None:
        return w._identity(v, b"defaultdict", size)
    pairs = [w.encode(flat[i], depth + 1) + b":" + w.encode(flat[i + 1], depth + 1) for i in range(1, len(flat), 2)]
    return b"defaultdict[" + w.encode(flat[0], depth + 1) + b"]{" + b",".join(pairs) + b"}"


def _deque(w: _Walker, v: Any, depth: int) -> bytes:
    maxlen = collections.deque.__dict__["maxlen"].__get__(v)
    return b"deque[maxlen=%b]" % repr(maxlen).encode() + w.sequence(v, read_deque, b"", True, depth)


def _bytearray(w: _Walker, v: Any, depth: int) -> bytes:
    return w.buffer(v, read_bytearray, b"bytearray", True)


def _array(w: _Walker, v: Any, depth: int) -> bytes:
    code = array.array.__dict__["typecode"].__get__(v)
    return w.buffer(v, read_array, b"array[" + code.encode() + b"]", True)


def _memoryview(w: _Walker, v: Any, depth: int) -> bytes:
    try:
        head = b"memoryview[%b%b]" % (v.format.encode(), repr(v.shape).encode())
        return w.buffer(v, read_memoryview, head, not v.readonly)
    except ValueError:  # released
        return b"memoryview<released>"


def _function(w: _Walker, v: Any, depth: int) -> bytes:
    return b"fn:" + qualified(v).encode() + b"#" + code_digest(v.__code__).encode()


def _class(w: _Walker, v: Any, depth: int) -> bytes:
    return b"class:" + type_name(v).encode()


def _module(w: _Walker, v: Any, depth: int) -> bytes:
    return b"module:" + module_name(v).encode()


def _code(w: _Walker, v: Any, depth: int) -> bytes:
    return b"code:" + code_digest(v).encode()


def _contextvar(w: _Walker, v: Any, depth: int) -> bytes:
    name = _CONTEXTVAR_NAME.__get__(v)
    return (
        b"contextvar:" + str.encode(name, "utf-8", "surrogatepass") + w.sequence(v, read_contextvar, b"", True, depth)
    )


def _thread_local(w: _Walker, v: Any, depth: int) -> bytes:
    head = b"threadlocal:" + type_name(type(v)).encode()
    for klass in type_mro(type(v)):
        if klass is _thread._local:
            break
        if "__init__" in class_dict(klass):  # a thread's first read runs this __init__: not read
            return head + b"<init" + w._identity_token(v) + b">"
    return head + w.mapping(v, depth, ordered=False, read=read_local)


def _mappingproxy(w: _Walker, v: Any, depth: int) -> bytes:
    """A read-only view (a class's ``__dict__``, ``Field.metadata``) by the dict it shows."""
    for ref in gc.get_referents(v):
        if type(ref) is dict:
            return b"mappingproxy" + w.mapping(ref, depth, ordered=True)
    return b"mappingproxy<" + w._identity_token(v) + b">"


_UNION_ARGS = UnionType.__dict__["__args__"]


def _union(w: _Walker, v: Any, depth: int) -> bytes:
    """``int | None`` (PEP 604) by its members, in order: it has no reduction before 3.12,
    and digested by identity it made every function annotated with one (a dataclass's
    generated ``__init__``) unshareable across processes."""
    return b"union" + w.encode(_UNION_ARGS.__get__(v), depth + 1)


_PATTERN_TEXT, _PATTERN_FLAGS = re.Pattern.__dict__["pattern"], re.Pattern.__dict__["flags"]


def _pattern(w: _Walker, v: Any, depth: int) -> bytes:
    """A compiled regular expression (a module-level ``re.compile``, read by a helper that
    parses an arch name while tracing) by what it was compiled from: its pattern and flags.
    It has no reduction of its own (``copyreg`` pickles it), and digested by identity it made
    every launcher reading one unshareable across processes."""
    return b"re.Pattern" + w.encode((_PATTERN_TEXT.__get__(v), _PATTERN_FLAGS.__get__(v)), depth + 1)


def _lock(w: _Walker, v: Any, depth: int) -> bytes:
    """A lock by its type: its state is the moment's, not an input of a build."""
    return b"lock:" + type_name(type(v)).encode()


def _builtin(w: _Walker, v: Any, depth: int) -> bytes:
    return b"callable:" + qualified(v).encode()


def _method(w: _Walker, v: Any, depth: int) -> bytes:
    return b"method:" + w.encode(v.__func__, depth + 1) + b"@" + w.encode(v.__self__, depth + 1)


def _wrapped_callable(attrs: tuple[str, ...], base: type) -> Callable[[_Walker, Any, int], bytes]:
    fields = tuple(base.__dict__[a] for a in attrs)
    head = base.__name__.encode()

    def encode(w: _Walker, v: Any, depth: int) -> bytes:
        return head + b"(" + b",".join(w.encode(f.__get__(v), depth + 1) for f in fields) + b")"

    return encode


def _kind_along_mro(t: type) -> Any:
    """The encoder of the first known class of ``t``'s MRO; enums first (an ``IntEnum``
    member is an ``int`` too, but is digested as a member)."""
    mro = type_mro(t)
    if any(klass is enum.Enum for klass in mro):
        return _enum_kind
    return _KINDS.along_mro(t)


_BASE_TYPES = TypeTable(
    (t, True)
    for t in (int, float, complex, str, bytes, tuple, list, set, frozenset, dict, bytearray, array.array)
    + (collections.OrderedDict, collections.defaultdict, collections.deque, memoryview)
)
_KINDS = TypeTable(
    [
        (enum.Enum, _enum_kind),
        (int, _int),
        (float, _float),
        (complex, _complex),
        (str, _str),
        (bytes, _bytes),
        (tuple, _tuple),
        (list, _list),
        (set, _set),
        (frozenset, _frozenset),
        (collections.OrderedDict, _odict),
        (collections.defaultdict, _defaultdict),
        (dict, _dict),
        (collections.deque, _deque),
        (bytearray, _bytearray),
        (array.array, _array),
        (memoryview, _memoryview),
        (contextvars.ContextVar, _contextvar),
        (_thread.LockType, _lock),
        (UnionType, _union),
        (re.Pattern, _pattern),
        (MappingProxyType, _mappingproxy),
        (_thread.RLock, _lock),
        (_thread._local, _thread_local),
        (FunctionType, _function),
        (type, _class),
        (ModuleType, _module),
        (CodeType, _code),
        (BuiltinFunctionType, _builtin),
        (MethodType, _method),
        (staticmethod, _wrapped_callable(("__func__",), staticmethod)),
        (classmethod, _wrapped_callable(("__func__",), classmethod)),
        (property, _wrapped_callable(("fget", "fset", "fdel"), property)),
    ]
)
_KIND_BY_ID = {id(t): fn for t, fn in _KINDS.items() if t is not enum.Enum}  # exact types first
_BASE_TYPE_IDS = frozenset(id(t) for t, _ in _BASE_TYPES.items())
_BASE_KINDS = frozenset(
    {_int, _float, _complex, _str, _bytes, _tuple, _list, _set, _frozenset, _odict, _defaultdict, _dict, _deque}
    | {_bytearray, _array}
)


def snapshot(value: object, *, limit: int | None = None) -> Snapshot:
    """The structural snapshot of a live ``value`` (see module docstring)."""
    return _snapshot(value, SNAPSHOT_LIMIT if limit is None else limit, identity=True)


def _snapshot(value: object, limit: int | None, identity: bool) -> Snapshot:
    walker = _Walker(limit, identity)
    try:
        encoded = walker.encode(value)
    except RecursionError:
        walker.oversized = True
        encoded = b"<deep " + type_name(type(value)).encode() + b">"
    digest = blake3(b"flydeps-value-v1\0" + encoded).digest().hex()
    instances = tuple(walker.instances)
    slotted = tuple(obj for obj in instances if _slot_descriptors(type(obj)))
    if slotted:  # slot stores have no counter: re-read on every check
        read = _slot_reader(slotted)
        walker.mutables.append(MutableWatch(slotted, tuple(read(slotted)), read))
    types = tuple(walker.types.values())
    return Snapshot(
        digest, describe(value), walker.oversized, tuple(walker.mutables), walker.identified, types, instances
    )


def value_digest(value: object) -> str:
    """Hex digest of ``value`` in full, without identities: for literals read from files
    (the static front-end), where a bound or an object identity would mean nothing."""
    return _snapshot(value, None, identity=False).digest
