"""The direct ``co_code`` decoder: the byte stream a code digest hashes, without ``dis``.

Contract: reads code objects only. One pass over ``co_code`` with this interpreter's
tables (:mod:`flydeps.code.opcodes`) yields, per instruction, the bytes the digest hashes
(opname and fully resolved argument; jump targets as instruction indices), then
:func:`assemble` undoes layout-dependent compiler choices (:mod:`flydeps.code.normalize`),
appends the exception table and hashes. Where the optional C extension
:mod:`flydeps.code._scanext` was built, :func:`decode` runs that pass (and, when no layout rule
applies, the whole stream and the references) in C; :func:`_scan` and :func:`assemble`
remain its specification and fallback (``FLYDEPS_SCANEXT=0``). :mod:`flydeps.code.disref`
feeds :func:`assemble` the same instructions decoded by ``dis``; the tests hold every path
equal on every code object of the project, its examples and fixtures and the standard
library.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import CodeType
from typing import Any

from blake3 import blake3

from .. import settings
from ..errors import MalformedCodeError
from .encoding import _TAG, REF_NAMES, NameRef, canonical_const, refs_from
from .normalize import PAIR_HALVES, inline_exit_blocks, split_shared_exit_blocks, static_swaps
from .opcodes import COPIES_EXIT_BLOCKS, SHARES_EXIT_BLOCKS, TABLE, ArgKind, OpTable

__all__ = [
    "ARG_MAX",
    "Decoded",
    "assemble",
    "decode",
    "exception_token",
    "header",
    "instructions",
    "malformed",
    "name_token",
    "target_index",
]

# Flags that only restate structure already digested: CO_NESTED, CO_NOFREE (3.10).
_FLAGS_IGNORED = 0x0010 | 0x0040
# The opcodes whose arguments the references read (all others only end a chain).
_REF_OPS = frozenset(op for op, name in enumerate(TABLE.names) if name in REF_NAMES) if TABLE else frozenset()

_HEADERS: dict[tuple, bytes] = {}  # most helpers share a signature shape: encode each once

# The widest argument the interpreter reads as written: its oparg is a C int, so a longer
# EXTENDED_ARG chain wraps (to another index, or a negative one). CPython's compiler emits
# at most three prefixes; leading zero prefixes change nothing and are accepted. An
# exception-table field is bounded the same way (CPython parses it into an int too).
ARG_MAX = 0x7FFFFFFF
_PENDING_MAX = ARG_MAX & ~0xFF  # the most an EXTENDED_ARG chain may carry into the next byte


# Reference classes of the C loop (R_* in code/_scanext.c): how refs_from treats each opname it
# reads; 1 for a read instruction that only ends a chain (STORE_FAST, a half of a pair).
_REF_CLASSES = {
    "LOAD_ATTR": 2,
    "LOAD_METHOD": 2,
    "LOAD_GLOBAL": 3,
    "LOAD_NAME": 4,
    "LOAD_FAST": 5,
    "LOAD_FAST_CHECK": 5,
    "LOAD_FAST_BORROW": 5,
    "LOAD_DEREF": 6,
    "LOAD_CLASSDEREF": 6,
    "IMPORT_NAME": 7,
    "IMPORT_FROM": 8,
    "LOAD_CONST": 9,
    "LOAD_SMALL_INT": 9,
}
assert set(_REF_CLASSES) == REF_NAMES, "every opname references read has a class in the C loop"


def _scanext_tables() -> tuple[Any, ...]:
    """The arguments of :func:`flydeps.code._scanext.configure`: ``TABLE`` as the C loop reads it."""
    assert TABLE is not None
    first = tuple(PAIR_HALVES.get(name, (None, None))[0] for name in TABLE.names)
    second = tuple(PAIR_HALVES.get(name, (None, None))[1] for name in TABLE.names)
    return (
        bytes(TABLE.kinds),
        bytes(TABLE.sizes),
        bytes(TABLE.shifts),
        bytes(_REF_CLASSES.get(name, 0) if op in _REF_OPS else 0 for op, name in enumerate(TABLE.names)),
        TABLE.names,
        TABLE.tokens,
        first,
        second,
        bytes(_REF_CLASSES.get(half or "", 1) if half else 0 for half in (*first, *second)),
        TABLE.extended_arg,
        -1 if TABLE.swap is None else TABLE.swap,
        TABLE.localsplus,
        COPIES_EXIT_BLOCKS or SHARES_EXIT_BLOCKS,
        _TAG,
        _FLAGS_IGNORED,
        NameRef,
    )


def _load_scanext() -> Any:
    """The C loop (:mod:`flydeps.code._scanext`) configured with ``TABLE``, or None where it was
    not built or ``FLYDEPS_SCANEXT=0`` (the Python loop then decodes; same bytes)."""
    if TABLE is None or not settings.flag("FLYDEPS_SCANEXT", True):
        return None
    try:
        from . import _scanext as ext  # type: ignore[attr-defined]
    except ImportError:
        return None
    ext.configure(*_scanext_tables())
    return ext


def header(code: CodeType) -> bytes:
    """Signature shape, flags and variable names: the digest's first bytes."""
    shape = (
        code.co_argcount,
        code.co_posonlyargcount,
        code.co_kwonlyargcount,
        code.co_flags & ~_FLAGS_IGNORED,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
    )
    encoded = _HEADERS.get(shape)
    if encoded is None:
        if len(_HEADERS) >= 4096:
            _HEADERS.clear()
        encoded = _HEADERS[shape] = _TAG + canonical_const(shape)
    return encoded


