"""Bytecode reading: the normalized digest of a code object and the names it references.

Contract: reads code objects only (never functions, modules or values), so the same
functions serve the runtime discovery (live ``fn.__code__``) and the static front-end
(code objects from ``compile()`` of a file, which never imports it). Within one Python
version the digest of a function compiled from its file equals the digest of the live
function.

What the digest sees is what runs: the instruction stream with arguments resolved to
names and constant values, jump targets as instruction indices, the exception table,
the signature shape and the variable names. What it ignores: line numbers and column
positions, the file name, ``co_firstlineno``, ``NOP``/``CACHE``/``EXTENDED_ARG``
filler, and the docstring (a function's docstring is a constant that no instruction
loads). So moving a function, adding lines above it, or editing comments, docstrings
or formatting leaves the digest unchanged; any change to executable code changes it.
Nested functions and lambdas are referenced by qualified name, not inlined: they are nodes of
their own and enter a parent through the Merkle fingerprint.
"""

from __future__ import annotations

import dis
import sys
import weakref
from collections.abc import Iterator
from dataclasses import dataclass
from types import CodeType
from typing import Any

from blake3 import blake3

__all__ = [
    "NameRef",
    "canonical_const",
    "code_digest",
    "code_refs",
    "find_code",
    "is_function_code",
    "iter_qualnames",
    "nested_codes",
    "qualname_of",
]

_SKIP = frozenset({"NOP", "CACHE", "EXTENDED_ARG"})
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs) | frozenset(getattr(dis, "hasjump", ()))
_CONST_OPS = frozenset(dis.hasconst)
_NAME_OPS = frozenset(dis.hasname)
_LOCAL_OPS = frozenset(dis.haslocal) | frozenset(dis.hasfree)
_ATTR_OPS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})
_GLOBAL_OPS = frozenset({"LOAD_GLOBAL", "LOAD_NAME"})
# The flags that change what a code object does. Others (e.g. CO_NESTED) only restate structure.
_FLAG_MASK = 0x0001 | 0x0002 | 0x0004 | 0x0008 | 0x0020 | 0x0080 | 0x0100 | 0x0200
_TAG = f"flydeps-code-v1:{sys.implementation.cache_tag}".encode()

_analysis: "weakref.WeakKeyDictionary[CodeType, tuple[str, tuple[NameRef, ...]]]" = weakref.WeakKeyDictionary()


def canonical_const(value: Any) -> bytes:  # dispatches on the exact type
    """A stable byte encoding of a code constant (literals, tuples, frozensets, code refs)."""
    t = type(value)
    if value is None or value is Ellipsis or t is bool:
        return repr(value).encode()
    if t is int:
        return b"i" + str(value).encode()
    if t is float or t is complex:
        return t.__name__[:1].encode() + repr(value).encode()
    if t is str:
        return b"s" + str(len(value)).encode() + b":" + value.encode("utf-8", "surrogatepass")
    if t is bytes:
        return b"b" + str(len(value)).encode() + b":" + value
    if t is tuple:
        return b"(" + b",".join(canonical_const(v) for v in value) + b")"
    if t is frozenset:
        return b"{" + b",".join(sorted(canonical_const(v) for v in value)) + b"}"
    if isinstance(value, CodeType):
        if is_function_code(value):
            # Referenced by name: the nested function is a node of its own.
            return b"code:" + qualname_of(value).encode()
        # Comprehensions and class bodies belong to the code that contains them.
        return b"inline:" + code_digest(value).encode()
    if t is slice:
        return b"slice" + canonical_const((value.start, value.stop, value.step))
    return b"?" + t.__qualname__.encode() + b":" + repr(value).encode()


def code_digest(code: CodeType) -> str:
    """The normalized hex blake3 digest of ``code`` (cached per code object)."""
    return _analyze(code)[0]


def _analyze(code: CodeType) -> tuple[str, tuple[NameRef, ...]]:
    """Digest and own name references of ``code`` from one decoding of its instructions
    (decoding dominates the cold cost of both), memoized per code object."""
    cached = _analysis.get(code)
    if cached is not None:
        return cached
    instructions = [i for i in dis.get_instructions(code) if i.opname not in _SKIP]
    result = (_digest_instructions(code, instructions), _refs_of(code, instructions))
    _analysis[code] = result
    return result


def _digest_instructions(code: CodeType, instructions: list[dis.Instruction]) -> str:
    h = blake3(_TAG)
    h.update(
        canonical_const(
            (
                code.co_argcount,
                code.co_posonlyargcount,
                code.co_kwonlyargcount,
                code.co_flags & _FLAG_MASK,
                code.co_varnames,
                code.co_freevars,
                code.co_cellvars,
            )
        )
    )
    index = {ins.offset: n for n, ins in enumerate(instructions)}
    for ins in instructions:
        h.update(b"\n" + ins.opname.encode())
        op = ins.opcode
        if ins.arg is None:
            continue
        if op in _JUMPS:
            h.update(b" ->" + str(_target_index(index, ins.argval)).encode())
        elif op in _CONST_OPS:
            h.update(b" " + canonical_const(ins.argval))
        elif op in _NAME_OPS or op in _LOCAL_OPS:
            # argrepr keeps flag bits such as LOAD_GLOBAL's "NULL + name"; it never holds a position.
            h.update(b" " + (ins.argrepr or str(ins.argval)).encode())
        elif ins.opname in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"):
            h.update(b" " + ins.argrepr.encode())
        else:
            h.update(b" " + str(ins.arg).encode())
    for start, end, target, depth, lasti in _exception_table(code):
        h.update(
            b"\nexc %d %d %d %d %d"
            % (
                _target_index(index, start),
                _target_index(index, end),
                _target_index(index, target),
                depth,
                lasti,
            )
        )
    return h.hexdigest()


