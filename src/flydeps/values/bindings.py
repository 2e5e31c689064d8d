"""Bindings: the live facts a fingerprint depends on, recorded during discovery.

Contract: data plus the few primitive reads that resolve names without running user
code. A binding says "``container[key]`` (or ``container.key``) was ``expected``"; the
guard re-checks bindings, discovery records them. Resolution reads module and class
namespaces through their real dicts only: no ``getattr`` on user objects, so a raising
``__getattr__`` or a descriptor never runs.
"""

from __future__ import annotations

import enum
import functools
import gc
from types import BuiltinFunctionType, CodeType, FunctionType, MethodType, ModuleType
from typing import NamedTuple

__all__ = ["Binding", "BindingKind", "MISSING", "class_dict", "dict_items", "is_a", "is_code", "lookup_mro"]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING: object = _Missing()


class BindingKind(str, enum.Enum):
    DICT = "dict"  # container is a dict (module or class namespace), key a name in it
    ATTR = "attr"  # container is a function, key one of __code__/__defaults__/__kwdefaults__
    CELL = "cell"  # container is a closure cell
    # container is a dict that is no user namespace (``sys.modules``, a library module's
    # namespace), key an entry the graph reads: checked as DICT is, but not a namespace a
    # build is judged to have written (an import during a trace writes sys.modules)
    ENTRY = "entry"
    # container is an instance a build read, key "__class__", expected its type: re-read
    # (``type(container)``, never a ``__class__`` property) when the audit generation moved
    TYPE = "type"


class Binding(NamedTuple):
    """``container[key]`` / ``container.key`` held ``expected`` when the graph was built.

    ``node`` is the graph node whose digest depends on it, ``label`` the dotted name a
    user would recognise (``pkg.mem._load_q``), ``code`` whether the bound thing is code
    (function, class, module, code swap) rather than a data value.

    An immutable record built in C (discovery records several per helper: a frozen
    dataclass's Python ``__init__`` was a tenth of a cold fingerprint). Compared and
    hashed by identity, as before: comparing by value would call ``expected.__eq__``,
    user code.
    """

    kind: BindingKind
    container: object
    key: str
    expected: object
    node: str
    label: str
    code: bool

    def __eq__(self, other: object) -> bool:  # identity: never the values' own __eq__
        return self is other

    def __ne__(self, other: object) -> bool:
        return self is not other

    def __hash__(self) -> int:
        return object.__hash__(self)

    def current(self) -> object:
        """What the binding holds now (``MISSING`` when gone). Never runs user code."""
        if self.kind is BindingKind.DICT or self.kind is BindingKind.ENTRY:
            return dict.get(self.container, self.key, MISSING)  # type: ignore[call-overload]
        if self.kind is BindingKind.TYPE:
            return type(self.container)
        if self.kind is BindingKind.CELL:
            try:
                return self.container.cell_contents  # type: ignore[attr-defined]
            except ValueError:
                return MISSING
        return getattr(self.container, self.key, MISSING)

    def holds(self) -> bool:
        return self.current() is self.expected


_CODE_TYPES = (
    FunctionType,
    MethodType,
    BuiltinFunctionType,
    ModuleType,
    CodeType,
    type,
    staticmethod,
    classmethod,
    functools.partial,
)


def is_a(obj: object, types: type | tuple[type, ...]) -> bool:
    """``isinstance`` decided by ``type(obj)`` alone.

    ``isinstance`` asks ``obj.__class__`` (an instance ``__getattribute__`` or a ``__class__``
    property: user code) whenever ``type(obj)`` is not a subclass; ``issubclass`` of two
    real classes compares MROs in C. ``types`` must be library classes (a user metaclass's
    ``__subclasscheck__`` would run)."""
    return issubclass(type(obj), types)


def is_code(value: object) -> bool:
    """True for values that are code (their change is a code change, not data drift)."""
    return issubclass(type(value), _CODE_TYPES)


_RETRIES = 1000


def dict_items(d: dict) -> list[tuple[object, object]]:
    """A copy of ``d``'s items, safe against concurrent mutation and overridden methods.

    ``dict.items`` of the base class iterates the real table in C (a subclass's ``items``,
    ``__iter__`` or ``keys`` never runs). The copy runs no Python code, so another thread can
    resize the dict meanwhile only through a garbage collection that runs Python finalizers;
    the copy is then simply retried, never surfaced."""
    for _ in range(_RETRIES):
        try:
            return list(dict.items(d))
        except RuntimeError:
            continue
    return list(dict.items(d))  # pragma: no cover - a thousand collections in a row


def class_dict(cls: type) -> dict:
    """The real namespace dict behind ``cls.__dict__`` (a read-only mappingproxy).

    The guard needs a plain dict so its checks are single C-level lookups; the
    mappingproxy's only referent is that dict."""
    proxy = type.__dict__["__dict__"].__get__(cls)
    for ref in gc.get_referents(proxy):
        if type(ref) is dict:
            return ref
    return dict(proxy)  # pragma: no cover - CPython always has the referent


def lookup_mro(owner: type, name: str) -> tuple[type | None, object, list[tuple[dict, object]]]:
    """Find ``name`` along ``owner``'s MRO without running descriptors.

    Returns the defining class (or None), the raw namespace value (``MISSING``) and the
    ``(namespace, value-or-MISSING)`` pairs looked at, in MRO order, for the guard.
    """
    looked: list[tuple[dict, object]] = []
    mro = type.__dict__["__mro__"].__get__(owner)
    for klass in mro:
        namespace = class_dict(klass)
        value = namespace.get(name, MISSING)
        looked.append((namespace, value))
        if value is not MISSING:
            return klass, value, looked
    return None, MISSING, looked
