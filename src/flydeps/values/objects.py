"""What a live object is and what it is called, read without running user code.

Contract: pure functions over live objects used by discovery and value snapshots: names
(module, qualified name, the definition's qualified name behind ``functools.wraps``), the
class a function was defined in, whether a type or callable belongs to a library, the
code-valued attributes of an instance, a library object's own reduction, the short safe
description of a value for messages (:func:`describe`), and the low-level reads they rest
on.

Never runs user code, which rules out the obvious spellings:

* ``isinstance(obj, T)`` falls back to ``obj.__class__`` (an instance ``__getattribute__``,
  a ``__class__`` property) when ``type(obj)`` is not a ``T``: we test ``type(obj)`` with
  :func:`is_a` (``issubclass`` of two real types compares MROs in C);
* ``cls.__module__``/``cls.__qualname__``/``cls.__mro__`` go through a metaclass
  ``__getattribute__``: we call ``type``'s own descriptors (:func:`type_module`, ...);
* ``t in (list, dict)`` and dict lookups keyed by classes call a metaclass ``__eq__`` or
  ``__hash__``: tables of types are keyed by ``id`` (:class:`TypeTable`);
* ``obj.__dict__`` runs a ``__dict__`` property and ``object.__getattribute__`` still finds
  it first: :func:`instance_dict` calls only the interpreter's own ``__dict__`` getset;
* ``module.__name__`` on a module subclass runs its ``__getattribute__``: :func:`module_dict`
  reads the module's real namespace.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Iterable
from types import BuiltinFunctionType, CodeType, FunctionType, GetSetDescriptorType, MemberDescriptorType, ModuleType
from typing import Any

from ..code import origin as _origin
from ..graph import Location
from .bindings import MISSING, class_dict, dict_items, is_a, is_code
from .containers import sequence_items

__all__ = [
    "TypeTable",
    "callable_module",
    "canonical_repr",
    "describe",
    "instance_dict",
    "is_a",
    "library_attr",
    "library_reduce",
    "module_dict",
    "module_name",
    "qualified",
    "type_bases",
    "type_module",
    "type_mro",
    "type_qualname",
]

_TYPE_MODULE = type.__dict__["__module__"]
_TYPE_QUALNAME = type.__dict__["__qualname__"]
_TYPE_MRO = type.__dict__["__mro__"]
_TYPE_BASES = type.__dict__["__bases__"]
_TYPE_FLAGS = type.__dict__["__flags__"]
_MODULE_DICT = vars(ModuleType)["__dict__"]
_HEAPTYPE = 1 << 9  # Py_TPFLAGS_HEAPTYPE: a class made by a class statement (or type())
_C_DESCRIPTORS = (GetSetDescriptorType, MemberDescriptorType)


class TypeTable:
    """A mapping from classes to values looked up by identity (never a metaclass ``__hash__``/``__eq__``).

    The classes are kept alive by the table, so their ids cannot be recycled."""

    __slots__ = ("_by_id", "_keep")

    def __init__(self, items: Iterable[tuple[type, Any]] = ()) -> None:
        self._by_id: dict[int, Any] = {}
        self._keep: list[type] = []
        for t, value in items:
            self.add(t, value)

    def add(self, t: type, value: Any) -> None:
        self._by_id[id(t)] = value
        self._keep.append(t)

    def get(self, t: type, default: Any = None) -> Any:
        return self._by_id.get(id(t), default)

    def __contains__(self, t: object) -> bool:
        return id(t) in self._by_id

    def __len__(self) -> int:
        return len(self._by_id)

    def items(self) -> list[tuple[type, Any]]:
        return [(t, self._by_id[id(t)]) for t in self._keep if id(t) in self._by_id]

    def along_mro(self, t: type) -> Any:
        """The value of the first class of ``t``'s MRO in the table (None when none is)."""
        by_id = self._by_id
        for klass in type_mro(t):
            found = by_id.get(id(klass))
            if found is not None:
                return found
        return None


def type_module(t: type) -> str:
    """``t.__module__`` read through ``type``'s descriptor; ``"?"`` when it is not a str."""
    try:
        module = _TYPE_MODULE.__get__(t)
    except Exception:
        return "?"
    return module if type(module) is str else "?"


def type_qualname(t: type) -> str:
    return _TYPE_QUALNAME.__get__(t)  # type: ignore[no-any-return]  # always a str


def type_mro(t: type) -> tuple[type, ...]:
    return _TYPE_MRO.__get__(t)  # type: ignore[no-any-return]


