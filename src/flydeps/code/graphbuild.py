"""Graph construction shared by both front-ends (runtime discovery and static analysis).

Contract: accumulates nodes (first sight wins) and edges (an ordered set) and creates
the leaves both front-ends must agree on byte for byte: library leaves
(``external:<dotted>``, digested by name and ``distribution==version``) and
``unresolved:`` nodes. Reads installed-distribution metadata through :mod:`.origin`;
no live objects, no files.
"""

from __future__ import annotations

from blake3 import blake3

from ..graph import DepGraph, Edge, EdgeKind, Node, NodeKind, external_id, unresolved_id
from . import origin as _origin

__all__ = ["GraphBuilder"]

_new = tuple.__new__


class GraphBuilder:
    """Nodes and edges of a graph under construction."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.edges: dict[Edge, None] = {}

    def add(self, nid: str, kind: NodeKind, digest: str, **extra: object) -> bool:
        """Add a node unless one with this id exists; True when added."""
        if nid in self.nodes:
            return False
        self.nodes[nid] = Node(nid, kind, digest, **extra)  # type: ignore[arg-type]
        return True

    def edge(self, src: str, dst: str, kind: EdgeKind, label: str = "") -> None:
        self.edges.setdefault(_new(Edge, (src, dst, kind, label)), None)  # Edge(...) without its Python __new__

    def external(self, dotted: str) -> str:
        """The library leaf ``external:<dotted>``."""
        nid = external_id(dotted)
        if nid not in self.nodes:
            digest, detail = _origin.external_digest(dotted)
            self.add(nid, NodeKind.EXTERNAL, digest, detail=detail)
        return nid

    def unresolved(self, where: str, name: str, why: str) -> str:
        """A reference that could not be resolved, kept as a node with the reason."""
        nid = unresolved_id(where, name)
        if nid not in self.nodes:  # (a name read many times is one node: digested once)
            self.add(nid, NodeKind.UNRESOLVED, blake3(f"unresolved\0{name}".encode()).hexdigest(), detail=why)
        return nid

    def graph(self, roots: tuple[str, ...]) -> DepGraph:
        return DepGraph(roots, self.nodes, tuple(self.edges))
