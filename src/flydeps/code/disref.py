"""The reference code digest: the same bytes as :mod:`flydeps.code.scan`, through ``dis``.

Contract: reads code objects only. Instruction boundaries, ``EXTENDED_ARG`` folding,
inline caches, jump targets, name / variable resolution and the exception table all
come from ``dis`` (the standard library's own decoder), so the tests can hold the
direct ``co_code`` decoder to it on every function they can find. Where ``dis`` does
not resolve an argument completely the raw argument is read instead: constants of
every constant-loading op (3.11's ``dis`` leaves ``KW_NAMES`` unresolved) and the flag
bits packed under a name index (``dis`` drops ``LOAD_SUPER_ATTR``'s two-argument bit).
It is also the implementation on an interpreter without opcode tables.
"""

from __future__ import annotations

import dis
from types import CodeType

from .encoding import NameRef, canonical_const
from .normalize import PAIR_HALVES
from .opcodes import _name_shifts
from .scan import Decoded, assemble, name_token

__all__ = ["analyze", "code_digest", "instructions"]

_SKIP = frozenset({"NOP", "CACHE", "EXTENDED_ARG", "EXTENDED_ARG_QUICK"})
_JUMPS = frozenset(dis.hasjrel) | frozenset(dis.hasjabs) | frozenset(getattr(dis, "hasjump", ()))
_SHIFTS = _name_shifts()


def code_digest(code: CodeType) -> str:
    """The reference digest of ``code`` (not memoized)."""
    return analyze(code)[0]


def analyze(code: CodeType) -> tuple[str, tuple[NameRef, ...]]:
    """Digest and own references of ``code``, decoded by ``dis``."""
    units: list[int] = []
    names: list[str] = []
    arguments: list[bytes] = []
    swap_args: list[int] = []
    jumps: dict[int, int] = {}
    seen: list[tuple[int, str, object]] = []
    for ins in dis.get_instructions(code):
        if ins.opname in _SKIP:
            continue
        if ins.opname in PAIR_HALVES:  # a super-instruction: the two instructions it fuses
            for offset, (name, value) in enumerate(zip(PAIR_HALVES[ins.opname], ins.argval)):
                units.append(ins.offset // 2 if offset == 0 else -len(units))
                seen.append((len(names), name, value))
                names.append(name)
                arguments.append(b" " + canonical_const(value))
                swap_args.append(0)
            continue
        if ins.arg is not None and ins.opcode in _JUMPS:
            jumps[len(names)] = ins.argval // 2
        seen.append((len(names), ins.opname, _refs_value(code, ins)))
        units.append(ins.offset // 2)
        names.append(ins.opname)
        arguments.append(_argument(code, ins))
        swap_args.append(ins.arg if ins.opname == "SWAP" and ins.arg is not None else 0)
    tokens = [b"\n" + name.encode() + argument for name, argument in zip(names, arguments)]
    has_swap = "SWAP" in names
    return assemble(code, Decoded(units, tokens, jumps, seen, has_swap, lambda: (names, arguments, swap_args)))


def instructions(code: CodeType, drop: frozenset[str]) -> list[tuple[str, object]]:
    """``(opname, argval)`` of ``code``'s instructions by ``dis``, the opnames in ``drop``
    left out: the reference of :func:`flydeps.code.scan.instructions`, and the
    implementation where it cannot read the code (or there are no tables)."""
    return [(i.opname, i.argval) for i in dis.get_instructions(code) if i.opname not in drop]


def _argument(code: CodeType, ins: dis.Instruction) -> bytes:
    if ins.arg is None or ins.opcode in _JUMPS:
        return b""
    if ins.opcode in dis.hasconst:
        return b" " + canonical_const(code.co_consts[ins.arg])
    if ins.opcode in dis.hasname:
        shift = _SHIFTS.get(ins.opname, 0)
        return name_token(ins.argval, ins.arg & ((1 << shift) - 1) if shift else None)
    if ins.opcode in dis.haslocal or ins.opcode in dis.hasfree:
        return b" " + canonical_const(ins.argval)
    return b" %d" % ins.arg


def _refs_value(code: CodeType, ins: dis.Instruction) -> object:
    return code.co_consts[ins.arg] if ins.opcode in dis.hasconst and ins.arg is not None else ins.argval
