"""What a live object is and what it is called, read without running user code.

Contract: pure functions over live objects used by discovery: names (module, qualified
name, the definition's qualified name behind ``functools.wraps``), the class a function
was defined in, whether a type or callable belongs to a library, the code-valued
attributes of an instance. Attributes are read with ``object.__getattribute__`` or from
real namespace dicts, never through instance ``__getattr__`` hooks or properties.
"""

from __future__ import annotations

from types import BuiltinFunctionType, CodeType, FunctionType, ModuleType

from . import _origin
from ._bindings import MISSING, class_dict, is_code
from .graph import Location


def location(code: CodeType) -> Location:
    return Location(code.co_filename.rsplit("/", 1)[-1], code.co_firstlineno)


def module_of(obj: object) -> str:
    module = getattr(obj, "__module__", None) if not isinstance(obj, ModuleType) else obj.__name__
    return module if isinstance(module, str) else "?"


def object_qualname(obj: object) -> str:
    try:
        qual = obj.__qualname__  # type: ignore[attr-defined]
    except Exception:
        qual = None
    if not isinstance(qual, str):
        qual = getattr(type(obj), "__qualname__", type(obj).__name__)
    return qual


def is_member_code(value: object) -> bool:
    return isinstance(value, (FunctionType, staticmethod, classmethod, property))


def is_c_callable(obj: object) -> bool:
    return isinstance(obj, BuiltinFunctionType) or type(obj).__module__ == "builtins" and not isinstance(obj, type)


def c_module(obj: object) -> str:
    """Module of a C callable: its own, its defining class's, or its bound object's type's."""
    module = getattr(obj, "__module__", None)
    if isinstance(module, str):
        return module
    owner = getattr(obj, "__objclass__", None) or type(getattr(obj, "__self__", None))
    module = getattr(owner, "__module__", None)
    return module if isinstance(module, str) else "builtins"


def is_external_type(cls: type) -> bool:
    return _origin.is_external_module(module_of(cls))


def class_id(namespace: dict) -> str:
    return f"{namespace.get('__module__', '?')}:{namespace.get('__qualname__', '?')}"


def code_members(value: object) -> list[tuple[str, object]]:
    """Code-valued entries of an instance's ``__dict__`` (read without running user code)."""
    try:
        state = object.__getattribute__(value, "__dict__")
    except Exception:
        return []
    return [(k, v) for k, v in state.items() if is_code(v)] if type(state) is dict else []


def safe_name(obj: object) -> str:
    """``__qualname__``/``__name__`` of an object if it has a string one, read without
    instance ``__getattr__`` hooks; ``""`` otherwise."""
    for attr in ("__qualname__", "__name__"):
        try:
            name = object.__getattribute__(obj, attr)
        except Exception:
            continue
        if isinstance(name, str):
            return name
    return ""


def function_qualname(fn: FunctionType, code: CodeType) -> str:
    """The qualified name of the definition (``co_qualname`` on 3.11+)."""
    qualname = getattr(code, "co_qualname", None)
    if qualname is not None:
        return qualname
    qualname = fn.__qualname__ if isinstance(fn.__qualname__, str) else code.co_name
    if "__wrapped__" in fn.__dict__ and code.co_name != qualname.rpartition(".")[2]:
        qualname = f"{qualname}.<wrapper {code.co_name}>"  # 3.10: keep wrappers apart
    return qualname


def defining_class(fn: FunctionType, qualname: str) -> type | None:
    """The class a function was defined in, found through its qualname (``A.B.f``)."""
    parts = qualname.split(".")
    if len(parts) < 2 or "<locals>" in parts:
        return None
    obj: object = fn.__globals__.get(parts[0], MISSING)
    for part in parts[1:-1]:
        if not isinstance(obj, type):
            return None
        obj = class_dict(obj).get(part, MISSING)
    return obj if isinstance(obj, type) else None