def name_token(name: object, flags: int | None) -> bytes:
    """A name argument, with the flag bits packed next to its index (``None``: none packed)."""
    text = canonical_const(name)
    return b" " + text if flags is None else b" " + text + b"/%d" % flags


def exception_token(start: int, end: int, target: int, depth: int, lasti: int) -> bytes:
    """One exception-table entry, its offsets already turned into instruction indices."""
    return b"\nexc %d %d %d %d %d" % (start, end, target, depth, lasti)


def target_index(index: dict[int, int], unit: int, count: int, end: int) -> int:
    """Instruction index of code unit ``unit``, rounding forward over skipped filler (a jump
    to an ``EXTENDED_ARG`` or ``NOP``); ``count`` past the last instruction (``end``: the
    code's length in units)."""
    found = index.get(unit)
    while found is None and unit < end:
        unit += 1
        found = index.get(unit)
    return count if found is None else found


def malformed(code: CodeType, unit: int | None, problem: str) -> MalformedCodeError:
    """The error both decoders raise for bytecode they cannot read unambiguously: ``unit``
    is the code unit of the instruction (None: the exception table)."""
    name = getattr(code, "co_qualname", code.co_name)
    where = f"{name} ({code.co_filename}:{code.co_firstlineno})"
    return MalformedCodeError(where, None if unit is None else 2 * unit, problem)


_NONE, _FILLER, _RAW, _CONST, _FREE = ArgKind.NONE, ArgKind.FILLER, ArgKind.RAW, ArgKind.CONST, ArgKind.FREE
_NAME, _LOCAL = ArgKind.NAME, ArgKind.LOCAL
_JUMP_FORWARD, _JUMP_ABSOLUTE, _PAIR = ArgKind.JUMP_FORWARD, ArgKind.JUMP_ABSOLUTE, ArgKind.LOCAL_PAIR


@dataclass(frozen=True, slots=True)
class Decoded:
    """A code object's instructions, filler dropped and super-instructions split in two.

    ``units[p]`` is the code unit instruction ``p`` starts at (negative for the second
    half of a super-instruction: no jump lands there), ``tokens[p]`` its digest bytes
    (for a jump, without the target), ``jumps`` maps positions to target code units,
    ``seen`` is what the references need (position, opname, resolved argument) and
    ``describe()`` gives each instruction's opname, argument bytes and SWAP operand for
    the static-swap rule (called only when ``has_swap``)."""

    units: list[int]
    tokens: list[bytes]
    jumps: dict[int, int]
    seen: list[tuple[int, str, object]]
    has_swap: bool
    describe: Callable[[], tuple[list[str], list[bytes], list[int]]]
    refs: tuple[NameRef, ...] | None = None  # already read from ``seen`` (the C loop reads them itself)


def assemble(code: CodeType, decoded: Decoded) -> tuple[str, tuple[NameRef, ...]]:
    """Digest and references of decoded instructions: static swaps applied, jump and
    exception-table offsets turned into instruction indices, small exit blocks copied
    into jumps (3.13), everything hashed."""
    units, tokens, jumps = decoded.units, decoded.tokens, decoded.jumps
    if decoded.has_swap:
        tokens, units, jumps = _apply_static_swaps(code, decoded)
    index = dict(zip(units, range(len(units))))
    count, size = len(units), len(code.co_code) // 2
    targets = {p: target_index(index, unit, count, size) for p, unit in jumps.items()}
    exceptions = [
        (target_index(index, start, count, size), target_index(index, end, count, size), handler, depth, lasti)
        for start, end, handler, depth, lasti in _exception_entries(code)
        for handler in (target_index(index, handler, count, size),)
    ]
    if COPIES_EXIT_BLOCKS and targets:
        tokens, targets, exceptions = inline_exit_blocks(tokens, targets, exceptions)
    if SHARES_EXIT_BLOCKS and targets:
        tokens, targets, exceptions = split_shared_exit_blocks(tokens, targets, exceptions)
    parts = [header(code), *tokens]
    for p, target in targets.items():
        parts[p + 1] += b" ->%d" % target
    parts += [exception_token(*entry) for entry in exceptions]
    refs = decoded.refs if decoded.refs is not None else refs_from(code, decoded.seen)
    return blake3(b"".join(parts)).digest().hex(), refs