def _target_index(index: dict[int, int], offset: object) -> int:
    """Instruction index of a byte offset, rounding forward over skipped filler."""
    if not isinstance(offset, int):
        return -1
    probe = offset
    while probe not in index and probe <= max(index, default=0):
        probe += 2
    return index.get(probe, len(index))


def _exception_table(code: CodeType) -> list[tuple[int, int, int, int, int]]:
    parse = getattr(dis, "_parse_exception_table", None)
    if parse is None or not hasattr(code, "co_exceptiontable"):
        return []
    return [(e.start, e.end, e.target, e.depth, int(e.lasti)) for e in parse(code)]


@dataclass(frozen=True, slots=True)
class NameRef:
    """A name a code object reads, with the attribute chain that follows it.

    ``scope`` is ``global`` (LOAD_GLOBAL / LOAD_NAME: module globals, then builtins),
    ``free`` (a closure variable), ``local`` (a local or argument, e.g. ``self``) or
    ``import`` (``import a.b`` inside the function: ``name`` is the module path).
    ``attrs`` is the chain of attribute loads applied directly to it (``mod.sub.fn``).
    """

    scope: str
    name: str
    attrs: tuple[str, ...] = ()
    level: int = 0  # ``import``: the number of leading dots of a relative import


def code_refs(code: CodeType) -> tuple[NameRef, ...]:
    """Names read by ``code`` and the comprehensions/class bodies folded into it, in
    first-use order. Nested functions are not included: they are nodes of their own."""
    refs: dict[NameRef, None] = dict.fromkeys(_analyze(code)[1])
    for nested in nested_codes(code):
        if not is_function_code(nested):
            refs.update(dict.fromkeys(code_refs(nested)))
    return tuple(refs)


def _refs_of(code: CodeType, instructions: list[dis.Instruction]) -> tuple[NameRef, ...]:
    """Names read by ``code``'s own instructions (filler already dropped), first use first."""
    refs: dict[NameRef, None] = {}
    chain_base: tuple[str, str] | None = None
    attrs: list[str] = []
    consts: list[object] = []  # constants pushed since the last other instruction

    def flush() -> None:
        nonlocal chain_base
        if chain_base is not None:
            refs.setdefault(NameRef(chain_base[0], chain_base[1], tuple(attrs)), None)
        chain_base = None
        attrs.clear()

    for ins in instructions:
        name = ins.opname
        if name in _ATTR_OPS and chain_base is not None:
            attrs.append(str(ins.argval))
            continue
        flush()
        if name in _GLOBAL_OPS:
            chain_base = ("global", str(ins.argval))
        elif name in ("LOAD_DEREF", "LOAD_CLASSDEREF") and ins.argval in code.co_freevars:
            chain_base = ("free", str(ins.argval))
        elif name in ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_BORROW") and ins.arg is not None:
            chain_base = ("local", str(ins.argval))
        elif name == "IMPORT_NAME":
            # The level was pushed two instructions before: LOAD_CONST level; LOAD_CONST fromlist.
            level = consts[-2] if len(consts) >= 2 and type(consts[-2]) is int else 0
            refs.setdefault(NameRef("import", str(ins.argval), (), level), None)
        elif name == "IMPORT_FROM":
            # ``from a import b`` inside a function: ``a`` was recorded by IMPORT_NAME just before.
            last = next((r for r in reversed(refs) if r.scope == "import"), None)
            if last is not None:
                refs.setdefault(NameRef("import", last.name, (str(ins.argval),), last.level), None)
        if name in ("LOAD_CONST", "LOAD_SMALL_INT"):
            consts.append(ins.argval)
        else:
            consts.clear()
    flush()
    return tuple(refs)


def nested_codes(code: CodeType) -> Iterator[CodeType]:
    """Code objects directly nested in ``code`` (functions, lambdas, comprehensions, classes)."""
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield const


_COMPREHENSIONS = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})


def is_function_code(code: CodeType) -> bool:
    """True for ``def`` and ``lambda`` bodies: the code objects that become graph nodes.

    Comprehensions and class bodies are not nodes: their digest and references are
    folded into the enclosing code."""
    return bool(code.co_flags & 0x0002) and code.co_name not in _COMPREHENSIONS


def qualname_of(code: CodeType) -> str:
    """``co_qualname`` (3.11+), else ``co_name`` (3.10 has no qualified names on code)."""
    return getattr(code, "co_qualname", code.co_name)


def iter_qualnames(module_code: CodeType) -> Iterator[tuple[str, CodeType]]:
    """Every code object nested in a compiled module with its qualified name."""
    stack: list[tuple[str, CodeType]] = [("", module_code)]
    while stack:
        prefix, code = stack.pop()
        for child in nested_codes(code):
            if hasattr(child, "co_qualname"):
                qual = child.co_qualname
            else:  # 3.10: rebuild the qualified name from the nesting
                qual = prefix + child.co_name
            yield qual, child
            is_function = bool(child.co_flags & 0x0002)  # CO_NEWLOCALS: function bodies, not class bodies
            stack.append((qual + (".<locals>." if is_function else "."), child))


def find_code(module_code: CodeType, qualname: str) -> CodeType | None:
    """The code object with qualified name ``qualname`` inside a compiled module, or None."""
    for qual, code in iter_qualnames(module_code):
        if qual == qualname:
            return code
    return None
