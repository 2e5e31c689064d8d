"""Output formats of a graph: tree, json, dot, mermaid, pycg.

Contract: pure formatting. Each formatter takes a :class:`~flydeps.graph.DepGraph`, the
transitive digests and the diagnostics, and returns text; nothing here analyses, reads
files or prints. Output is deterministic (goldens depend on it) and free of absolute
paths. The JSON schema (``flydeps.graph/1``) is documented in docs/cli.md and only grows
by adding keys.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]

from ..graph import DepGraph, Edge, EdgeKind, Node, NodeKind
from .project import Diagnostic

__all__ = ["FORMATS", "ReportOptions", "format_graph", "pycg_name"]

JSON_SCHEMA = "flydeps.graph/1"
# Enum ``.value`` is a descriptor call; graphs have tens of thousands of edges.
_KIND: dict[object, str] = {k: k.value for k in (*NodeKind, *EdgeKind)}
_SHORT = 8


@dataclass(frozen=True)
class ReportOptions:
    colour: bool = False
    expand_external: bool = False


class _Style:
    """ANSI styling, or none."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def __call__(self, text: str, code: str) -> str:
        return f"\033[{code}m{text}\033[0m" if self.on and text and code else text


_TAG_COLOUR = {"factory": "1;33", "kernel": "1;35", "launcher": "1;36"}


def _display_name(node: Node, parent: Node | None) -> str:
    """Qualname inside the parent's module, ``module:qualname`` across modules."""
    if node.kind is NodeKind.EXTERNAL:
        return node.id.partition(":")[2]
    if node.kind is NodeKind.UNRESOLVED:
        return node.id.rpartition(":")[2]
    if parent is not None and parent.module == node.module:
        return node.qualname
    return node.id


def _tree_line(node: Node, parent: Node | None, edge: Edge | None, digests: Mapping[str, str], style: _Style) -> str:
    name = _display_name(node, parent)
    parts = [style(name, "1" if parent is None else "")]
    if edge is not None and edge.kind not in (EdgeKind.CALLS, EdgeKind.NESTED, EdgeKind.METHOD, EdgeKind.READS):
        label = f" {edge.label}" if edge.label and not name.endswith(edge.label) else ""
        parts.append(style(f"({_KIND[edge.kind]}{label})", "2"))
    parts.extend(style(f"[{t}]", _TAG_COLOUR.get(t, "2")) for t in sorted(node.tags))
    if node.kind is NodeKind.UNRESOLVED:
        parts.append(style(f"unresolved: {node.detail}", "31"))
    elif node.kind is NodeKind.GLOBAL and node.detail:
        parts.append(style(f"= {node.detail}", "2"))
    if node.location is not None:
        parts.append(style(str(node.location), "2"))
    parts.append(style(digests.get(node.id, node.digest)[:_SHORT], "2"))
    return "  ".join(parts)


def format_tree(
    graph: DepGraph, digests: Mapping[str, str], diagnostics: Sequence[Diagnostic], options: ReportOptions
) -> str:
    style = _Style(options.colour)
    lines: list[str] = []
    shown: set[str] = set()
    for root in graph.roots:
        if lines:
            lines.append("")
        lines.append(_tree_line(graph.nodes[root], None, None, digests, style))
        _tree_children(graph, root, shown, digests, style, options, lines)
    externals = sum(1 for n in graph.nodes.values() if n.kind is NodeKind.EXTERNAL)
    unresolved = sum(1 for n in graph.nodes.values() if n.kind is NodeKind.UNRESOLVED)
    lines.append("")
    lines.append(
        f"{len(graph.roots)} roots, {len(graph.nodes)} nodes ({externals} external, {unresolved} unresolved), "
        f"{len(graph.edges)} edges" + (f"; {n} problems" if (n := sum(not d.note for d in diagnostics)) else "")
    )
    return "\n".join(lines) + "\n"


def _tree_items(graph: DepGraph, nid: str, options: ReportOptions) -> list[tuple[str, Edge | None]]:
    """Children of ``nid``: one item per edge target, externals folded into one line."""
    edges = list(dict((e.dst, e) for e in graph.successors(nid)).values())
    external = [e for e in edges if graph.nodes[e.dst].kind is NodeKind.EXTERNAL and not options.expand_external]
    items: list[tuple[str, Edge | None]] = [("", e) for e in edges if e not in external]
    if external:
        names = sorted({_display_name(graph.nodes[e.dst], None) for e in external})
        items.append(("external: " + ", ".join(names), None))
    return items