def _apply_static_swaps(code: CodeType, decoded: Decoded) -> tuple[list[bytes], list[int], dict[int, int]]:
    """Tokens in the order the static swaps give, removed SWAPs dropped (their code units
    too: a jump to one lands on the next instruction), jumps renumbered."""
    units = decoded.units
    names, arguments, swap_args = decoded.describe()
    position = dict(zip(units, range(len(units))))
    targets = [*decoded.jumps.values()] + [u for e in _exception_entries(code) for u in (e[0], e[1], e[2])]
    size = len(code.co_code) // 2
    barriers = {p for p in (target_index(position, unit, len(units), size) for unit in targets) if p < len(units)}
    order, dropped = static_swaps(names, arguments, swap_args, barriers)
    kept = [p for p in range(len(units)) if p not in dropped]
    renumber = {p: n for n, p in enumerate(kept)}
    tokens = [decoded.tokens[order[p]] for p in kept]
    jumps = {renumber[p]: target for p, target in decoded.jumps.items() if p in renumber}
    return tokens, [units[p] for p in kept], jumps


def decode(code: CodeType, table: OpTable) -> tuple[str, tuple[NameRef, ...]]:
    """Digest and references from ``co_code`` read directly (no ``dis``): through the C
    loop (:mod:`flydeps.code._scanext`) where it was built for ``table``, else :func:`_scan`."""
    if _scanext is not None and table is TABLE:
        raw = code.co_code
        got = _scanext.scan(code, raw, canonical_const)
        if got is not None and len(got) == 2:  # no layout rule applies: the stream is final
            stream, refs = got  # the header included
            return blake3(stream).digest().hex(), refs
        if got is not None:  # a SWAP or a jump-layout rule: the rules are applied here
            units, tokens, jumps, refs, has_swap = got
            resolve = _Arguments(code, table)
            described = Decoded(
                units,
                tokens,
                jumps,
                [],
                has_swap,
                lambda: resolve.describe(units, tokens, raw),
                refs,
            )
            return assemble(code, described)
    return assemble(code, _scan(code, table))


