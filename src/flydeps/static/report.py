"""Output formats of a graph: tree, json, dot, mermaid, pycg.

Contract: pure formatting. Each formatter takes a :class:`~flydeps.graph.DepGraph`, the
transitive digests and the diagnostics, and returns text; nothing here analyses, reads
files or prints. The call graph, when the caller solved it (``ReportOptions.calls``), is
what ``pycg`` writes and what labels the tree and json edges as calls or references.
Output is deterministic (goldens depend on it) and free of absolute paths. The JSON schema
(``flydeps.graph/1``) is documented in docs/cli.md and only grows by adding keys.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring_ascii  # type: ignore[attr-defined]
from typing import TYPE_CHECKING

from ..graph import DepGraph, Edge, EdgeKind, Node, NodeKind
from .project import Diagnostic, one_line

if TYPE_CHECKING:  # imported by the runs that solve a call graph only
    from .calls.result import CallGraph

__all__ = ["EXTERNALS", "FORMATS", "MAX_TREE_DEPTH", "TREE_LEGEND", "ReportOptions", "format_graph", "format_pycg"]

JSON_SCHEMA = "flydeps.graph/1"
# Enum ``.value`` is a descriptor call; graphs have tens of thousands of edges.
_KIND: dict[object, str] = {k: k.value for k in (*NodeKind, *EdgeKind)}
_SHORT = 8


@dataclass(frozen=True)
class ReportOptions:
    """``colour``: ANSI styles; ``expand_external``: library calls one per line in the
    tree; ``externals``: in the pictures (dot, mermaid), ``show`` every library leaf,
    ``collapse`` them into one node per library (the default), ``hide`` them; ``legend``:
    the tree ends with what each column and marker means; ``calls``: the
    call graph (``analyze(..., calls=True)``): the pycg format writes it, the tree marks
    each edge through which code uses code ``(call)`` or ``(ref)``, the json gives every
    edge a ``call`` key."""

    colour: bool = False
    expand_external: bool = False
    legend: bool = False
    calls: CallGraph | None = None
    externals: str = "collapse"  # dot/mermaid: library leaves each shown, one per library, or hidden


class _Calls:
    """Call-graph answers about the dependency graph's edges and nodes."""

    def __init__(self, graph: DepGraph, calls: CallGraph) -> None:
        self.graph, self.calls = graph, calls

    @staticmethod
    def _code(node: Node) -> tuple[str, str]:
        return node.module, node.qualname.partition("@")[0]

    def is_call(self, edge: Edge) -> bool | None:
        """True for a call, False for a reference, None when the edge is not between code."""
        src, dst = self.graph.nodes[edge.src], self.graph.nodes[edge.dst]
        if src.kind not in _CALLERS or dst.kind not in (*_CODE, NodeKind.EXTERNAL) or edge.kind not in _USES:
            return None  # structure (nesting, enclosing code, decorators, class members), not a use
        if edge.kind is EdgeKind.CLOSURE and edge.label == "<enclosing>":
            return None
        if "<lambda>" in src.qualname or "<lambda>" in dst.qualname:
            return None  # the call graph numbers lambdas (<lambda1>), the dependency graph does not
        callees = self.calls.calls.get(self._code(src), frozenset())
        if dst.kind is NodeKind.EXTERNAL:
            return ("external", dst.id.partition(":")[2]) in callees
        if dst.kind is NodeKind.CLASS:
            return any(c[0] == "code" and c[1] == dst.module and c[2].startswith(dst.qualname + ".") for c in callees)
        return ("code", *self._code(dst)) in callees


_CODE = (NodeKind.FUNCTION, NodeKind.METHOD, NodeKind.CLASS)
# The detail of an unresolved ``self.x`` whose value flow is known (set by ``analyze``).
_HELD = "instance attribute holding "
_CALLERS = (NodeKind.FUNCTION, NodeKind.METHOD)
# Edges through which code uses a name (so it either calls or only references it).
_USES = (EdgeKind.CALLS, EdgeKind.METHOD, EdgeKind.CLOSURE, EdgeKind.OVERRIDES, EdgeKind.READS)


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


