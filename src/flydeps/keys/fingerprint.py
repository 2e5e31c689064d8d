"""Fingerprints: Merkle digests over a dependency graph, and their differences.

Contract: pure functions of a :class:`~flydeps.graph.DepGraph` (``transitive_digests``)
plus :class:`Fingerprint`, which keeps the live roots and bindings of a runtime
discovery so it can hand out a :class:`~flydeps.keys.guard.Guard` and be recomputed. A
node's transitive digest covers its own digest and, for every out-edge, the edge kind,
the name used and the child's transitive digest, in a canonical order, so two front-ends
that find the same graph in a different order agree. Cycles are digested per strongly
connected component. Nothing here reads files or the clock; ids and digests only.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from blake3 import blake3

from ..errors import DiscoveryError
from ..graph import DepGraph, EdgeKind, NodeDiff
from ..live.discover import Discovery, discover_roots, gc_paused
from .codeswap import code_swaps, merge_code_swaps

if TYPE_CHECKING:
    from .guard import Guard

__all__ = ["Fingerprint", "NodeDiff", "fingerprint", "fingerprint_roots", "transitive_digests"]


def _h(*parts: str) -> str:
    return blake3("\x1f".join(parts).encode("utf-8", "surrogatepass")).digest().hex()


def _sccs(graph: DepGraph) -> list[list[str]]:
    """Strongly connected components in reverse topological order (children first).

    Iterative Tarjan: no recursion, so a chain of thousands of helpers is fine."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    successors = {nid: [e.dst for e in edges] for nid, edges in graph.out_edges().items()}
    no_successors: list[str] = []
    for start in graph.nodes:
        if start in index:
            continue
        work = [(start, iter(successors.get(start, no_successors)))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(successors.get(child, no_successors))))
                    break
                if child in on_stack and index[child] < low[node]:
                    low[node] = index[child]
            else:
                work.pop()
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    out.append(component)
                if work:
                    parent = work[-1][0]
                    if low[node] < low[parent]:
                        low[parent] = low[node]
    return out


_KIND_VALUES = {kind: kind.value for kind in EdgeKind}  # Enum.value is a Python-level descriptor


def transitive_digests(graph: DepGraph) -> Mapping[str, str]:
    """Every node's transitive (Merkle) digest, hex.

    One depth-first pass digests each node after its children; a graph with a cycle (the
    pass meets a node still on its path) is digested per strongly connected component
    instead (:func:`_digests_by_component`), which gives the same digest to every node that
    is on no cycle."""
    nodes, out, kinds = graph.nodes, graph.out_edges(), _KIND_VALUES
    result: dict[str, str] = {}
    path: set[str] = set()
    none: tuple = ()
    for root in nodes:
        if root in result:
            continue
        stack = [(root, iter(out.get(root, none)))]
        path.add(root)
        while stack:
            nid, edges = stack[-1]
            for e in edges:
                child = e.dst
                if child in result:
                    continue
                if child in path:
                    return _digests_by_component(graph)
                path.add(child)
                stack.append((child, iter(out.get(child, none))))
                break
            else:
                stack.pop()
                path.discard(nid)
                own = out.get(nid)
                if own:
                    parts = [f"{kinds[e.kind]}:{e.label}:{result[e.dst]}" for e in own]
                    parts.sort()
                    result[nid] = _h("node", nodes[nid].digest, *parts)
                else:
                    result[nid] = _h("node", nodes[nid].digest)
    return MappingProxyType(result)


def _digests_by_component(graph: DepGraph) -> Mapping[str, str]:
    """Merkle digests of a graph with cycles: a node on no cycle as in
    :func:`transitive_digests`; the members of a cycle share the digest of their component."""
    result: dict[str, str] = {}
    nodes, out, kinds = graph.nodes, graph.out_edges(), _KIND_VALUES
    for component in _sccs(graph):
        if len(component) == 1:
            nid = component[0]
            edges = out.get(nid)
            if not edges:
                result[nid] = _h("node", nodes[nid].digest)
                continue
            try:  # every child is digested already, unless the node reaches itself
                parts = [f"{kinds[e.kind]}:{e.label}:{result[e.dst]}" for e in edges]
            except KeyError:
                pass  # a self-loop: digested as a cycle below
            else:
                parts.sort()
                result[nid] = _h("node", nodes[nid].digest, *parts)
                continue
        members = set(component)
        lines = []
        for nid in sorted(component):
            outs = sorted(
                f"{kinds[e.kind]}:{e.label}:" + (f"@{e.dst}" if e.dst in members else result[e.dst])
                for e in out.get(nid, ())
            )
            lines.append(_h(nid, nodes[nid].digest, *outs))
        scc = _h("scc", *lines)
        for nid in component:
            result[nid] = _h("member", scc, nid)
    return MappingProxyType(result)


