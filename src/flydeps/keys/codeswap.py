"""Explaining a ``__code__`` swap as a code change, not as a rebound name.

Contract: a function node is named after where its *code* was defined (``co_qualname`` on
3.11+, see :func:`flydeps.values.objects.function_qualname`), so ``helper.__code__ = other.__code__``
gives the same function object a new node id. A plain graph diff then reports the name
``helper`` as rebound to ``<lambda>`` plus a node added and one removed, although nothing
was rebound. :func:`code_swaps` finds those renames from the live bindings both
fingerprints were discovered from (the same function object's ``__code__`` binding under
two node ids: no guessing from names), and :func:`merge_code_swaps` rewrites a diff so each
such function is reported once, as ``helper <module>:<name> changed`` (nodes named after it,
``<id>#annotations`` or ``<id>#default.x``, are renamed with it and not listed).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..graph import NodeDiff
from ..live.discover import Discovery
from ..values.bindings import BindingKind

__all__ = ["code_swaps", "merge_code_swaps"]


def _code_bindings(discovery: Discovery | None) -> dict[int, tuple[object, str]]:
    """id(function) -> (function, node id) for every ``__code__`` binding of ``discovery``."""
    if discovery is None:
        return {}
    return {
        id(b.container): (b.container, b.node)
        for b in discovery.bindings
        if b.kind is BindingKind.ATTR and b.key == "__code__"
    }


def code_swaps(old: Discovery | None, new: Discovery | None) -> dict[str, str]:
    """``{old node id: new node id}`` of functions whose node id changed while the function
    object stayed the same (its ``__code__`` was replaced), between the discoveries two
    fingerprints were computed from (``Fingerprint._discovery``; None for file-built ones:
    no swaps)."""
    before = _code_bindings(old)
    swaps: dict[str, str] = {}
    for fn, node in _code_bindings(new).values():
        was = before.get(id(fn))
        if was is not None and was[0] is fn and was[1] != node:
            swaps[was[1]] = node
    return swaps


def _owner(nid: str) -> str:
    """The function node a derived node belongs to (``mod:f#annotations`` -> ``mod:f``)."""
    return nid.partition("#")[0]


def merge_code_swaps(diffs: Iterable[NodeDiff], swaps: Mapping[str, str]) -> list[NodeDiff]:
    """``diffs`` with each swapped function reported once as ``changed`` (under its old id)
    instead of "name now resolves to <new id>" + "added" + "removed"."""
    if not swaps:
        return list(diffs)
    renamed = set(swaps.values())
    out: list[NodeDiff] = []
    reported: set[str] = set()
    for d in diffs:
        if d.status == "rebound" and swaps.get(d.old) == d.new:
            node = d.old
        elif d.status == "removed" and d.node in swaps:
            node = d.node
        elif d.status == "added" and d.node in renamed:
            continue
        elif d.status in ("added", "removed") and _owner(d.node) in (renamed if d.status == "added" else swaps):
            continue  # the function's own annotations/defaults node, renamed along with it
        else:
            out.append(d)
            continue
        if node not in reported:
            reported.add(node)
            out.append(NodeDiff(node, d.kind, "changed"))
    return out