def _tree_line(
    node: Node,
    parent: Node | None,
    edge: Edge | None,
    digests: Mapping[str, str],
    style: _Style,
    calls: _Calls | None = None,
) -> str:
    name = one_line(_display_name(node, parent))
    parts = [style(name, "1" if parent is None else "")]
    if edge is not None and edge.kind not in (EdgeKind.CALLS, EdgeKind.NESTED, EdgeKind.METHOD, EdgeKind.READS):
        label = f" {one_line(edge.label)}" if edge.label and not name.endswith(edge.label) else ""
        parts.append(style(f"({_KIND[edge.kind]}{label})", "2"))
    if edge is not None and calls is not None and edge.kind is not EdgeKind.NESTED:
        called = calls.is_call(edge)
        if called is not None:
            parts.append(style("(call)" if called else "(ref)", "2"))
    parts.extend(style(f"[{t}]", _TAG_COLOUR.get(t, "2")) for t in sorted(node.tags))
    if node.kind is NodeKind.UNRESOLVED and node.detail.startswith(_HELD):  # known by value flow
        parts.append(style(one_line(node.detail), "36"))
    elif node.kind is NodeKind.UNRESOLVED:
        parts.append(style(f"unresolved: {one_line(node.detail)}", "31"))
    elif node.kind is NodeKind.GLOBAL and node.detail:
        parts.append(style(f"= {one_line(node.detail)}", "2"))
    if node.location is not None:
        parts.append(style(one_line(str(node.location)), "2"))
    parts.append(style(digests.get(node.id, node.digest)[:_SHORT], "2"))
    return "  ".join(parts)


#: Levels drawn below a block's first line. A deeper subtree is cut (``(continued
#: below)``) and drawn as a block of its own after the current one, so that the output
#: stays linear in the graph's size: indenting a 20,000-deep call chain in full would
#: take 4 bytes x depth per line (800 MB).
MAX_TREE_DEPTH = 32

#: What the tree shows, for ``flydeps graph --legend`` (docs/cli.md says the same).
TREE_LEGEND = (
    ("name", "qualname inside the parent's module, module:qualname across modules"),
    ("f.<locals>.g", "function g defined inside f"),
    ("m@mod:Sub", "method m as seen through subclass mod:Sub (its self.x resolve on Sub)"),
    ("f#default.x", "the default value of f's parameter x"),
    ("f#decorator.N", "the arguments of f's N-th decorator call"),
    ("f#patch.N", "a module-level rebinding Cls.f = transform(Cls.f)"),
    ("f#annotations", "f's evaluated annotations"),
    ("(kind label)", "why the parent depends on it (closure, default, decorates, attribute, ...);"),
    ("", "calls, reads, nested functions and self.x methods are unmarked"),
    ("[factory]", "compile factory: functools.lru_cache / functools.cache / cached_factory"),
    ("[kernel] [launcher]", "@flyc.kernel, @flyc.jit"),
    ("[static-expression]", "digested from its normalized source expression, not a value snapshot"),
    ("= text", "the source text of a global's value"),
    ("path:line", "where it is defined, relative to its root"),
    ("1a2b3c4d", "first 8 hex digits of the transitive digest: changes when the node or"),
    ("", "anything below it changes (flydeps hash prints it in full)"),
    ("external: a, b", "library code called, digested by distribution==version (--externals: one per line)"),
    ("unresolved: why", "a name flydeps could not resolve from source, with the reason"),
    ("(call) (ref)", "with --calls: the parent calls it, or only names it (return f, a table entry)"),
    ("instance attribute holding f", "self.x still unresolved, but value flow knows what it holds"),
    ("(see above)", "printed with its subtree earlier in the output"),
    ("(cycle)", "an edge back to a node on the current path"),
    ("(continued below)", f"deeper than {MAX_TREE_DEPTH} levels: drawn as a block of its own further down"),
)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def format_tree(
    graph: DepGraph, digests: Mapping[str, str], diagnostics: Sequence[Diagnostic], options: ReportOptions
) -> str:
    tree = _Tree(graph, digests, _Style(options.colour), options)
    tree.calls = _Calls(graph, options.calls) if options.calls is not None else None
    for root in graph.roots:
        tree.block(root, continued=False)
        while tree.pending:  # subtrees cut at MAX_TREE_DEPTH, right after their root's block
            tree.block(tree.pending.popleft(), continued=True)
    externals = sum(1 for n in graph.nodes.values() if n.kind is NodeKind.EXTERNAL)
    unresolved = sum(1 for n in graph.nodes.values() if n.kind is NodeKind.UNRESOLVED)
    known = sum(1 for n in graph.nodes.values() if n.kind is NodeKind.UNRESOLVED and n.detail.startswith(_HELD))
    held = f", of which {known} instance attributes known by value flow" if known else ""
    problems = sum(not d.note for d in diagnostics)
    lines = tree.lines
    lines.append("")
    lines.append(
        f"{_plural(len(graph.roots), 'root')}, {_plural(len(graph.nodes), 'node')} ({externals} external, "
        f"{unresolved} unresolved{held}), {_plural(len(graph.edges), 'edge')}"
        + (f"; {_plural(problems, 'problem')}" if problems else "")
    )
    if options.legend:
        width = max(len(key) for key, _ in TREE_LEGEND)
        lines.extend(["", "Legend:", *(f"  {key:<{width}}  {text}" for key, text in TREE_LEGEND)])
    return "\n".join(lines) + "\n"


