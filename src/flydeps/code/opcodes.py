"""This interpreter's opcode tables, generated at import from ``dis`` / ``opcode``.

Contract: pure data about the running CPython's bytecode (3.10-3.13), the only
version-specific knowledge the direct ``co_code`` decoder in :mod:`flydeps.code.bytecode`
needs: per opcode, its name, how its argument is read (a raw integer, a constant / name /
variable index, a jump), how many code units it occupies with its inline caches, and
the flag bits packed next to a name index. Anything ``dis`` does not publish as a
table (the packed name flags, the backward jumps) is taken from the rules ``dis``
itself applies in that version. On another interpreter or version ``TABLE`` is
``None`` and callers use the ``dis``-based reference decoder instead.
"""

from __future__ import annotations

import dis
import opcode
import sys
from dataclasses import dataclass

__all__ = ["COPIES_EXIT_BLOCKS", "SHARES_EXIT_BLOCKS", "ArgKind", "OpTable", "TABLE"]


class ArgKind:
    """How an instruction's argument is digested (small ints, in this order: the decoder tests ranges)."""

    NONE = 0  # no argument (ignored by the interpreter)
    FILLER = 1  # NOP, CACHE, EXTENDED_ARG: not part of the digest
    RAW = 2  # an integer whose meaning is fixed (counts, flags, operator numbers)
    CONST = 3  # index into co_consts
    NAME = 4  # index into co_names, shifted; the low bits are flags
    LOCAL = 5  # index into the fast locals (3.11+: locals, cells and free vars)
    FREE = 6  # 3.10: index into co_cellvars + co_freevars; 3.11+: like LOCAL
    LOCAL_PAIR = 7  # 3.13 super-instructions: two 4-bit local indices
    JUMP_FORWARD = 8  # relative, forward from the next instruction (after its caches)
    JUMP_BACKWARD = 9  # relative, backward from the next instruction (after its caches)
    JUMP_ABSOLUTE = 10  # 3.10: absolute, in code units


@dataclass(frozen=True, slots=True)
class OpTable:
    """Per-opcode facts of this interpreter, each a 256-entry tuple indexed by opcode."""

    names: tuple[str, ...]
    tokens: tuple[bytes, ...]  # b"\n" + name: how an instruction opens in the digest
    kinds: tuple[int, ...]
    sizes: tuple[int, ...]  # code units the instruction occupies: 1 + its inline cache entries
    shifts: tuple[int, ...]  # NAME kinds: name index = arg >> shift, flags = arg & ((1 << shift) - 1)
    extended_arg: int
    swap: int | None  # SWAP (3.11+): the static-swap rule of :mod:`flydeps.code.normalize` applies
    localsplus: bool  # 3.11+: local and free indices go through code._varname_from_oparg


def _cache_entries(op: int, name: str) -> int:
    entries = getattr(opcode, "_inline_cache_entries", None)
    if entries is None:  # 3.10: no inline caches
        return 0
    if isinstance(entries, dict):  # 3.13: keyed by name
        return int(entries.get(name, 0))
    return int(entries[op])


def _name_shifts() -> dict[str, int]:
    """The ops that pack flag bits under their name index (as ``dis`` decodes them)."""
    if sys.version_info >= (3, 12):
        return {"LOAD_GLOBAL": 1, "LOAD_ATTR": 1, "LOAD_SUPER_ATTR": 2}
    if sys.version_info >= (3, 11):
        return {"LOAD_GLOBAL": 1}
    return {}


def _kind(op: int, name: str) -> int:
    if name in ("NOP", "CACHE", "EXTENDED_ARG", "EXTENDED_ARG_QUICK"):
        return ArgKind.FILLER
    has_arg = op in dis.hasarg if hasattr(dis, "hasarg") else op >= dis.HAVE_ARGUMENT
    if not has_arg:
        return ArgKind.NONE
    if name in ("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"):
        return ArgKind.LOCAL_PAIR
    if op in dis.hasconst:
        return ArgKind.CONST
    if op in dis.hasname:
        return ArgKind.NAME
    if op in dis.haslocal:
        return ArgKind.LOCAL
    if op in dis.hasfree:
        return ArgKind.FREE
    if op in dis.hasjrel or op in getattr(dis, "hasjump", ()):
        return ArgKind.JUMP_BACKWARD if "JUMP_BACKWARD" in name else ArgKind.JUMP_FORWARD
    if op in dis.hasjabs:
        return ArgKind.JUMP_ABSOLUTE
    return ArgKind.RAW


def _build() -> OpTable | None:
    if sys.implementation.name != "cpython" or not (3, 10) <= sys.version_info[:2] <= (3, 13):
        return None
    names = tuple(dis.opname[op] for op in range(256))
    shifts = _name_shifts()
    return OpTable(
        names=names,
        tokens=tuple(b"\n" + name.encode() for name in names),
        kinds=tuple(_kind(op, names[op]) for op in range(256)),
        sizes=tuple(1 + _cache_entries(op, names[op]) for op in range(256)),
        shifts=tuple(shifts.get(names[op], 0) for op in range(256)),
        extended_arg=dis.EXTENDED_ARG,
        swap=dis.opmap.get("SWAP"),
        localsplus=sys.version_info >= (3, 11),
    )


TABLE: OpTable | None = _build()
# 3.13 copies small exit blocks into jumps depending on line-event NOPs (see _normalize).
COPIES_EXIT_BLOCKS = sys.version_info >= (3, 13)
# 3.10 shares a small exit block with the block falling into it, or copies it, depending on lines.
SHARES_EXIT_BLOCKS = sys.version_info < (3, 11)
