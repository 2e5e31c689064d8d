"""The dependency graph model shared by every front-end and consumer.

Contract: pure data. A :class:`DepGraph` is built once (by the runtime discovery in
``live/discover.py`` or the static front-end in ``static/``) and never mutated afterwards.
Nothing here touches live user objects, files or digests beyond storing them.

Node ids are ``module:qualname`` (``pkg.mem:_load_q``). A method reached through a
subclass carries its owner: ``pkg.k:Base.helper@pkg.k:Sub``. Globals read are
``module:NAME`` nodes of kind GLOBAL; third-party and stdlib code is a leaf
``external:dotted.name``; what could not be resolved is ``unresolved:<where>:<name>``.
Ids, digests and edge labels never contain absolute paths, line numbers or ``id()``;
:class:`Location` is informational only and never enters a digest.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

__all__ = [
    "DepGraph",
    "Edge",
    "EdgeKind",
    "Location",
    "Node",
    "NodeKind",
    "external_id",
    "node_id",
    "unresolved_id",
]


class NodeKind(str, enum.Enum):
    """What a node stands for."""

    FUNCTION = "function"
    METHOD = "method"
    CLASS = "class"
    GLOBAL = "global"  # a data value bound to a module-level (or class-level) name
    MODULE = "module"
    OBJECT = "object"  # a callable instance or wrapper object whose attributes are walked
    EXTERNAL = "external"  # stdlib / third-party leaf, identified by distribution==version
    UNRESOLVED = "unresolved"


class EdgeKind(str, enum.Enum):
    """Why the source node depends on the destination node."""

    CALLS = "calls"  # a name read that resolved to code (function, class, method)
    READS = "reads"  # a name read that resolved to a data value
    CLOSURE = "closure"  # a closure cell's content
    NESTED = "nested"  # a function whose code object is nested in the source's code
    DEFAULT = "default"  # a default or keyword-default argument value
    DECORATES = "decorates"  # wrapper -> wrapped (``__wrapped__``, partial.func, bound __func__)
    ATTRIBUTE = "attribute"  # object -> attribute value (callable objects, wrappers)
    METHOD = "method"  # ``self.x`` / ``cls.x`` resolved on the owner's MRO
    OVERRIDES = "overrides"  # a subclass method -> the base method it shadows
    ANNOTATION = "annotation"  # a function -> its evaluated annotations (FlyDSL types arguments by them)
    IMPORTS = "imports"  # module -> module


class Location(NamedTuple):
    """Where a node is defined, for humans. Never part of a digest (an immutable record, a
    ``NamedTuple`` as :class:`Node` is)."""

    path: str  # relative to the project root when known, else as given
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


class Node(NamedTuple):
    """One dependency (an immutable record: a ``NamedTuple`` because discovery builds
    thousands per fingerprint and a tuple is built in C, where a frozen dataclass runs a
    Python ``__init__`` setting each field in turn).

    ``digest`` is the node's *own* digest (hex blake3): its code or value alone, not what it
    reaches. Transitive digests are computed by :mod:`flydeps.keys.fingerprint`.
    ``tags`` marks roles found by a front-end: ``factory``, ``kernel``, ``launcher``.
    ``detail`` carries what the digest stands for when it is not code, e.g.
    ``torch==2.13.0`` for an external leaf or the reason a name is unresolved.
    """

    id: str
    kind: NodeKind
    digest: str
    location: Location | None = None
    detail: str = ""
    tags: frozenset[str] = frozenset()

    @property
    def module(self) -> str:
        head, _, _ = self.id.partition(":")
        return head

    @property
    def qualname(self) -> str:
        _, _, tail = self.id.partition(":")
        return tail


class Edge(NamedTuple):
    """``src`` depends on ``dst``; ``label`` is the name through which it does (``mem.load``).

    An immutable record hashed in C (edges are deduplicated in a dict while a graph is
    built): a ``NamedTuple`` for the reason given on :class:`Node`."""

    src: str
    dst: str
    kind: EdgeKind
    label: str = ""


@dataclass(frozen=True)
class DepGraph:
    """An immutable dependency graph with one or more roots."""

    roots: tuple[str, ...]
    nodes: Mapping[str, Node]
    edges: tuple[Edge, ...]
    _out: Mapping[str, tuple[Edge, ...]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        nodes = self.nodes if isinstance(self.nodes, MappingProxyType) else MappingProxyType(dict(self.nodes))
        object.__setattr__(self, "nodes", nodes)
        out: dict[str, list[Edge]] = {}
        for edge in self.edges:
            out.setdefault(edge.src, []).append(edge)
        object.__setattr__(self, "_out", MappingProxyType({k: tuple(v) for k, v in out.items()}))
        missing = [r for r in self.roots if r not in nodes]
        if missing:
            raise ValueError(f"DepGraph roots {missing} are not nodes of the graph")
        dangling = [e for e in self.edges if e.src not in nodes or e.dst not in nodes]
        if dangling:
            raise ValueError(f"DepGraph edges point at unknown nodes: {dangling[:3]}")

    def successors(self, node_id: str) -> tuple[Edge, ...]:
        """Outgoing edges of ``node_id`` in insertion order."""
        return self._out.get(node_id, ())

    def out_edges(self) -> Mapping[str, tuple[Edge, ...]]:
        """Outgoing edges of every node that has any (read-only), in insertion order."""
        return self._out

    def reachable(self, root: str | None = None) -> Iterator[str]:
        """Node ids reachable from ``root`` (default: all roots), depth-first, each once."""
        stack = [root] if root is not None else list(reversed(self.roots))
        seen: set[str] = set()
        while stack:
            nid = stack.pop()
            if nid in seen:
                continue
            seen.add(nid)
            yield nid
            stack.extend(e.dst for e in reversed(self.successors(nid)))

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, node_id: object) -> bool:
        return node_id in self.nodes


def node_id(module: str, qualname: str, owner: str | None = None) -> str:
    """``module:qualname``, plus ``@owner`` for a method seen through a subclass."""
    base = f"{module}:{qualname}"
    return f"{base}@{owner}" if owner and owner != base.rsplit(".", 1)[0] else base


def external_id(dotted: str) -> str:
    """Id of a stdlib / third-party leaf, e.g. ``external:torch.zeros``."""
    return f"external:{dotted}"


def unresolved_id(where: str, name: str) -> str:
    """Id of a reference that could not be resolved, e.g. ``unresolved:pkg.k:f:getattr``."""
    return f"unresolved:{where}:{name}"


@dataclass(frozen=True, slots=True)
class NodeDiff:
    """One difference between two graphs. ``status`` is ``changed`` (own digest differs),
    ``added``/``removed``, or ``rebound``: the name ``node`` now resolves to another node
    (``old``/``new`` are then node ids)."""

    node: str
    kind: NodeKind
    status: str
    old: str = ""
    new: str = ""

    def __str__(self) -> str:
        if self.status == "rebound":
            return f"{self.node} now resolves to {self.new} (was {self.old})"
        what = {NodeKind.GLOBAL: "global", NodeKind.EXTERNAL: "library"}.get(self.kind, "helper")
        if self.status == "changed" and self.kind in (NodeKind.GLOBAL, NodeKind.EXTERNAL) and self.old != self.new:
            return f"{what} {self.node} changed: {self.old} -> {self.new}"
        return f"{what} {self.node} {self.status}"