def _tree_items(graph: DepGraph, nid: str, options: ReportOptions) -> list[tuple[str, Edge | None]]:
    """Children of ``nid``: one item per edge target, externals folded into one line."""
    edges = list(dict((e.dst, e) for e in graph.successors(nid)).values())
    if options.externals == "hide":
        edges = [e for e in edges if graph.nodes[e.dst].kind is not NodeKind.EXTERNAL]
    external = [e for e in edges if graph.nodes[e.dst].kind is NodeKind.EXTERNAL and not options.expand_external]
    items: list[tuple[str, Edge | None]] = [("", e) for e in edges if e not in external]
    if external:
        names = sorted({_display_name(graph.nodes[e.dst], None) for e in external})
        items.append(("external: " + ", ".join(one_line(n) for n in names), None))
    return items


class _Tree:
    """The tree text, drawn depth-first with an explicit stack (no recursion limit). A
    node already drawn with its children is not expanded again (``(see above)``), a node
    on the current path is a cycle, and a subtree deeper than :data:`MAX_TREE_DEPTH` is
    queued in :attr:`pending` to be drawn as a block of its own."""

    def __init__(self, graph: DepGraph, digests: Mapping[str, str], style: _Style, options: ReportOptions) -> None:
        self.graph, self.digests, self.style, self.options = graph, digests, style, options
        self.lines: list[str] = []
        self.shown: set[str] = set()
        self.pending: deque[str] = deque()
        self._queued: set[str] = set()
        self.calls: _Calls | None = None

    def block(self, root: str, *, continued: bool) -> None:
        if self.lines:
            self.lines.append("")
        first = _tree_line(self.graph.nodes[root], None, None, self.digests, self.style)
        self.lines.append(first + (self.style("  (continued)", "2") if continued else ""))
        self._queued.discard(root)
        self.shown.add(root)
        children = _tree_items(self.graph, root, self.options)
        stack: list[tuple[str, str, Iterator[tuple[str, Edge | None]], int, list[int]]] = [
            (root, "", iter(children), len(children), [0])
        ]
        on_path = {root}
        while stack:
            nid, prefix, items, total, count = stack[-1]
            item = next(items, None)
            if item is None:
                stack.pop()
                on_path.discard(nid)
                continue
            count[0] += 1
            branch, extend = ("└── ", "    ") if count[0] == total else ("├── ", "│   ")
            child = self._line(nid, prefix + branch, item, on_path, deep=len(stack) >= MAX_TREE_DEPTH)
            if child is not None:
                grandchildren = _tree_items(self.graph, child, self.options)
                stack.append((child, prefix + extend, iter(grandchildren), len(grandchildren), [0]))
                on_path.add(child)

    def _line(
        self, parent: str, head: str, item: tuple[str, Edge | None], on_path: set[str], *, deep: bool
    ) -> str | None:
        """Append one child's line; return the child's id when its children come next."""
        text, edge = item
        style = self.style
        if edge is None:
            self.lines.append(head + style(text, "2"))
            return None
        dst = edge.dst
        line = head + _tree_line(self.graph.nodes[dst], self.graph.nodes[parent], edge, self.digests, style, self.calls)
        if dst in on_path:
            self.lines.append(line + style("  (cycle)", "2"))
        elif dst in self._queued:
            self.lines.append(line + style("  (continued below)", "2"))
        elif dst in self.shown and self.graph.successors(dst):
            self.lines.append(line + style("  (see above)", "2"))
        elif deep and self.graph.successors(dst):
            self.lines.append(line + style("  (continued below)", "2"))
            self._queued.add(dst)
            self.pending.append(dst)
        else:
            self.lines.append(line)
            self.shown.add(dst)
            return dst
        return None


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
    if options.calls is not None:  # with the call graph: "call" true (a call), false (a reference), null
        calls = _Calls(graph, options.calls)
        marks = {True: "true", False: "false", None: "null"}
        edges = [
            f'{text[:-1]}, "call": {marks[calls.is_call(e)]}}}' for text, e in zip(edges, graph.edges, strict=True)
        ]
    problems = [f'{{"path": {s(d.path)}, "line": {d.line}, "message": {s(d.message)}}}' for d in diagnostics]
    parts = [f'  "schema": {s(JSON_SCHEMA)}']
    roots = [s(r) for r in graph.roots]
    for key, items in (("roots", roots), ("nodes", nodes), ("edges", edges), ("diagnostics", problems)):
        body = "[\n" + ",\n".join("    " + item for item in items) + "\n  ]" if items else "[]"
        parts.append(f'  "{key}": {body}')
    return "{\n" + ",\n".join(parts) + "\n}\n"


