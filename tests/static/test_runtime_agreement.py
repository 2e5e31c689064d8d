"""The static graph agrees with the runtime discovery of the same code.

For every root of the fixture repositories and of the bundled example, the whole node
set reachable from the root is compared with ``flydeps.discover`` on the imported
objects, and own digests are compared on every shared node (functions, methods, literal
values, library leaves). Every node found by only one side must be explained by one of
the reasons below, derived from the edge that reaches it; anything else fails the test.

* ``decorator``: statically a decorated function links to its decorator
  (``@functools.lru_cache``); at run time the module attribute *is* the wrapper object.
* ``wrapper object``: the runtime root of an ``lru_cache`` factory is the wrapper object
  (``root``, ``root@owner`` through a class) whose type and ``cache_parameters`` are leaves
  of their own; a decorated method reached through ``self`` is the wrapper per owner.
* ``super()``: ``super().m()`` is followed statically to the shadowed method seen through
  the owner (``mod:Base.m@mod:Sub``); the runtime cannot see through the ``super()`` call.
* ``import fallback``: ``try: from lib import f`` / ``except ImportError: def f``: statically
  both are dependencies (the edge to the handler's ``f`` is labelled ``f (fallback)``); at
  run time only the one that was bound.
* ``library rewrite``: a method patched after its class statement by a library transform
  (``Cls.m = ASTRewriter.transform(Cls.m)``) runs rewritten code that reads library names
  the source does not (FlyDSL's ``scf_if_dispatch``); both digest the source as written.
* ``decorator arguments``: ``@flyc.kernel(known_block_size=[N, 1, 1])``: statically the
  arguments as written (``kernel#decorator.0``), at run time what the kernel object keeps
  of them (``kernel#settings``, from flydsl_runtime's unwrapper).
* ``builder-local class``: a class statement inside a builder (``@fx.struct class
  SharedStorage``) read by a nested kernel through a closure cell: statically a class node
  digesting its body; the runtime sees the builder's nested code without cells (the body is
  in the builder's own digest on both sides).
* ``static expression``: a module constant computed by an expression
  (``TUNING = Path(__file__).resolve().parent / "tuning"``): statically the expression as
  written and the names it reads (``external:pathlib.Path``, the module's ``__file__``); at
  run time the value it produced, snapshotted (nothing it was computed from is read again).
* ``class statement``: a class attribute's value read statically (``Cls.X``, ``self.X``)
  links to the class that holds it (edge ``<class>``): the class statement made the value
  and may change it (decorators, a metaclass, ``Cls.X = v`` afterwards, issue 37); at run
  time the value read is snapshotted and nothing else.
* ``module alternative``: a module-level name bound in several places, or changed after
  its binding (``if``/``else``, ``try``/``except``, ``B *= 2``, ``T[k] = f``, a function
  assigning ``global X``, issue 37): statically every binding that may be the live one is a
  dependency (edges labelled ``X (alternative)``); at run time the one that was.
* ``library value``: a project global bound to a library's data or instance
  (``from flydsl.expr.typing import T``, ``T = Types()`` in the library): statically the
  library's name where it is defined (``external:flydsl.expr.typing.T``, digested with its
  distribution); at run time the value read, snapshotted (``kernels.common.mem_ops:T``).
  Library functions and classes are named the same way on both sides (where the library
  defines them, ``flydsl.expr.primitive.const_expr`` for ``from flydsl.expr import
  const_expr``), so they need no reason.
* ``below``: reached only through a node explained above.

A root nested in a plain builder (``build_x.<locals>.kernel``) has no live object before the
builder runs: it is compared with the runtime discovery of the builder (the static root
reaches the builder through its ``<enclosing>`` edge, and the builder reaches the kernel).

Own digests of values tagged ``static-expression`` (tables, partials: not evaluated
statically) are expression digests and are not compared.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from flydeps import discover
from flydeps.graph import DepGraph, EdgeKind, NodeKind
from flydeps.static.analyze import analyze

HERE = Path(__file__).resolve().parent
# (sys.path entry, package, what to analyse); the flydsl-free fixture runs on every Python.
CASES = [
    (HERE / "fixtures", "kernelrepo", ["kernelrepo"]),
    (HERE.parents[1] / "examples", "kernels", ["kernels"]),
    (HERE / "fixtures", "plainpkg", ["plainpkg", "plainpkg/factory.py::Base.run", "plainpkg/factory.py::Sub.run"]),
    (HERE.parents[1] / "examples", "kernels", ["kernels/builders"]),
    # FlyDSL's own layernorm builder and kernels/common, unchanged (fixtures/flydslkernels/README.md).
    (HERE / "fixtures" / "flydslkernels", "kernels", ["kernels/norm/layernorm_kernel.py"]),
]


def _live_root(root: str) -> tuple[object, type | None]:
    module_name, _, rest = root.partition(":")
    qual, _, owner = rest.partition("@")
    qual = qual.partition(".<locals>.")[0]  # a kernel nested in a builder: the builder
    obj: object = importlib.import_module(module_name)
    for part in qual.split("."):
        obj = getattr(obj, part)
    if owner:
        owner_module, _, owner_qual = owner.partition(":")
        cls: object = importlib.import_module(owner_module)
        for part in owner_qual.split("."):
            cls = getattr(cls, part)
        return obj, cls  # type: ignore[return-value]
    if "." in qual:
        return obj, getattr(importlib.import_module(module_name), qual.split(".")[0])
    return obj, None


class _View:
    """One side's graph from one root, by normalized id."""

    def __init__(self, graph: DepGraph, roots: tuple[str, ...]) -> None:
        self.graph = graph
        order = [n for r in roots for n in graph.reachable(r)]
        self.ids = {n: n for n in order}
        self.incoming: dict[str, list] = {}
        for nid in order:
            for edge in graph.successors(nid):
                self.incoming.setdefault(edge.dst, []).append(edge)

    def out(self, src: str, label: str) -> list:
        real = self.ids.get(src)
        return [e for e in self.graph.successors(real) if e.label == label] if real else []

    def digest(self, nid: str) -> str:
        return self.graph.nodes[self.ids[nid]].digest