@dataclass(frozen=True)
class Fingerprint:
    """The digest of an object and everything it reaches, with the graph behind it.

    ``digest`` is stable across processes and machines (same Python and library
    versions). ``node_digests`` maps node ids to transitive digests.
    """

    digest: str
    graph: DepGraph
    node_digests: Mapping[str, str] = field(repr=False)
    _discovery: Discovery | None = field(default=None, repr=False, compare=False)
    _roots: tuple[tuple[object, type | None, str], ...] = field(default=(), repr=False, compare=False)
    positions: bool = field(default=False, repr=False, compare=False)  # source locations digested

    @property
    def identified(self) -> tuple[str, ...]:
        """Nodes whose digest includes an object's identity (a value over the snapshot limit,
        an object with no readable state): then ``digest`` holds in this process only, and
        no cross-process store may be keyed by it. Empty for a fingerprint built from files."""
        return self._discovery.identified if self._discovery is not None else ()

    def guard(self) -> "Guard":
        """A guard over the live bindings this fingerprint was computed from."""
        from .guard import Guard

        if self._discovery is None:
            raise DiscoveryError("this fingerprint was built from files, not live objects: it has no guard")
        return Guard(self._discovery)

    def detached(self) -> "Fingerprint":
        """The same digest, graph and node digests without the live objects it was
        discovered from: it keeps nothing of the user's code alive and can still
        :meth:`explain` a later state against it (no :meth:`guard`, no :meth:`refresh`)."""
        return dataclasses.replace(self, _discovery=None, _roots=())

    def refresh(self) -> "Fingerprint":
        """Recompute from the same live roots (what they reach *now*)."""
        if not self._roots:
            raise DiscoveryError("this fingerprint has no live roots to recompute from")
        return fingerprint_roots(self._roots, positions=self.positions)

    def diff(self, other: "Fingerprint") -> tuple[NodeDiff, ...]:
        """Nodes whose own digest differs, ``self`` being the newer state."""
        new, old = self.graph.nodes, other.graph.nodes
        out = _rebound_edges(self.graph, other.graph)
        out += [
            NodeDiff(nid, node.kind, "changed", old[nid].detail, node.detail)
            for nid, node in new.items()
            if nid in old and old[nid].digest != node.digest
        ]
        out += [NodeDiff(nid, node.kind, "added", "", node.detail) for nid, node in new.items() if nid not in old]
        out += [NodeDiff(nid, node.kind, "removed", node.detail) for nid, node in old.items() if nid not in new]
        swaps = code_swaps(other._discovery, self._discovery)
        return _generations(merge_code_swaps(out, swaps), self.graph, other.graph)

    def explain(self, other: "Fingerprint") -> tuple[str, ...]:
        """Human reasons why ``self`` differs from ``other`` (empty when digests agree).

        The direction: ``self`` is the newer state, ``other`` the older one, so call it as
        ``new.explain(old)``: "helper ``X`` added" means ``X`` is in ``new`` only, and
        "``a -> b``" reads old value -> new value (as :meth:`diff`)."""
        if self.digest == other.digest:
            return ()
        reasons = tuple(str(d) for d in self.diff(other))
        return reasons or ("the dependency structure changed (same nodes, different edges)",)


_GENERATION = re.compile(r"#\d+(?=#|$)")


def _generation_base(nid: str) -> str:
    """``a:load#2`` -> ``a:load``: distinct function objects of one ``def`` are numbered in
    the order a walk reaches them (two generations alive after a partial reload, two
    closures), so the number says nothing about which is which."""
    return _GENERATION.sub("", nid)


def _generations(diffs: list[NodeDiff], new: DepGraph, old: DepGraph) -> tuple[NodeDiff, ...]:
    """``diffs`` without what only renumbering made: a name that now reaches another
    generation of the same function is that function ``changed`` when its digest differs
    (``helper a:load changed``, not ``load (read by a:acc) now resolves to a:load#2``), and
    nothing when it does not; each difference once."""
    out: list[NodeDiff] = []
    renumbered: set[str] = set()
    for d in diffs:
        if d.status == "rebound" and _generation_base(d.old) == _generation_base(d.new):
            renumbered.add(d.new)
            if old.nodes[d.old].digest != new.nodes[d.new].digest:
                out.append(NodeDiff(_generation_base(d.new), d.kind, "changed"))
            continue
        out.append(d)
    kept = [d for d in out if not (d.status == "added" and d.node in renumbered)]
    return tuple(dict.fromkeys(kept))


def _rebound_edges(new: DepGraph, old: DepGraph) -> list[NodeDiff]:
    """Names that now resolve to another node (``mem._load_q`` rebound to a new function)."""
    before = {(e.src, e.kind, e.label): e.dst for e in old.edges}
    out = []
    for e in new.edges:
        was = before.get((e.src, e.kind, e.label))
        if was is not None and was != e.dst:
            kind = new.nodes[e.dst].kind
            out.append(NodeDiff(f"{e.label} (read by {e.src})", kind, "rebound", was, e.dst))
    return out


def fingerprint(obj: object, *, owner: type | None = None, positions: bool = False) -> Fingerprint:
    """Fingerprint ``obj``: discover what it depends on and digest it (see :func:`discover`).

    ``positions=True``: function digests include their source locations (file name as
    given, lines, columns), for products that embed them, e.g. FlyDSL with
    ``FLYDSL_DEBUG_ENABLE_DEBUG_INFO=1``; moving code then changes the fingerprint."""
    if obj is None:
        raise DiscoveryError("cannot fingerprint None: pass the function, method, class or callable to analyse")
    return fingerprint_roots(((obj, owner, "root"),), positions=positions)


def fingerprint_roots(roots: Sequence[tuple[object, type | None, str]], *, positions: bool = False) -> Fingerprint:
    """Fingerprint several live roots together: ``(object, owner, hint id)`` each
    (``positions``: see :func:`fingerprint`)."""
    roots = tuple(roots)
    with gc_paused():  # the walk and the digests allocate much and free nothing (see gc_paused)
        found = discover_roots(roots, positions=positions)
        digests = transitive_digests(found.graph)
    digest = _h("roots", *(digests[r] for r in found.graph.roots))
    return Fingerprint(digest, found.graph, digests, found, roots, positions)