# The pictures (dot, mermaid): nodes grouped by module, filled by role; library leaves
# collapsed into one node per library unless asked (a real kernel reaches ~100 of them).
EXTERNALS = ("collapse", "show", "hide")
# role -> (fill, border): Okabe-Ito hues, light fills, readable in grey print.
_ROLE_COLOURS = {
    "factory": ("#FBD9A0", "#E69F00"),
    "kernel": ("#CDE9F8", "#0072B2"),
    "launcher": ("#BDE8D9", "#009E73"),
    "helper": ("#FFFFFF", "#555555"),
    "class": ("#EFEFEF", "#555555"),
    "value": ("#FAF6C6", "#B8A800"),
    "library": ("#E5E5E5", "#999999"),
    "unresolved": ("#FFE5E5", "#D00000"),
}
_ROLE_SHAPE = {"value": "note", "class": "box3d", "library": "ellipse", "unresolved": "box"}


def _role(node: Node) -> str:
    for tag in ("factory", "launcher", "kernel"):
        if tag in node.tags:
            return tag
    return {
        NodeKind.GLOBAL: "value",
        NodeKind.EXTERNAL: "library",
        NodeKind.UNRESOLVED: "unresolved",
        NodeKind.CLASS: "class",
    }.get(node.kind, "helper")


@dataclass(frozen=True)
class _Picture:
    """What a picture draws: ``clusters`` (module -> its node ids, in order), ``libraries``
    (id -> label of each library node), ``edges`` (src, dst, label), ``labels`` by id."""

    clusters: dict[str, list[str]]
    libraries: dict[str, str]
    edges: list[tuple[str, str, str]]
    labels: dict[str, str]
    roles: dict[str, str]


def _picture(graph: DepGraph, externals: str) -> _Picture:
    clusters: dict[str, list[str]] = {}
    libraries: dict[str, set[str]] = {}
    labels: dict[str, str] = {}
    roles: dict[str, str] = {}
    leaf_of: dict[str, str] = {}  # an external node -> the node drawn for it
    for node in sorted(graph.nodes.values(), key=lambda n: n.id):
        role = _role(node)
        if node.kind is NodeKind.EXTERNAL:
            if externals == "hide":
                continue
            dotted = node.id.partition(":")[2]
            drawn = node.id if externals == "show" else "external:" + dotted.partition(".")[0]
            leaf_of[node.id] = drawn
            libraries.setdefault(drawn, set()).add(dotted)
            roles[drawn] = role
            continue
        module = node.module if node.kind is not NodeKind.UNRESOLVED else "unresolved"
        clusters.setdefault(module, []).append(node.id)
        name = one_line(node.qualname if node.kind is not NodeKind.UNRESOLVED else _display_name(node, None))
        tags = "".join(f" [{t}]" for t in sorted(node.tags))
        where = f"\\n{node.location.path.rpartition('/')[2]}:{node.location.line}" if node.location else ""
        labels[node.id] = f"{name}{tags}{where}"
        roles[node.id] = role
    library_labels = {}
    for drawn, names in libraries.items():
        top = drawn.partition(":")[2]
        library_labels[drawn] = top if externals == "show" else f"{top}\\n{_plural(len(names), 'name')}"
    edges: dict[tuple[str, str], str] = {}
    for edge in graph.edges:
        src, dst = edge.src, leaf_of.get(edge.dst, edge.dst)
        if src not in roles or dst not in roles or src == dst:
            continue
        edges.setdefault((src, dst), "" if edge.kind is EdgeKind.CALLS else _KIND[edge.kind])
    ordered = sorted((a, b, k) for (a, b), k in edges.items())  # the same picture on every interpreter
    return _Picture(clusters, library_labels, ordered, labels, roles)


def _dot_quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\\\\n", "\\n") + '"'


def _dot_node(nid: str, label: str, role: str, root: bool) -> str:
    fill, border = _ROLE_COLOURS[role]
    shape = _ROLE_SHAPE.get(role, "box")
    style = '"dashed,filled"' if role == "unresolved" else '"rounded,filled"' if shape == "box" else "filled"
    width = ", penwidth=2.5" if root else ""
    return (
        f"    {_dot_quote(nid)} [label={_dot_quote(label)}, shape={shape}, style={style}, "
        f'fillcolor="{fill}", color="{border}"{width}];'
    )


