"""Bytecode reading: the normalized digest of a code object, the names it references and
the modules its own imports read (:func:`import_reads`: import statements and
``importlib.import_module`` with a constant name, with the locals they bind).

Contract: reads code objects only (never functions, modules or values), so the same
functions serve the runtime discovery (live ``fn.__code__``) and the static front-end
(code objects from ``compile()`` of a file, which never imports it). Within one Python
version the digest of a function compiled from its file equals the digest of the live
function.

What the digest sees is what runs: every instruction with its argument read completely
(constants and names by value, name-flag bits, variables by name, the two halves of a
super-instruction, operator numbers and counts as they are, jump targets as
instruction indices), the exception table, the signature shape, the variable names and
the code flags (future imports included). What it ignores: line numbers and column
positions, the file name, the code's own name, ``co_firstlineno``,
``NOP``/``CACHE``/``EXTENDED_ARG`` filler, and the docstring (a constant that no
instruction loads). So moving a function, adding lines above it, or editing comments,
docstrings or formatting leaves the digest unchanged; any change to executable code
changes it. ``code_digest(code, positions=True)`` adds what debug info carries (file
name as given, first line, qualified name, the line/column table) for consumers whose
output embeds source locations. Nested functions and lambdas are referenced by
qualified name, not inlined: they are nodes of their own and enter a parent through
the Merkle fingerprint; comprehensions and class bodies are folded into their parent.

Decoding reads ``co_code`` directly (:mod:`flydeps.code.scan`, with this interpreter's
tables from :mod:`flydeps.code.opcodes`); :mod:`flydeps.code.disref` produces the same bytes
through ``dis`` and is the reference the tests hold the decoder to (and the fallback on
an interpreter without tables).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator
from types import CodeType
from typing import Any, NamedTuple

from blake3 import blake3

from .encoding import (
    _ATTR_OPS,
    _GLOBAL_OPS,
    NameRef,
    attach_code_digest,
    canonical_const,
    is_function_code,
    qualname_of,
)
from .opcodes import TABLE

__all__ = [
    "ImportRead",
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

_POSITIONS_TAG = b"flydeps-positions-v1"


class _KeyedRef(weakref.ref):  # type: ignore[type-arg]
    """A weak reference that knows its memo key (no closure per entry)."""

    __slots__ = ("key",)
    key: int


class _CodeMemo(dict):  # type: ignore[type-arg]
    """Results per code object *identity* (code objects that compare equal may differ in
    file name or qualified names), dropped when the code object is collected."""

    def __init__(self) -> None:
        super().__init__()
        self._drop_entry = self._drop  # one bound method for every entry's callback

    def lookup(self, code: CodeType) -> Any:
        entry = self.get(id(code))
        return entry[1] if entry is not None and entry[0]() is code else None

    def through(self, code: CodeType, compute: Callable[[CodeType], Any]) -> Any:
        """The result for ``code``, computed by ``compute`` once per code object."""
        cached = self.lookup(code)
        if cached is None:
            cached = compute(code)
            self.store(code, cached)
        return cached

    def store(self, code: CodeType, result: Any) -> None:
        ref = _KeyedRef(code, self._drop_entry)
        ref.key = key = id(code)
        self[key] = (ref, result)

    def _drop(self, ref: _KeyedRef) -> None:
        if self.get(ref.key, (None,))[0] is ref:
            del self[ref.key]


_analysis = _CodeMemo()  # code -> (digest, own references)
_positions = _CodeMemo()  # code -> digest with positions
_imports = _CodeMemo()  # code -> import_reads(code)
_getattrs = _CodeMemo()  # code -> getattr_reads(code)


def code_digest(code: CodeType, *, positions: bool = False) -> str:
    """The normalized hex blake3 digest of ``code`` (cached per code object).

    ``positions=True`` also digests the source locations: ``co_filename`` as given,
    ``co_firstlineno``, the qualified name and the line/column table, of ``code`` and of
    the comprehensions and class bodies folded into it. Use it when the product embeds
    locations (FlyDSL with ``FLYDSL_DEBUG_ENABLE_DEBUG_INFO=1``)."""
    if not isinstance(code, CodeType):
        raise TypeError(f"code_digest(code) needs a code object (fn.__code__), got {type(code).__qualname__}")
    if not positions:
        return _analyze(code)[0]
    return _positions.through(code, _positions_digest)  # type: ignore[no-any-return]


def _positions_digest(code: CodeType) -> str:
    """The plain digest plus everything positional, of ``code`` and its folded children."""
    h = blake3(_POSITIONS_TAG)
    h.update(_analyze(code)[0].encode())
    h.update(
        canonical_const(
            (code.co_filename, code.co_firstlineno, qualname_of(code), code.co_name, bytes(code.co_linetable))
        )
    )
    for nested in nested_codes(code):
        if not is_function_code(nested):
            h.update(b"\ninline " + code_digest(nested, positions=True).encode())
    return h.digest().hex()


_DECODE: Any = None  # flydeps.code.scan.decode, bound on first use (it loads the C loop and reads settings)


def _load_decoder() -> Any:
    global _DECODE
    from .scan import decode

    _DECODE = decode
    return decode


def _analyze(code: CodeType) -> tuple[str, tuple[NameRef, ...]]:
    """Digest and own name references of ``code`` from one decoding of its instructions
    (decoding dominates the cold cost of both), memoized per code object."""
    entry = _analysis.get(id(code))  # _analysis.lookup(code), inline: twice per function walked
    if entry is not None and entry[0]() is code:
        return entry[1]  # type: ignore[no-any-return]
    if TABLE is not None:
        result = (_DECODE or _load_decoder())(code, TABLE)
    else:  # an interpreter without tables: the dis reference is the implementation
        from . import disref as _disref

        result = _disref.analyze(code)
    _analysis.store(code, result)
    return result


def code_refs(code: CodeType) -> tuple[NameRef, ...]:
    """Names read by ``code`` and the comprehensions/class bodies folded into it, in
    first-use order. Nested functions are not included: they are nodes of their own."""
    own = _analyze(code)[1]
    folded = [c for c in code.co_consts if type(c) is CodeType and not is_function_code(c)]
    if not folded:
        return own  # already first-use ordered and unique
    refs: dict[NameRef, None] = dict.fromkeys(own)
    for nested in folded:
        refs.update(dict.fromkeys(code_refs(nested)))
    return tuple(refs)


class ImportRead(NamedTuple):
    """A module an import the code runs reads, and where the result goes.

    ``import a.b`` binds local ``a`` to module ``a``; ``import a.b as c`` binds ``c`` to
    ``a`` then ``attrs`` ``("b",)`` (the package's attribute, as ``IMPORT_FROM`` reads it);
    ``from p import q as r`` binds ``r`` to ``p`` then ``attrs`` ``("q",)``;
    ``importlib.import_module("m")`` with a constant name (``via``: the callee as read,
    ``("importlib", "import_module")``) is stored in ``local`` or read on through ``attrs``
    directly (``local`` empty). ``level`` is a relative import's."""

    local: str
    module: str
    attrs: tuple[str, ...]
    level: int
    via: tuple[str, ...] = ()


_IMPORT_FILLER = frozenset({"NOP", "CACHE", "EXTENDED_ARG", "PRECALL", "PUSH_NULL", "RESUME"})
_STORES = frozenset({"STORE_FAST", "STORE_DEREF", "STORE_NAME"})
_STACK_SHUFFLES = frozenset({"ROT_TWO", "SWAP", "POP_TOP"})
_CALLS_ONE = frozenset({"CALL", "CALL_FUNCTION", "CALL_METHOD"})


def import_reads(code: CodeType) -> tuple[ImportRead, ...]:
    """The modules ``code``'s own imports read (statements and ``import_module`` calls with
    a constant name) and the locals they bind: chains on those locals (``mod.VAL`` after
    ``import mod`` in the body) are reads of the module. Cold path (:func:`_instructions`); only
    code that imports (or names ``import_module``) is read; once per code object (every
    later walk reaching it reads the memo)."""
    return _imports.through(code, _import_reads)  # type: ignore[no-any-return]


def _instructions(code: CodeType) -> list[tuple[str, Any]]:
    """``(opname, argval)`` of ``code``'s instructions, the cache and no-op fillers dropped
    (what the import and ``getattr`` scanners match on; cold path): read from ``co_code``
    with this interpreter's tables (:func:`flydeps.code.scan.instructions`, ~10x faster than
    ``dis`` on a large kernel body), through ``dis`` where there are none or that loop
    cannot read the code. The scanners read no jump target, nor an argument ``dis``
    renders as text: there the two lists differ, nowhere else."""
    if TABLE is not None:
        from .scan import instructions

        found = instructions(code, TABLE, _IMPORT_FILLER)
        if found is not None:
            return found
    from .disref import instructions as by_dis

    return by_dis(code, _IMPORT_FILLER)


def _import_reads(code: CodeType) -> tuple[ImportRead, ...]:
    ins = _instructions(code)
    out: list[ImportRead] = []
    for n, (op, arg) in enumerate(ins):
        if op == "IMPORT_NAME":
            out += _statement_reads(ins, n)
        elif op in _CALLS_ONE and arg == 1 and n >= 2 and ins[n - 1][0] == "LOAD_CONST" and type(ins[n - 1][1]) is str:
            via = _callee(ins, n - 2)
            if via and via[-1] == "import_module":
                local, attrs = _result_use(ins, n + 1)
                out.append(ImportRead(local, ins[n - 1][1], attrs, 0, via))
        elif op == "BINARY_SUBSCR" and n >= 2 and ins[n - 1][0] == "LOAD_CONST" and type(ins[n - 1][1]) is str:
            via = _callee(ins, n - 2)  # sys.modules["m"] (the resolver checks it is sys.modules)
            if via and via[-1] == "modules":
                local, attrs = _result_use(ins, n + 1)
                out.append(ImportRead(local, ins[n - 1][1], attrs, 0, via))
        elif op in _GLOBAL_OPS and arg == "__import__" and n + 1 < len(ins) and ins[n + 1][0] == "LOAD_CONST":
            if type(ins[n + 1][1]) is str:
                out.append(_dunder_import(ins, n))
    return tuple(dict.fromkeys(out))


_CALL_OPS = frozenset({"CALL", "CALL_FUNCTION", "CALL_FUNCTION_KW", "CALL_METHOD", "CALL_KW"})


def getattr_reads(code: CodeType) -> tuple[NameRef, ...]:
    """``getattr(g.a, "name")`` with a constant name on a global (and attributes), two
    arguments: the chain ``g.a.name`` it reads, and the attributes read on its result, as
    :class:`NameRef` s of scope ``global`` (a read the bytecode's own chains do not show).
    Cold path (:func:`_instructions`), for code naming ``getattr``; memoized per code object."""
    return _getattrs.through(code, _getattr_reads)  # type: ignore[no-any-return]


def _getattr_reads(code: CodeType) -> tuple[NameRef, ...]:
    ins = _instructions(code)
    out: list[NameRef] = []
    for n, (op, arg) in enumerate(ins):
        if op not in _GLOBAL_OPS or arg != "getattr":
            continue
        # getattr, then the object: a global with attributes, then a constant name, then the call
        start = n + 1
        if start >= len(ins) or ins[start][0] not in _GLOBAL_OPS:
            continue
        j = start + 1
        while j < len(ins) and ins[j][0] in _ATTR_OPS:
            j += 1
        if j + 1 >= len(ins) or ins[j][0] != "LOAD_CONST" or type(ins[j][1]) is not str:
            continue
        if ins[j + 1][0] not in _CALL_OPS or ins[j + 1][1] != 2:
            continue
        chain = tuple(str(a) for _op, a in ins[start + 1 : j])
        _local, after = _result_use(ins, j + 2)
        out.append(NameRef("global", str(ins[start][1]), (*chain, str(ins[j][1]), *after)))
    return tuple(dict.fromkeys(out))


_CONSTANT_ARGS = frozenset({"LOAD_CONST", "BUILD_LIST", "BUILD_TUPLE", "KW_NAMES", "LIST_EXTEND"})


def _dunder_import(ins: list[tuple[str, Any]], n: int) -> ImportRead:
    """``__import__("a.b", ...)`` with a constant name (loaded at ``n``): with a non-empty
    constant ``fromlist`` it returns ``a.b``, without one the package ``a``; its result is
    followed as ``import_module``'s. Arguments that are not constants (``globals()``): the
    call's end is not told, so only the module's ``sys.modules`` entry is read (what is read
    from the result is not: docs/guarantees.md, computed imports)."""
    name = str(ins[n + 1][1])
    via = ("__import__",)
    j, listed = n + 2, False
    while j < len(ins) and ins[j][0] not in _CALL_OPS:
        op, arg = ins[j]
        if op not in _CONSTANT_ARGS:
            return ImportRead("", name, (), 0, via)
        if (op in ("BUILD_LIST", "BUILD_TUPLE") and arg) or (op == "LOAD_CONST" and type(arg) in (str, tuple) and arg):
            listed = True
        j += 1
    if j == len(ins):
        return ImportRead("", name, (), 0, via)
    local, attrs = _result_use(ins, j + 1)
    return ImportRead(local, name if listed else name.partition(".")[0], attrs, 0, via)


def _statement_reads(ins: list[tuple[str, Any]], n: int) -> list[ImportRead]:
    module = str(ins[n][1])
    level = ins[n - 2][1] if n >= 2 and ins[n - 2][0] == "LOAD_CONST" and type(ins[n - 2][1]) is int else 0
    fromlist = ins[n - 1][1] if n >= 1 and ins[n - 1][0] == "LOAD_CONST" else None
    out: list[ImportRead] = []
    froms: list[str] = []  # the IMPORT_FROM names before the store
    for op, arg in ins[n + 1 :]:
        if op == "IMPORT_FROM":
            froms = [*froms, str(arg)] if fromlist is None else [str(arg)]
        elif op in _STORES:
            if fromlist is not None and froms:  # from p import q as r: p, then its attribute q
                out.append(ImportRead(str(arg), module, tuple(froms), level))
            else:  # import a.b binds a; import a.b as c binds c to a's attribute b (IMPORT_FROM)
                out.append(ImportRead(str(arg), module.partition(".")[0], tuple(froms), level))
            if fromlist is None:
                break
            froms = []
        elif op not in _STACK_SHUFFLES or (op == "POP_TOP" and not froms):
            break
    return out


def _callee(ins: list[tuple[str, Any]], end: int) -> tuple[str, ...]:
    """The dotted name loaded by the instructions ending at ``end`` (a global and attributes)."""
    attrs: list[str] = []
    while end >= 0 and ins[end][0] in _ATTR_OPS:
        attrs.append(str(ins[end][1]))
        end -= 1
    if end < 0 or ins[end][0] not in _GLOBAL_OPS:
        return ()
    return (str(ins[end][1]), *reversed(attrs))


def _result_use(ins: list[tuple[str, Any]], start: int) -> tuple[str, tuple[str, ...]]:
    """A call result stored in a local (``(name, ())``) or read on by attributes (``("", attrs)``)."""
    if start < len(ins) and ins[start][0] in _STORES:
        return str(ins[start][1]), ()
    attrs: list[str] = []
    while start < len(ins) and ins[start][0] in _ATTR_OPS:
        attrs.append(str(ins[start][1]))
        start += 1
    return "", tuple(attrs)


def nested_codes(code: CodeType) -> Iterator[CodeType]:
    """Code objects directly nested in ``code`` (functions, lambdas, comprehensions, classes)."""
    for const in code.co_consts:
        if isinstance(const, CodeType):
            yield const


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


attach_code_digest(lambda code, positions: code_digest(code, positions=positions))