def _tree_children(
    graph: DepGraph,
    root: str,
    shown: set[str],
    digests: Mapping[str, str],
    style: _Style,
    options: ReportOptions,
    lines: list[str],
) -> None:
    """Depth-first with an explicit stack (no recursion limit on deep chains); a node
    already printed with children is not expanded again, a node on the path is a cycle."""
    shown.add(root)
    first = _tree_items(graph, root, options)
    stack: list[tuple[str, str, tuple[str, ...], Iterator[tuple[str, Edge | None]], int]] = [
        (root, "", (root,), iter(first), len(first))
    ]
    counters = [0]
    while stack:
        nid, prefix, path, items, total = stack[-1]
        item = next(items, None)
        if item is None:
            stack.pop()
            counters.pop()
            continue
        counters[-1] += 1
        text, edge = item
        branch, extend = ("└── ", "    ") if counters[-1] == total else ("├── ", "│   ")
        if edge is None:
            lines.append(prefix + branch + style(text, "2"))
            continue
        line = prefix + branch + _tree_line(graph.nodes[edge.dst], graph.nodes[nid], edge, digests, style)
        if edge.dst in path:
            lines.append(line + style("  (cycle)", "2"))
        elif edge.dst in shown and graph.successors(edge.dst):
            lines.append(line + style("  (see above)", "2"))
        else:
            lines.append(line)
            shown.add(edge.dst)
            children = _tree_items(graph, edge.dst, options)
            stack.append((edge.dst, prefix + extend, (*path, edge.dst), iter(children), len(children)))
            counters.append(0)


def graph_document(graph: DepGraph, digests: Mapping[str, str], diagnostics: Sequence[Diagnostic]) -> dict:
    """The ``flydeps.graph/1`` JSON document (see docs/cli.md)."""
    nodes = [
        {
            "id": n.id,
            "kind": _KIND[n.kind],
            "module": n.module if n.kind not in (NodeKind.EXTERNAL, NodeKind.UNRESOLVED) else "",
            "qualname": n.qualname if n.kind not in (NodeKind.EXTERNAL, NodeKind.UNRESOLVED) else "",
            "digest": n.digest,
            "transitive_digest": digests.get(n.id, ""),
            "location": {"path": n.location.path, "line": n.location.line} if n.location else None,
            "detail": n.detail,
            "tags": sorted(n.tags),
        }
        for n in sorted(graph.nodes.values(), key=lambda n: n.id)
    ]
    edges = [{"src": e.src, "dst": e.dst, "kind": _KIND[e.kind], "label": e.label} for e in graph.edges]
    problems = [{"path": d.path, "line": d.line, "message": d.message} for d in diagnostics]
    return {"schema": JSON_SCHEMA, "roots": list(graph.roots), "nodes": nodes, "edges": edges, "diagnostics": problems}


def format_json(
    graph: DepGraph, digests: Mapping[str, str], diagnostics: Sequence[Diagnostic], options: ReportOptions
) -> str:
    """:func:`graph_document` as text, one node/edge per line (readable in a diff).

    Written with json's C string encoder rather than ``json.dumps(indent=...)``, which
    is ten times slower on a 50,000-line repository; the output is the same JSON."""
    s = encode_basestring_ascii
    nodes = []
    for n in sorted(graph.nodes.values(), key=lambda n: n.id):
        leaf = n.kind in (NodeKind.EXTERNAL, NodeKind.UNRESOLVED)
        where = f'{{"path": {s(n.location.path)}, "line": {n.location.line}}}' if n.location else "null"
        tags = ", ".join(s(t) for t in sorted(n.tags))
        nodes.append(
            f'{{"id": {s(n.id)}, "kind": {s(_KIND[n.kind])}, "module": {s("" if leaf else n.module)}, '
            f'"qualname": {s("" if leaf else n.qualname)}, "digest": {s(n.digest)}, '
            f'"transitive_digest": {s(digests.get(n.id, ""))}, "location": {where}, "detail": {s(n.detail)}, '
            f'"tags": [{tags}]}}'
        )
    edges = [
        f'{{"src": {s(e.src)}, "dst": {s(e.dst)}, "kind": {s(_KIND[e.kind])}, "label": {s(e.label)}}}'
        for e in graph.edges
    ]
    problems = [f'{{"path": {s(d.path)}, "line": {d.line}, "message": {s(d.message)}}}' for d in diagnostics]
    parts = [f'  "schema": {s(JSON_SCHEMA)}']
    roots = [s(r) for r in graph.roots]
    for key, items in (("roots", roots), ("nodes", nodes), ("edges", edges), ("diagnostics", problems)):
        body = "[\n" + ",\n".join("    " + item for item in items) + "\n  ]" if items else "[]"
        parts.append(f'  "{key}": {body}')
    return "{\n" + ",\n".join(parts) + "\n}\n"


def _short_label(node: Node) -> str:
    name = _display_name(node, None)
    tags = "".join(f" [{t}]" for t in sorted(node.tags))
    where = f"\\n{node.location}" if node.location else ""
    return f"{name}{tags}{where}"