def format_dot(
    graph: DepGraph, digests: Mapping[str, str], diagnostics: Sequence[Diagnostic], options: ReportOptions
) -> str:
    """Graphviz: a cluster per module, nodes filled by role (the legend says which), library
    leaves per ``options.externals``; roots drawn with a thick border."""
    picture = _picture(graph, options.externals)
    roots = set(graph.roots)
    lines = [
        "digraph flydeps {",
        "  rankdir=LR; newrank=true;",
        '  node [fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=8, color="#666666", arrowsize=0.6];',
        '  graph [fontname="Helvetica", fontsize=11];',
    ]
    for n, (module, nids) in enumerate(sorted(picture.clusters.items())):
        lines.append(f'  subgraph "cluster_{n}" {{')
        lines.append(f'    label={_dot_quote(module)}; style="rounded"; color="#BBBBBB";')
        lines += [_dot_node(nid, picture.labels[nid], picture.roles[nid], nid in roots) for nid in nids]
        lines.append("  }")
    if picture.libraries:
        lines.append('  subgraph "cluster_libraries" {')
        lines.append('    label="libraries"; style="rounded,dashed"; color="#BBBBBB";')
        lines += [_dot_node(nid, label, "library", False) for nid, label in sorted(picture.libraries.items())]
        lines.append("  }")
    for src, dst, kind in picture.edges:
        label = f" [label={_dot_quote(kind)}]" if kind else ""
        lines.append(f"  {_dot_quote(src)} -> {_dot_quote(dst)}{label};")
    lines.append('  subgraph "cluster_legend" {')
    lines.append('    label="legend"; style="rounded"; color="#DDDDDD";')
    used = sorted(set(picture.roles.values()), key=list(_ROLE_COLOURS).index)
    lines += [_dot_node(f"legend:{role}", role, role, False) for role in used]
    lines += [f'    "legend:{a}" -> "legend:{b}" [style=invis];' for a, b in zip(used, used[1:])]
    lines.append("  }")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    return text.replace('"', "#quot;").replace("<", "#lt;").replace(">", "#gt;").replace("\\n", "<br/>")


def format_mermaid(
    graph: DepGraph, digests: Mapping[str, str], diagnostics: Sequence[Diagnostic], options: ReportOptions
) -> str:
    """Mermaid: the same picture as :func:`format_dot` (subgraph per module, classes by role)."""
    picture = _picture(graph, options.externals)
    every = sorted(picture.roles)
    ids = {nid: f"n{i}" for i, nid in enumerate(every)}
    lines = ["flowchart LR"]
    for n, (module, nids) in enumerate(sorted(picture.clusters.items())):
        lines.append(f'  subgraph m{n}["{_mermaid_text(module)}"]')
        lines += [f'    {ids[nid]}["{_mermaid_text(picture.labels[nid])}"]' for nid in nids]
        lines.append("  end")
    if picture.libraries:
        lines.append('  subgraph libraries["libraries"]')
        lines += [f'    {ids[nid]}(["{_mermaid_text(label)}"])' for nid, label in sorted(picture.libraries.items())]
        lines.append("  end")
    for src, dst, kind in picture.edges:
        arrow = f"-->|{kind}|" if kind else "-->"
        lines.append(f"  {ids[src]} {arrow} {ids[dst]}")
    for role, (fill, border) in _ROLE_COLOURS.items():
        members = [ids[nid] for nid in every if picture.roles[nid] == role]
        if members:
            dashed = ",stroke-dasharray:4" if role == "unresolved" else ""
            lines.append(f"  classDef {role} fill:{fill},stroke:{border}{dashed}")
            lines.append(f"  class {','.join(members)} {role}")
    roots = [ids[r] for r in graph.roots if r in ids]
    if roots:
        lines.append("  classDef root stroke-width:3px")
        lines.append(f"  class {','.join(roots)} root")
    return "\n".join(lines) + "\n"


def format_pycg(
    graph: DepGraph, digests: Mapping[str, str], diagnostics: Sequence[Diagnostic], options: ReportOptions
) -> str:
    """PyCG's interchange format: calls only, module code as a caller named by the module."""
    if options.calls is None:
        raise ValueError(
            "the pycg format writes the call graph: pass ReportOptions(calls=analyze(..., calls=True).calls)"
        )
    return json.dumps(options.calls.pycg(), indent=2) + "\n"


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
    """Render ``graph`` in format ``fmt`` (one of :data:`FORMATS`); ``pycg`` renders ``options.calls``."""
    return FORMATS[fmt](graph, digests, diagnostics, options)
