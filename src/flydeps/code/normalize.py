"""Layout-dependent compiler choices, undone so that the code digest only sees behaviour.

Contract: pure functions over an instruction list (opnames and encoded arguments), no
code objects. CPython 3.11+ makes some optimizations only when the instructions
involved share a source line (or count line-event ``NOP``s), so the same code written
over several lines compiles differently:

* super-instructions (3.13: ``LOAD_FAST_LOAD_FAST``, ``STORE_FAST_LOAD_FAST``,
  ``STORE_FAST_STORE_FAST``) are digested as the two instructions they fuse;
* static swaps (3.11+, ``apply_static_swaps`` in CPython's flowgraph): a ``SWAP n``
  followed by stores / ``POP_TOP`` is removed by reordering them. The digest applies
  the same rule with line numbers ignored, so both layouts give the same stream;
* small exit blocks (3.13): a ``return``/``raise`` block reached by an unconditional jump
  is copied into the jump only while its line-event ``NOP``s keep it small; the digest
  copies it whenever its real instructions are few enough;
* shared exit blocks (3.10): whether a small exit block reached by a jump is also the
  one a preceding block falls into, or that block got a copy of its own, depends on the
  lines too; the digest gives the falling-through block its own copy whenever the block
  is small.
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["PAIR_HALVES", "inline_exit_blocks", "split_shared_exit_blocks", "static_swaps"]

# A super-instruction and the two instructions it runs, in order.
PAIR_HALVES: dict[str, tuple[str, str]] = {
    "LOAD_FAST_LOAD_FAST": ("LOAD_FAST", "LOAD_FAST"),
    "STORE_FAST_LOAD_FAST": ("STORE_FAST", "LOAD_FAST"),
    "STORE_FAST_STORE_FAST": ("STORE_FAST", "STORE_FAST"),
}
_SWAPPABLE = frozenset({"STORE_FAST", "STORE_FAST_MAYBE_NULL", "POP_TOP"})
_STORES = frozenset({"STORE_FAST", "STORE_FAST_MAYBE_NULL"})


def static_swaps(
    names: Sequence[str], arguments: Sequence[bytes], swap_args: Sequence[int], barriers: set[int]
) -> tuple[list[int], set[int]]:
    """The order instructions run in once every static swap is applied, and the removed SWAPs.

    ``names[p]``/``arguments[p]`` describe instruction ``p`` (``arguments`` identify the
    stored variable), ``swap_args[p]`` is a SWAP's operand, ``barriers`` the positions
    that start a basic block (jump and exception targets). Returns ``order`` (position ->
    original instruction) and the positions of SWAPs that became no-ops."""
    order = list(range(len(names)))
    dropped: set[int] = set()
    for p in range(len(names)):
        if names[p] == "SWAP" and (p + 1 == len(names) or names[p + 1] != "SWAP"):
            _apply(names, arguments, swap_args, barriers, order, dropped, p)
    return order, dropped


def _apply(
    names: Sequence[str],
    arguments: Sequence[bytes],
    swap_args: Sequence[int],
    barriers: set[int],
    order: list[int],
    dropped: set[int],
    i: int,
) -> None:
    """CPython's ``apply_static_swaps`` from the SWAP at ``i`` leftwards, lines ignored."""
    while i >= 0:
        name = names[order[i]]
        if name != "SWAP" or i in dropped:
            if i not in dropped and name not in _SWAPPABLE:
                return
        else:
            j = _next_swappable(names, barriers, order, dropped, i)
            k = j
            for _ in range(swap_args[order[i]] - 1):
                k = _next_swappable(names, barriers, order, dropped, k) if k >= 0 else -1
            if k < 0 or not _may_swap(names, arguments, order, j, k):
                return
            dropped.add(i)
            order[j], order[k] = order[k], order[j]
        if i in barriers:
            return
        i -= 1


def _next_swappable(names: Sequence[str], barriers: set[int], order: list[int], dropped: set[int], p: int) -> int:
    p += 1
    while p in dropped and p not in barriers:
        p += 1
    if p >= len(names) or p in barriers or names[order[p]] not in _SWAPPABLE:
        return -1
    return p


def _may_swap(names: Sequence[str], arguments: Sequence[bytes], order: list[int], j: int, k: int) -> bool:
    """Not when both store to one variable, or a store in between touches either."""

    def target(p: int) -> bytes | None:
        return arguments[order[p]] if names[order[p]] in _STORES else None

    store_j, store_k = target(j), target(k)
    if store_j is None and store_k is None:
        return True
    if store_j == store_k:
        return False
    return all(target(p) is None or target(p) not in (store_j, store_k) for p in range(j + 1, k))