def type_bases(t: type) -> tuple[type, ...]:
    return _TYPE_BASES.__get__(t)  # type: ignore[no-any-return]


def type_name(t: type) -> str:
    """``module.Qualname`` of a class, for digests and messages."""
    return f"{type_module(t)}.{type_qualname(t)}"


def is_heap_type(t: type) -> bool:
    return bool(_TYPE_FLAGS.__get__(t) & _HEAPTYPE)


def module_dict(module: ModuleType) -> dict:
    """The real namespace of a module (or module subclass instance)."""
    return _MODULE_DICT.__get__(module)  # type: ignore[no-any-return]


def module_name(module: ModuleType) -> str:
    name = module_dict(module).get("__name__")
    return name if type(name) is str else "?"


def instance_dict(obj: object) -> dict | None:
    """The instance ``__dict__`` through the interpreter's own ``__dict__`` getset (or a C
    type's ``__dict__`` member) found along the MRO; None when the object has none or its
    class hides it behind another descriptor (a ``__dict__`` property is never called)."""
    for klass in type_mro(type(obj)):
        descr = class_dict(klass).get("__dict__", MISSING)
        if type(descr) is GetSetDescriptorType or type(descr) is MemberDescriptorType:
            try:
                state = descr.__get__(obj, type(obj))
            except Exception:
                return None
            return state if type(state) is dict else None
    return None


def library_attr(obj: object, name: str) -> object:
    """``obj.<name>`` when it can be read without user code: from the instance dict, or a C
    descriptor / plain value found along the type's MRO. ``MISSING`` otherwise."""
    state = instance_dict(obj)
    if state is not None:
        value = state.get(name, MISSING)
        if value is not MISSING:
            return value
    for klass in type_mro(type(obj)):
        value = class_dict(klass).get(name, MISSING)
        if value is MISSING:
            continue
        if is_a(value, _C_DESCRIPTORS):
            try:
                return value.__get__(obj, type(obj))  # type: ignore[attr-defined]
            except Exception:
                return MISSING
        return value if type(value) is str else MISSING
    return MISSING


def location(code: CodeType) -> Location:
    return Location(code.co_filename.rsplit("/", 1)[-1], code.co_firstlineno)


def module_of(obj: object) -> str:
    """The module an object belongs to: its own ``__module__`` (functions, classes, C
    callables), a module's name, or its class's module for other instances."""
    t = type(obj)
    if t is FunctionType or t is BuiltinFunctionType:
        module = obj.__module__  # type: ignore[attr-defined]
        return module if type(module) is str else "?"
    if is_a(obj, type):
        return type_module(obj)  # type: ignore[arg-type]
    if is_a(obj, ModuleType):
        return module_name(obj)  # type: ignore[arg-type]
    return type_module(t)


def object_qualname(obj: object) -> str:
    """A function's, class's or C callable's qualified name; an instance's class's otherwise."""
    t = type(obj)
    if t is FunctionType:
        qual = obj.__qualname__  # type: ignore[attr-defined]
        return qual if type(qual) is str else "?"
    if is_a(obj, type):
        return type_qualname(obj)  # type: ignore[arg-type]
    if t is BuiltinFunctionType:
        return _builtin_qualname(obj)  # type: ignore[arg-type]
    return type_qualname(t)


def _builtin_qualname(fn: BuiltinFunctionType) -> str:
    """As CPython's own ``__qualname__`` of a builtin, without looking the bound class's
    name up through its metaclass."""
    bound = fn.__self__
    if bound is None or is_a(bound, ModuleType):
        return fn.__name__
    owner = bound if is_a(bound, type) else type(bound)
    return f"{type_qualname(owner)}.{fn.__name__}"  # type: ignore[arg-type]


def is_member_code(value: object) -> bool:
    """A class member that is code: a function, static/class method, property or
    ``functools.cached_property`` (a library descriptor around a user function)."""
    return is_a(value, _MEMBER_CODE)


_MEMBER_CODE = (FunctionType, staticmethod, classmethod, property, functools.cached_property)


def c_descriptor_name(value: object) -> str | None:
    """``module.Class.name`` of a C slot or getset descriptor (``object.__class__``, a
    ``__slots__`` member), read through the descriptor type's own members; None otherwise."""
    t = type(value)
    if t is not GetSetDescriptorType and t is not MemberDescriptorType:
        return None
    owner = t.__dict__["__objclass__"].__get__(value)
    return f"{type_module(owner)}.{type_qualname(owner)}.{t.__dict__['__name__'].__get__(value)}"