_DOT_STYLE = {
    NodeKind.EXTERNAL: "shape=ellipse, color=gray50, fontcolor=gray30",
    NodeKind.UNRESOLVED: 'shape=box, style="dashed", color=red',
    NodeKind.GLOBAL: "shape=note",
    NodeKind.OBJECT: "shape=component",
    NodeKind.CLASS: "shape=box3d",
    NodeKind.MODULE: "shape=tab",
}


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\\\\n", "\\n") + '"'


def format_dot(
    graph: DepGraph, digests: Mapping[str, str], diagnostics: Sequence[Diagnostic], options: ReportOptions
) -> str:
    lines = [
        "digraph flydeps {",
        "  rankdir=LR;",
        '  node [shape=box, fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=8];',
    ]
    for node in sorted(graph.nodes.values(), key=lambda n: n.id):
        attrs = _DOT_STYLE.get(node.kind, "")
        if node.id in graph.roots:
            attrs = (attrs + ", " if attrs else "") + "penwidth=2"
        label = _dot_quote(_short_label(node))
        lines.append(f"  {_dot_quote(node.id)} [label={label}{', ' + attrs if attrs else ''}];")
    for edge in graph.edges:
        lines.append(f"  {_dot_quote(edge.src)} -> {_dot_quote(edge.dst)} [label={_dot_quote(_KIND[edge.kind])}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;").replace("\\n", "<br/>")


def format_mermaid(
    graph: DepGraph, digests: Mapping[str, str], diagnostics: Sequence[Diagnostic], options: ReportOptions
) -> str:
    ids = {nid: f"n{i}" for i, nid in enumerate(sorted(graph.nodes))}
    lines = ["flowchart LR"]
    for nid in sorted(graph.nodes):
        node = graph.nodes[nid]
        text = _mermaid_text(_short_label(node))
        shape = f'(["{text}"])' if node.kind is NodeKind.EXTERNAL else f'["{text}"]'
        lines.append(f"  {ids[nid]}{shape}")
    for edge in graph.edges:
        lines.append(f"  {ids[edge.src]} -->|{_KIND[edge.kind]}| {ids[edge.dst]}")
    unresolved = [ids[n] for n, node in sorted(graph.nodes.items()) if node.kind is NodeKind.UNRESOLVED]
    if unresolved:
        lines.append("  classDef unresolved stroke:#d00,stroke-dasharray:4")
        lines.append(f"  class {','.join(unresolved)} unresolved")
    return "\n".join(lines) + "\n"


_PYCG_CODE = (NodeKind.FUNCTION, NodeKind.METHOD, NodeKind.CLASS)
_PYCG_EDGES = (EdgeKind.CALLS, EdgeKind.METHOD, EdgeKind.CLOSURE, EdgeKind.DECORATES)


def pycg_name(node: Node) -> str | None:
    """PyCG's dotted name: ``pkg.mod.outer.inner``, builtins as ``<builtin>.len``."""
    if node.kind is NodeKind.EXTERNAL:
        dotted = node.id.partition(":")[2]
        return "<builtin>." + dotted[len("builtins.") :] if dotted.startswith("builtins.") else dotted
    if node.kind not in _PYCG_CODE:
        return None
    qual = node.qualname.partition("@")[0].replace(".<locals>.", ".")
    qual = ".".join(part.partition("#")[0] for part in qual.split("."))
    return f"{node.module}.{qual}"


def format_pycg(
    graph: DepGraph, digests: Mapping[str, str], diagnostics: Sequence[Diagnostic], options: ReportOptions
) -> str:
    calls: dict[str, set[str]] = {}
    for node in graph.nodes.values():
        name = pycg_name(node)
        if name is not None and node.kind is not NodeKind.EXTERNAL:
            calls.setdefault(name, set())
    for edge in graph.edges:
        src, dst = pycg_name(graph.nodes[edge.src]), pycg_name(graph.nodes[edge.dst])
        if edge.kind in _PYCG_EDGES and src in calls and dst is not None:
            calls[src].add(dst)
    return json.dumps({k: sorted(v) for k, v in sorted(calls.items())}, indent=2) + "\n"


Formatter = Callable[[DepGraph, Mapping[str, str], Sequence[Diagnostic], ReportOptions], str]
FORMATS: dict[str, Formatter] = {
    "tree": format_tree,
    "json": format_json,
    "dot": format_dot,
    "mermaid": format_mermaid,
    "pycg": format_pycg,
}


def format_graph(
    fmt: str,
    graph: DepGraph,
    digests: Mapping[str, str],
    diagnostics: Sequence[Diagnostic],
    options: ReportOptions = ReportOptions(),
) -> str:
    """Render ``graph`` in format ``fmt`` (one of :data:`FORMATS`)."""
    return FORMATS[fmt](graph, digests, diagnostics, options)
