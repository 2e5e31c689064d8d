"""Encodings both code decoders share (:mod:`.scan` reads ``co_code`` directly,
:mod:`.disref` through ``dis``): the digest's version tag, constants as stable bytes
(:func:`canonical_const`), and the names a code object reads (:class:`NameRef`, built
from an instruction stream by :func:`refs_from`).

Contract: pure functions of code objects and constants. A comprehension or class body
among the constants is encoded by its own digest, which :mod:`.bytecode` (the digest's
owner) provides with :func:`attach_code_digest` when it is imported; the decoders are only
reached through it.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Callable, Iterable
from types import CodeType
from typing import Any, NamedTuple

__all__ = [
    "REF_NAMES",
    "NameRef",
    "attach_code_digest",
    "canonical_const",
    "is_function_code",
    "qualname_of",
    "refs_from",
]

_TAG = f"flydeps-code-v2:{sys.implementation.cache_tag}".encode()


def _no_digest(code: CodeType, positions: bool) -> str:
    raise RuntimeError("flydeps.code.encoding: import flydeps.code.bytecode before encoding code objects")


_inline_digest: Callable[[CodeType, bool], str] = _no_digest


def attach_code_digest(digest: Callable[[CodeType, bool], str]) -> None:
    """Called once by :mod:`.bytecode`: ``digest(code, positions)`` of a folded code object."""
    global _inline_digest
    _inline_digest = digest


def canonical_const(value: Any, *, positions: bool = False) -> bytes:  # dispatches on the exact type
    """A stable byte encoding of a code constant (literals, tuples, frozensets, code refs).

    Floats and complex numbers are encoded by their exact bits (``-0.0`` is not ``0.0``,
    NaN payloads differ). ``positions`` is passed on to code objects folded into the
    encoding (comprehensions, class bodies)."""
    t = type(value)
    if value is None or value is Ellipsis or t is bool:
        return repr(value).encode()
    if t is int:
        return b"i" + str(value).encode()
    if t is float:
        return b"f" + struct.pack("<d", value)
    if t is complex:
        return b"c" + struct.pack("<dd", value.real, value.imag)
    if t is str:
        return b"s" + str(len(value)).encode() + b":" + value.encode("utf-8", "surrogatepass")
    if t is bytes:
        return b"b" + str(len(value)).encode() + b":" + value
    if t is tuple:
        return b"(" + b",".join(canonical_const(v, positions=positions) for v in value) + b")"
    if t is frozenset:
        return b"{" + b",".join(sorted(canonical_const(v, positions=positions) for v in value)) + b"}"
    if isinstance(value, CodeType):
        if is_function_code(value):
            # Referenced by name: the nested function is a node of its own.
            return b"code:" + qualname_of(value).encode("utf-8", "surrogatepass")
        # Comprehensions and class bodies belong to the code that contains them.
        return b"inline:" + _inline_digest(value, positions).encode()
    if t is slice:
        return b"slice" + canonical_const((value.start, value.stop, value.step), positions=positions)
    return b"?" + t.__qualname__.encode() + b":" + repr(value).encode("utf-8", "surrogatepass")


class NameRef(NamedTuple):
    """A name a code object reads, with the attribute chain that follows it (an immutable
    record; a ``NamedTuple``, built and hashed in C: every function walked has several).

    ``scope`` is ``global`` (LOAD_GLOBAL / LOAD_NAME: module globals, then builtins),
    ``free`` (a closure variable), ``local`` (a local or argument, e.g. ``self``) or
    ``import`` (``import a.b`` inside the function: ``name`` is the module path).
    ``attrs`` is the chain of attribute loads applied directly to it (``mod.sub.fn``).
    """

    scope: str
    name: str
    attrs: tuple[str, ...] = ()
    level: int = 0  # ``import``: the number of leading dots of a relative import


_ATTR_OPS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})
_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})
_LOCAL_LOADS = frozenset({"LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW"})
_DEREF_LOADS = frozenset({"LOAD_DEREF", "LOAD_CLASSDEREF"})
_CONST_LOADS = frozenset({"LOAD_CONST", "LOAD_SMALL_INT"})
# The opcodes whose arguments the references read (all others only end a chain).
REF_NAMES = (
    _ATTR_OPS
    | _GLOBAL_OPS
    | _LOCAL_LOADS
    | {"LOAD_DEREF", "LOAD_CLASSDEREF", "IMPORT_NAME", "IMPORT_FROM", "LOAD_CONST", "LOAD_SMALL_INT"}
)


def refs_from(code: CodeType, instructions: Iterable[tuple[int, str, object]]) -> tuple[NameRef, ...]:
    """Names read by ``code``'s own instructions, first use first. ``instructions`` are
    (instruction index, opname, resolved argument), filler dropped; instructions that
    read no name may be left out (a gap in the indices ends an attribute chain)."""
    refs: dict[tuple[str, str, tuple[str, ...], int], None] = {}  # NameRef fields, first use first
    base: tuple[str, str] | None = None  # (scope, name) of the chain being read
    attrs: list[str] = []
    consts: list[object] = []  # constants pushed since the last other instruction
    previous = -2
    for index, name, argval in instructions:  # cold path: no helper calls in the loop
        adjacent, previous = index == previous + 1, index
        if not adjacent:
            consts.clear()
        if base is not None:
            if adjacent and name in _ATTR_OPS:
                attrs.append(str(argval))
                continue
            refs.setdefault((base[0], base[1], tuple(attrs), 0), None)
            base = None
            attrs.clear()
        if name in _GLOBAL_OPS and not (name == "LOAD_NAME" and argval == "__annotations__"):
            # (a class body's own annotation dict, set up by SETUP_ANNOTATIONS: not a global)
            base = ("global", str(argval))
        elif name in _LOCAL_LOADS:
            base = ("local", str(argval))
        elif name in _DEREF_LOADS and argval in code.co_freevars:
            base = ("free", str(argval))
        elif name == "IMPORT_NAME":
            # The level was pushed two instructions before: LOAD_CONST level; LOAD_CONST fromlist.
            level = consts[-2] if len(consts) >= 2 and type(consts[-2]) is int else 0
            refs.setdefault(("import", str(argval), (), level), None)
        elif name == "IMPORT_FROM":
            # ``from a import b`` inside a function: ``a`` was recorded by IMPORT_NAME just before.
            last = next((r for r in reversed(refs) if r[0] == "import"), None)
            if last is not None:
                refs.setdefault(("import", last[1], (str(argval),), last[3]), None)
        if name in _CONST_LOADS:
            consts.append(argval)
        elif consts:
            consts.clear()
    if base is not None:
        refs.setdefault((base[0], base[1], tuple(attrs), 0), None)
    return tuple(map(NameRef._make, refs))


_COMPREHENSIONS = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})


def is_function_code(code: CodeType) -> bool:
    """True for ``def`` and ``lambda`` bodies: the code objects that become graph nodes.

    Comprehensions and class bodies are not nodes: their digest and references are
    folded into the enclosing code."""
    return bool(code.co_flags & 0x0002) and code.co_name not in _COMPREHENSIONS


def qualname_of(code: CodeType) -> str:
    """``co_qualname`` (3.11+), else ``co_name`` (3.10 has no qualified names on code)."""
    return getattr(code, "co_qualname", code.co_name)