def is_c_callable(obj: object) -> bool:
    """A builtin function or another callable of a static (C-defined) builtins type."""
    t = type(obj)
    if t is BuiltinFunctionType:
        return True
    return not is_heap_type(t) and type_module(t) == "builtins" and not is_a(obj, type)


def c_module(obj: object) -> str:
    """Module of a C callable: its own, its defining class's, or its bound object's type's."""
    module = library_attr(obj, "__module__")
    if type(module) is str:
        return module  # type: ignore[return-value]
    owner = library_attr(obj, "__objclass__")
    if not is_a(owner, type):
        bound = library_attr(obj, "__self__")
        owner = bound if is_a(bound, type) else type(bound) if bound is not MISSING else type(obj)
    return type_module(owner)  # type: ignore[arg-type]


def is_external_type(cls: type) -> bool:
    return _origin.is_external_module(type_module(cls))


def class_id(namespace: dict) -> str:
    module, qual = namespace.get("__module__", "?"), namespace.get("__qualname__", "?")
    return f"{module if type(module) is str else '?'}:{qual if type(qual) is str else '?'}"


def code_members(value: object) -> list[tuple[str, object]]:
    """Code-valued entries of an instance's ``__dict__`` (read without running user code)."""
    state = instance_dict(value)
    if state is None:
        return []
    return [(k, v) for k, v in dict_items(state) if type(k) is str and is_code(v)]


def safe_name(obj: object) -> str:
    """``__qualname__``/``__name__`` of an object if it has a string one, read without
    running user code (see :func:`library_attr`); ``""`` otherwise."""
    t = type(obj)
    if t is FunctionType or t is BuiltinFunctionType or is_a(obj, type):
        return object_qualname(obj)
    for attr in ("__qualname__", "__name__"):
        name = library_attr(obj, attr)
        if type(name) is str:
            return name  # type: ignore[return-value]
    return ""


def function_qualname(fn: FunctionType, code: CodeType) -> str:
    """The qualified name of the definition (``co_qualname`` on 3.11+)."""
    qualname = getattr(code, "co_qualname", None)
    if qualname is not None:
        return qualname
    qualname = fn.__qualname__ if type(fn.__qualname__) is str else code.co_name
    if dict.__contains__(fn.__dict__, "__wrapped__") and code.co_name != qualname.rpartition(".")[2]:
        qualname = f"{qualname}.<wrapper {code.co_name}>"  # 3.10: keep wrappers apart
    return qualname


def defining_class(fn: FunctionType, qualname: str) -> type | None:
    """The class a function was defined in, found through its qualname (``A.B.f``)."""
    if "." not in qualname:  # a module-level function
        return None
    parts = qualname.split(".")
    if len(parts) < 2 or "<locals>" in parts:
        return None
    obj: object = dict.get(fn.__globals__, parts[0], MISSING)
    for part in parts[1:-1]:
        if not is_a(obj, type):
            return None
        obj = class_dict(obj).get(part, MISSING)  # type: ignore[arg-type]
    return obj if is_a(obj, type) else None  # type: ignore[return-value]


def library_wrapped(fn: FunctionType) -> object:
    """The user object a library ``functools.wraps``-style wrapper wraps, or ``MISSING``.

    Follows ``__wrapped__`` (read from the real ``__dict__`` of each wrapper) through
    library functions and stops at the first object that is not one; a chain that ends in
    library code (or loops) gives ``MISSING``: the wrapper is then a plain library leaf."""
    seen = {id(fn)}
    current: object = fn
    while type(current) is FunctionType:
        if not _origin.is_external_module(function_module(current)):  # type: ignore[arg-type]
            return current if current is not fn else MISSING
        inner = dict.get(current.__dict__, "__wrapped__", MISSING)  # type: ignore[attr-defined]
        if inner is MISSING or id(inner) in seen:
            return MISSING
        seen.add(id(inner))
        current = inner
    if current is fn or current is MISSING:
        return MISSING
    if is_a(current, type):
        return MISSING if is_external_type(current) else current  # type: ignore[arg-type]
    return MISSING if is_external_type(type(current)) or is_c_callable(current) else current


