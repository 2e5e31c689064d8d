"""The stored form of a solved call graph, for the result cache.

Contract: :func:`decode_call_graph` (:func:`encode_call_graph`) rebuilds exactly the
:class:`~flydeps.static.calls.result.CallGraph` that was encoded, from JSON data only, checked
field by field with the :mod:`flydeps.static.store` shapes (exact types, exact lengths,
known callee kinds); anything else raises :class:`~flydeps.static.store.Invalid` (or
``TypeError``/``ValueError``), which the result cache treats as a miss. A ``calls=True``
request answered from the result cache (:mod:`flydeps.static.analyze`) reads it instead of
solving the flow again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from ..store import Fixed, Invalid, Seq, Str
from .result import Callee, CallGraph

__all__ = ["decode_call_graph", "encode_call_graph"]

# A callee is ``[kind, *names]``: 3 strings for project code, classes and instances, 2 for
# library code (see :data:`~flydeps.static.calls.result.Callee`).
_CALLEE_SIZES = {"code": 3, "class": 3, "instance": 3, "external": 2}
_CALLEES = Seq(Seq(Str))
_SHAPE = Fixed(
    Seq(Fixed(Str, Str, Str)),  # codes: module, scope, kind
    Seq(Fixed(Str, Str, _CALLEES)),  # calls: module, scope, callees
    Seq(Fixed(Str, Str, Str, _CALLEES)),  # attributes: module, class, name, callees
    Seq(Fixed(Str, Str)),  # saturated slots: module, slot name
)


def encode_call_graph(graph: CallGraph) -> list[object]:
    """JSON-able data for ``graph`` (mappings sorted, so equal graphs encode equally)."""
    return [
        [list(code) for code in graph.codes],
        [[m, s, _callees(c)] for (m, s), c in sorted(graph.calls.items())],
        [[m, c, n, _callees(v)] for (m, c, n), v in sorted(graph.attributes.items())],
        [list(slot) for slot in graph.saturated],
    ]


def _callees(callees: Iterable[Callee]) -> list[list[str]]:
    return [list(c) for c in sorted(callees)]


def decode_call_graph(raw: object) -> CallGraph:
    """The call graph stored as ``raw``; raises ``Invalid`` when it is not one."""
    codes, calls, attributes, saturated = _SHAPE.decode(raw)
    return CallGraph(
        codes,
        _mapping(((m, s), c) for m, s, c in calls),
        _mapping(((m, c, n), v) for m, c, n, v in attributes),
        saturated,
    )


def _mapping(items: Iterable[tuple[tuple[str, ...], tuple[Callee, ...]]]) -> Mapping:
    out = {}
    for key, callees in items:
        for callee in callees:
            if not callee or _CALLEE_SIZES.get(callee[0]) != len(callee):
                raise Invalid(f"not a callee: {callee!r}")
        out[key] = frozenset(callees)
    return MappingProxyType(out)