def _scan(code: CodeType, table: OpTable) -> Decoded:
    """One pass over ``co_code`` (the cold path's inner loop: locals only, the most
    frequent kinds first)."""
    raw = code.co_code
    if len(raw) % 2:
        raise malformed(code, len(raw) // 2, f"co_code has an odd length ({len(raw)} bytes)")
    ops, args = raw[0::2], raw[1::2]
    resolve = _Arguments(code, table)
    cache, ref_ops, kinds, sizes, simple = resolve.cache, _REF_OPS, table.kinds, table.sizes, _SIMPLE
    units: list[int] = []
    tokens: list[bytes] = []
    jumps: dict[int, int] = {}
    seen: list[tuple[int, str, object]] = []
    add_unit, add_token, extended = units.append, tokens.append, table.extended_arg
    n, i, ext = len(ops), 0, 0
    while i < n:
        op = ops[i]
        kind = kinds[op]
        if kind == _FILLER:
            ext = (ext | args[i]) << 8 if op == extended else 0
            if ext > _PENDING_MAX:
                raise malformed(code, i, f"an EXTENDED_ARG chain carries an argument wider than {ARG_MAX:#x}")
            i += 1
            continue
        arg, ext = ext | args[i], 0
        if _CONST <= kind <= _FREE:
            entry = cache.get((op << 32) | arg) or resolve.entry(kind, op, arg, i)
            if op in ref_ops:
                seen.append((len(units), table.names[op], entry[1]))
            add_token(entry[0])
        elif kind <= _RAW:
            add_token(simple.get((op << 32) | arg) or _simple_token(table, kind, op, arg))
        elif kind == _PAIR:
            resolve.pair(op, arg, i, units, tokens, seen)
            i += sizes[op]
            continue
        else:
            jumps[len(tokens)] = _jump_target(code, table, op, i, arg, n)
            add_token(table.tokens[op])
        add_unit(i)
        i += sizes[op]  # past the instruction's inline caches
    if i > n:
        last = max(units)
        raise malformed(code, last, f"{table.names[ops[last]]}'s inline caches run past the end of co_code")
    has_swap = table.swap is not None and table.swap in ops
    return Decoded(units, tokens, jumps, seen, has_swap, lambda: resolve.describe(units, tokens, raw))


def instructions(code: CodeType, table: OpTable, drop: frozenset[str]) -> list[tuple[str, object]] | None:
    """``(opname, argval)`` of ``code``'s instructions as ``dis.get_instructions`` yields
    them, read from ``co_code`` directly (the pattern scanners of
    :mod:`flydeps.code.bytecode`: import statements, ``import_module``, ``getattr``), with
    the filler and the opnames in ``drop`` left out. ``argval`` is ``dis``'s for constants,
    names, variables and super-instruction pairs (a tuple of the two names) and for raw
    integer arguments; a jump's is None (its target is not read), and where ``dis``
    renders a raw argument (``COMPARE_OP``'s operator, ``FORMAT_VALUE``'s conversion) it
    is the integer. :func:`flydeps.code.disref.instructions` is the reference the tests hold
    it to. None for code this loop cannot read (an argument past its table, caches past the
    end): the caller asks ``dis``."""
    raw = code.co_code
    ops, args = raw[0::2], raw[1::2]
    resolve = _Arguments(code, table)
    names, kinds, sizes, extended = table.names, table.kinds, table.sizes, table.extended_arg
    out: list[tuple[str, object]] = []
    add = out.append
    n, i, ext = len(ops), 0, 0
    try:
        while i < n:
            op = ops[i]
            kind = kinds[op]
            if kind == _FILLER:
                ext = (ext | args[i]) << 8 if op == extended else 0
                i += 1
                continue
            arg, ext = ext | args[i], 0
            name = names[op]
            i += sizes[op]
            if name in drop:
                continue
            if _CONST <= kind <= _FREE:
                add((name, resolve.value(kind, op, arg)))
            elif kind == _RAW:
                add((name, arg))
            elif kind == _NONE:
                add((name, None))
            elif kind == _PAIR:
                add((name, (resolve.local(arg >> 4), resolve.local(arg & 15))))
            else:  # a jump
                add((name, None))
    except IndexError:
        return None
    return out if i == n else None


_SIMPLE: dict[int, bytes] = {}  # (op << 32) | arg -> token of an instruction indexing no table


def _simple_token(table: OpTable, kind: int, op: int, arg: int) -> bytes:
    token = table.tokens[op] if kind == _NONE else table.tokens[op] + b" %d" % arg
    if len(_SIMPLE) < 65536:
        _SIMPLE[(op << 32) | arg] = token
    return token


def _jump_target(code: CodeType, table: OpTable, op: int, unit: int, arg: int, size: int) -> int:
    """The code unit the jump ``op`` at ``unit`` lands on (relative jumps count from after
    its inline caches): inside the code (``size`` units) or just past its end."""
    kind, after = table.kinds[op], unit + table.sizes[op]
    target = arg if kind == _JUMP_ABSOLUTE else after + arg if kind == _JUMP_FORWARD else after - arg
    if not 0 <= target <= size:
        raise malformed(code, unit, f"{table.names[op]} jumps to code unit {target}, outside the code (0..{size})")
    return target


class _Arguments:
    """Arguments that index a code object's tables, resolved and encoded once per code."""

    __slots__ = ("code", "table", "shifts", "localsplus", "cells", "varnames", "cache")

    def __init__(self, code: CodeType, table: OpTable) -> None:
        self.code, self.table = code, table
        self.shifts = table.shifts
        self.localsplus = table.localsplus
        self.cells: tuple[str, ...] | None = None
        self.varnames: tuple[str, ...] | None = None
        self.cache: dict[int, tuple[bytes, object]] = {}  # (op << 32) | arg -> (token, value)

    def entry(self, kind: int, op: int, arg: int, unit: int) -> tuple[bytes, object]:
        """(opname and argument bytes, resolved argument) of the instruction at ``unit``, memoized."""
        try:
            value = self.value(kind, op, arg)
        except IndexError:
            raise self.past_table(op, kind, arg, unit) from None
        if kind == _NAME:
            shift = self.shifts[op]
            token = name_token(value, arg & ((1 << shift) - 1) if shift else None)
        elif type(value) is str:  # variable names: canonical_const's str case, inline
            token = b" s%d:" % len(value) + value.encode("utf-8", "surrogatepass")
        else:
            token = b" " + canonical_const(value)
        entry = self.cache[(op << 32) | arg] = (self.table.tokens[op] + token, value)
        return entry

    def pair(
        self, op: int, arg: int, unit: int, units: list[int], tokens: list[bytes], seen: list[tuple[int, str, object]]
    ) -> None:
        """A super-instruction as the two instructions it fuses; the second half gets a
        negative unit of its own (no jump lands between the halves)."""
        halves = PAIR_HALVES[self.table.names[op]]
        for offset, (name, index) in enumerate(zip(halves, (arg >> 4, arg & 15))):
            try:
                value = self.local(index)
            except IndexError:
                raise self.past_table(op, _LOCAL, index, unit) from None
            seen.append((len(units), name, value))
            tokens.append(b"\n" + name.encode() + b" " + canonical_const(value))
            units.append(unit if offset == 0 else -len(units))

    def describe(self, units: list[int], tokens: list[bytes], raw: bytes) -> tuple[list[str], list[bytes], list[int]]:
        """Opnames, argument bytes and SWAP operands per instruction, for the static swaps."""
        names: list[str] = []
        for p, unit in enumerate(units):
            if unit < 0:
                names.append(PAIR_HALVES[names[p - 1]][1])
                names[p - 1] = PAIR_HALVES[names[p - 1]][0]
            else:
                names.append(self.table.names[raw[2 * unit]])
        arguments = [token[len(name) + 1 :] for name, token in zip(names, tokens)]
        swap_args = [raw[2 * unit + 1] if name == "SWAP" else 0 for name, unit in zip(names, units)]
        return names, arguments, swap_args

    def past_table(self, op: int, kind: int, arg: int, unit: int) -> MalformedCodeError:
        """The error for the argument of ``op`` at ``unit`` indexing past the table it reads."""
        code, name = self.code, self.table.names[op]
        if kind == _CONST:
            table = f"co_consts ({len(code.co_consts)} entries)"
        elif kind == _NAME:
            arg, table = arg >> self.shifts[op], f"co_names ({len(code.co_names)} entries)"
        elif self.localsplus:
            table = "the local, cell and free variables"
        elif kind == _LOCAL:
            table = f"co_varnames ({len(code.co_varnames)} entries)"
        else:
            table = f"co_cellvars + co_freevars ({len(code.co_cellvars + code.co_freevars)} entries)"
        return malformed(code, unit, f"{name} reads entry {arg}, past the end of {table}")

    def value(self, kind: int, op: int, arg: int) -> object:
        if kind == _CONST:
            return self.code.co_consts[arg]
        if kind == _NAME:
            return self.code.co_names[arg >> self.shifts[op]]
        return self.local(arg) if kind == _LOCAL or self.localsplus else self.free(arg)

    def local(self, arg: int) -> str:
        names = self.varnames
        if names is None:
            names = self.varnames = self.code.co_varnames
        if arg < len(names):  # 3.11+: the fast locals start with co_varnames
            return names[arg]
        if not self.localsplus:  # 3.10: a local index is an index of co_varnames
            raise IndexError(arg)
        return self.code._varname_from_oparg(arg)  # type: ignore[attr-defined]

    def free(self, arg: int) -> str:  # 3.10: cells, then free variables
        if self.cells is None:
            self.cells = self.code.co_cellvars + self.code.co_freevars
        return self.cells[arg]


def _exception_entries(code: CodeType) -> Iterator[tuple[int, int, int, int, int]]:
    """``co_exceptiontable`` (3.11+) as (start, end, target, depth, lasti) in code units."""
    table = getattr(code, "co_exceptiontable", b"")
    pos, n = 0, len(table)
    while pos < n:
        fields = []
        for _ in range(4):
            value, pos = _varint(code, table, pos)
            fields.append(value)
        start, length, target, depth_lasti = fields
        yield start, start + length, target, depth_lasti >> 1, depth_lasti & 1


def _varint(code: CodeType, table: bytes, pos: int) -> tuple[int, int]:
    """The exception-table field at ``pos`` (6 bits a byte, bit 6: more follow) and where
    the next one starts."""
    value = 0
    while True:
        if pos >= len(table):
            raise malformed(code, None, f"an entry is cut at byte {pos} of co_exceptiontable")
        byte = table[pos]
        value, pos = (value << 6) | (byte & 63), pos + 1
        if value > ARG_MAX:
            raise malformed(code, None, f"a field ending at byte {pos} of co_exceptiontable is wider than {ARG_MAX:#x}")
        if not byte & 64:
            return value, pos


_scanext = _load_scanext()