def library_innermost(fn: FunctionType) -> FunctionType:
    """The library function a library ``functools.wraps`` wrapper stands for: ``__wrapped__``
    followed through library functions to the last one (``fn`` itself when it wraps
    nothing). A leaf is named by it, where the library defines it, as the static side names
    it (a library's decorated ``def g`` is ``libmod.g``, not the decorator module's ``inner``;
    flydsl_runtime's keyed ``get_rocm_arch`` is FlyDSL's)."""
    seen = {id(fn)}
    current = fn
    while True:
        inner = dict.get(current.__dict__, "__wrapped__", MISSING)
        if type(inner) is not FunctionType or id(inner) in seen:
            return current
        if not _origin.is_external_module(function_module(inner)):  # type: ignore[arg-type]
            return current
        seen.add(id(inner))
        current = inner  # type: ignore[assignment]


def function_module(fn: FunctionType) -> str:
    """Where a function's code was defined: its globals' ``__name__`` (``functools.wraps``
    copies ``__module__`` onto wrappers; the globals keep the truth)."""
    globals_ = fn.__globals__
    module = dict.get(globals_, "__name__", None) if is_a(globals_, dict) else None
    return module if type(module) is str else module_of(fn)


def library_reduce(value: object, t: type) -> object:
    """``value``'s own pickle reduction when a library class (not ``object``) defines it:
    library code only, never a generic reduction that would look attributes up on the object."""
    for klass in type_mro(t):
        if klass is object:
            return None
        namespace = class_dict(klass)
        if "__reduce_ex__" in namespace or "__reduce__" in namespace:
            break
    try:
        return t.__reduce_ex__(value, 4)  # type: ignore[arg-type, call-arg]
    except Exception:
        return None


def callable_module(obj: object) -> str:
    t = type(obj)
    module = obj.__module__ if t is FunctionType or t is BuiltinFunctionType else None  # type: ignore[attr-defined]
    if is_a(obj, type):
        return type_name(obj).rpartition(".")[0] or "?"  # type: ignore[arg-type]
    return module if type(module) is str else "?"


def qualified(obj: object) -> str:
    return f"{callable_module(obj)}.{object_qualname(obj)}"


_DESCRIBED_ATOMS = TypeTable((t, True) for t in (type(None), bool, int, float, complex, str, bytes, type(Ellipsis)))


def describe(value: object, width: int = 60) -> str:
    """A short description for messages: literal reprs for builtin atoms, ``<Type len=N>``
    for containers, ``<module.Type object>`` otherwise. Never calls a user ``__repr__``."""
    t = type(value)
    if t in _DESCRIBED_ATOMS:
        if t is int and value.bit_length() > 12_000:  # type: ignore[attr-defined]
            text = f"<int bits={value.bit_length()}>"  # type: ignore[attr-defined]
        else:
            text = repr(value[: width + 1]) if t is str or t is bytes else repr(value)  # type: ignore[index]
    elif t in _CONTAINER_REPRS:
        size = len(value)  # type: ignore[arg-type]
        text = f"<{t.__name__} len={size}>"
        if size <= 8:
            try:
                inner = canonical_repr(value)
                text = inner if len(inner) <= width else text
            except (RecursionError, RuntimeError):
                pass
    elif t is FunctionType or t is BuiltinFunctionType or is_a(value, type):
        text = f"<{qualified(value)}>"
    elif is_a(value, ModuleType):
        text = f"<module {module_name(value)}>"  # type: ignore[arg-type]
    elif any(klass is enum.Enum for klass in type_mro(t)):
        name = (instance_dict(value) or {}).get("_name_")
        text = f"{type_name(t).rpartition('.')[2]}.{name if type(name) is str else '?'}"
    else:
        text = _describe_object(value, t)
    return text if len(text) <= width else text[: width - 3] + "..."


def _describe_object(value: object, t: type) -> str:
    text = f"<{type_name(t)} object>"
    if is_external_type(t):
        reduced = library_reduce(value, t)
        if type(reduced) is str:  # torch.float16 and other named singletons
            text = f"{type_name(t).partition('.')[0]}.{reduced}"
    return text


_CONTAINER_REPRS = TypeTable((t, True) for t in (tuple, list, set, frozenset, dict, bytearray))


def canonical_repr(value: object) -> str:
    """repr() of builtin atoms and containers of them; other elements as ``<Type>``."""
    t = type(value)
    if t in _DESCRIBED_ATOMS:
        return repr(value)
    if t is tuple or t is list:
        open_, close = ("(", ")") if t is tuple else ("[", "]")
        return open_ + ", ".join(canonical_repr(v) for v in sequence_items(value)) + close
    if t is dict:
        return "{" + ", ".join(f"{canonical_repr(k)}: {canonical_repr(v)}" for k, v in dict_items(value)) + "}"  # type: ignore[arg-type]
    return f"<{type_name(t)}>"