def _is_wrapper_root(nid: str) -> bool:
    """The runtime's id of a root that is a wrapper object (``root``, or ``root@owner`` for
    one reached through a class)."""
    return nid.partition("@")[0] == "root"


def _reason(edge, mine: _View, other: _View, explained: dict[str, str]) -> str:
    src = edge.src
    if src in explained:
        return "below"
    if edge.kind is EdgeKind.DECORATES and edge.label.startswith("@"):
        return "decorator"
    if _is_wrapper_root(edge.src) and edge.kind is not EdgeKind.DECORATES:
        return "wrapper object"
    if edge.kind is EdgeKind.OVERRIDES:
        return "super()"
    if mine.graph.nodes[edge.dst].kind is NodeKind.OBJECT and edge.dst.partition("@")[0] in other.ids:
        return "wrapper object"  # a decorated method reached through ``self``: the wrapper, per owner
    if any(e.label == f"{edge.label} (fallback)" for e in mine.graph.successors(src)):
        return "import fallback"
    if edge.dst.startswith("external:") and any(
        e.kind is EdgeKind.DECORATES and e.dst.startswith("external:") and "@" in e.label
        for e in (other.graph.successors(src) if src in other.ids else ())
    ):
        return "library rewrite"
    if edge.label == "<class>":
        return "class statement"
    if _library_value(edge, mine, other):
        return "library value"
    if edge.label.endswith(" (alternative)"):
        return "module alternative"
    if edge.label in ("ir-attrs", "settings") or edge.label.endswith("(...)") and edge.kind is EdgeKind.DECORATES:
        return "decorator arguments"
    if edge.kind is EdgeKind.CLOSURE and "<locals>" in edge.dst and mine.graph.nodes[edge.dst].kind is NodeKind.CLASS:
        return "builder-local class"
    if "static-expression" in mine.graph.nodes[src].tags and src in other.ids:
        return "static expression"  # the expression's names; the other side read its value
    return ""