_EXITS = (b"\nRETURN_VALUE", b"\nRETURN_CONST", b"\nRAISE_VARARGS", b"\nRERAISE")
_UNCONDITIONAL = (b"\nJUMP_FORWARD", b"\nJUMP_BACKWARD")  # incl. JUMP_BACKWARD_NO_INTERRUPT
_NO_FALLTHROUGH = (*_EXITS, *_UNCONDITIONAL, b"\nJUMP_ABSOLUTE")
_MAX_COPY_SIZE = 4  # CPython's MAX_COPY_SIZE


def inline_exit_blocks(
    tokens: list[bytes], jumps: dict[int, int], exceptions: list[tuple[int, int, int, int, int]]
) -> tuple[list[bytes], dict[int, int], list[tuple[int, int, int, int, int]]]:
    """3.13 copies a small exit block into an unconditional jump to it when the block, with
    its line-event NOPs, has at most 4 instructions: the digest copies it whenever its real
    instructions are at most 4, whatever the lines (blocks inside a ``try`` are left alone).

    ``jumps`` maps instruction positions to target positions, ``exceptions`` are
    (start, end, handler, depth, lasti) in positions; all three are returned renumbered."""
    candidates = [(j, target) for j, target in jumps.items() if tokens[j].startswith(_UNCONDITIONAL)]
    return _splice(tokens, jumps, exceptions, _exit_copies(tokens, jumps, exceptions, candidates), replace=True)


def _exit_copies(
    tokens: list[bytes],
    jumps: dict[int, int],
    exceptions: list[tuple[int, int, int, int, int]],
    candidates: list[tuple[int, int]],
) -> dict[int, list[bytes]]:
    """For each ``(at, target)`` candidate outside any ``try`` whose ``target`` starts a
    small exit block: the copy of that block to put at ``at``."""
    covered = {p for start, end, *_ in exceptions for p in range(start, end)}
    starts = set(jumps.values()) | {p for e in exceptions for p in e[:3]}
    copies: dict[int, list[bytes]] = {}
    for at, target in candidates:
        if at in covered:
            continue
        block = _exit_block(tokens, jumps, covered, starts, target)
        if block is not None:
            copies[at] = block
    return copies


def _exit_block(
    tokens: list[bytes], jumps: dict[int, int], covered: set[int], starts: set[int], target: int
) -> list[bytes] | None:
    """The instructions from ``target`` to a return/raise, if they form a small exit block."""
    for p in range(target, min(target + _MAX_COPY_SIZE, len(tokens))):
        if p in covered or p in jumps or (p > target and p in starts):
            return None
        if tokens[p].startswith(_EXITS):
            return tokens[target : p + 1]
    return None


def split_shared_exit_blocks(
    tokens: list[bytes], jumps: dict[int, int], exceptions: list[tuple[int, int, int, int, int]]
) -> tuple[list[bytes], dict[int, int], list[tuple[int, int, int, int, int]]]:
    """3.10 gives a block that falls into a small exit block its own copy of it, or not,
    depending on line numbers (the same code written over more lines shares the block
    with the jumps to it). The digest always gives the falling-through block a copy: a
    small exit block (at most 4 instructions, ending in a return or raise, outside any
    ``try``) entered both by falling through and by a jump is emitted twice, the first
    copy for the fall-through, the second, where the jumps now land, for the jumps.

    Same arguments and results as :func:`inline_exit_blocks`."""
    candidates = [
        (target, target)
        for target in sorted(set(jumps.values()))
        if 0 < target < len(tokens) and not tokens[target - 1].startswith(_NO_FALLTHROUGH)
    ]
    return _splice(tokens, jumps, exceptions, _exit_copies(tokens, jumps, exceptions, candidates), replace=False)


def _splice(
    tokens: list[bytes],
    jumps: dict[int, int],
    exceptions: list[tuple[int, int, int, int, int]],
    copies: dict[int, list[bytes]],
    *,
    replace: bool,
) -> tuple[list[bytes], dict[int, int], list[tuple[int, int, int, int, int]]]:
    """``copies[p]`` put in place of instruction ``p`` (``replace``: a jump and the jump
    with it) or just before it (the jumps to ``p`` then land after the copy); jumps and
    exception-table positions renumbered."""
    if not copies:
        return tokens, jumps, exceptions
    out: list[bytes] = []
    renumber: dict[int, int] = {}
    for p, token in enumerate(tokens):
        copy = copies.get(p)
        if copy is not None and not replace:
            out.extend(copy)
        renumber[p] = len(out)
        if copy is not None and replace:
            out.extend(copy)
        else:
            out.append(token)
    renumber[len(tokens)] = len(out)
    dropped = copies if replace else {}
    moved = {renumber[p]: renumber[t] for p, t in jumps.items() if p not in dropped}
    table = [(renumber[s], renumber[e], renumber[h], depth, lasti) for s, e, h, depth, lasti in exceptions]
    return out, moved, table