def _library_value(edge, mine: _View, other: _View) -> bool:
    """One side reaches a library leaf where the other reaches a value node, by the same
    edge (source and label)."""
    kinds = {mine.graph.nodes[edge.dst].kind}
    kinds |= {other.graph.nodes[e.dst].kind for e in other.out(edge.src, edge.label)}
    return kinds == {NodeKind.EXTERNAL, NodeKind.GLOBAL}


def _explain(mine: _View, other: _View) -> dict[str, str]:
    """Each node only ``mine`` has -> the reason; '' when nothing explains it."""
    explained: dict[str, str] = {}
    for nid in mine.ids:
        if nid in other.ids or _is_wrapper_root(nid) and mine.graph.roots == (nid,):
            continue
        reasons = [_reason(e, mine, other, explained) for e in mine.incoming.get(nid, [])]
        explained[nid] = next((r for r in reasons if r), "")
    for root in mine.graph.roots:
        if _is_wrapper_root(root) and root in mine.ids and root not in other.ids:
            explained[root] = "wrapper object"
    return explained


@pytest.mark.parametrize("base,package,paths", CASES, ids=[c[2][0].replace("/", ".") for c in CASES])
def test_static_agrees_with_runtime(
    base: Path, package: str, paths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if package != "plainpkg":
        pytest.importorskip("flydsl")
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        monkeypatch.delitem(sys.modules, name)  # another case's package of the same name
    monkeypatch.syspath_prepend(str(base))
    static_graph = analyze([str(base / p) for p in paths], use_cache=False).graph
    assert static_graph.roots
    for root in static_graph.roots:
        obj, owner = _live_root(root)
        live_graph = discover(obj, owner=owner)
        static, live = _View(static_graph, (root,)), _View(live_graph, live_graph.roots)
        for side, other, name in ((static, live, "static"), (live, static, "runtime")):
            unexplained = {n for n, why in _explain(side, other).items() if not why}
            assert not unexplained, f"{root}: {name}-only nodes without a known reason: {sorted(unexplained)}"
        for nid in set(static.ids) & set(live.ids):
            node = static.graph.nodes[static.ids[nid]]
            if "static-expression" not in node.tags and not _is_wrapper_root(nid):
                assert node.digest == live.digest(nid), f"{root}: own digest of {nid} ({node.kind.value}) differs"
        assert any(static.graph.nodes[i].kind in (NodeKind.FUNCTION, NodeKind.METHOD) for i in static.ids.values())
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        monkeypatch.delitem(sys.modules, name)


EXPLAINED = [
    (HERE / "fixtures", "kernelrepo", {"decorator", "wrapper object", "super()"}),
    (
        HERE.parents[1] / "examples",
        "kernels/builders",
        {"import fallback", "library rewrite", "decorator arguments", "builder-local class"},
    ),
    (HERE / "fixtures" / "flydslkernels", "kernels/norm/layernorm_kernel.py", {"library value", "static expression"}),
]


@pytest.mark.parametrize("base,path,reasons", EXPLAINED, ids=[c[1] for c in EXPLAINED])
def test_explanations_are_not_vacuous(base: Path, path: str, reasons: set[str]) -> None:
    """The reasons above are each exercised by the fixtures (a reason that never fires
    would hide nothing; one that fires for everything would hide everything)."""
    sys.path.insert(0, str(base))
    package = path.partition("/")[0]
    try:
        pytest.importorskip("flydsl")
        graph = analyze([str(base / path)], use_cache=False).graph
        seen: set[str] = set()
        for root in graph.roots:
            obj, owner = _live_root(root)
            live_graph = discover(obj, owner=owner)
            static, live = _View(graph, (root,)), _View(live_graph, live_graph.roots)
            seen |= set(_explain(static, live).values()) | set(_explain(live, static).values())
        assert reasons <= seen
        assert "" not in seen
    finally:
        sys.path.remove(str(base))
        for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
            del sys.modules[name]
