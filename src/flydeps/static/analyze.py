"""The static pipeline end to end: paths -> modules -> summaries -> roots -> graph.

Contract: ``analyze(paths, ...)`` never raises for bad input: unreadable, undecodable or
invalid files, paths outside every root and missing files become
:class:`~flydeps.static.project.Diagnostic` records next to a graph built from whatever
could be read. Only modules reachable from the requested files are read: a textual
import scan finds them all first so that they are parsed as one batch (the process pool
needs big batches), the exact import walk then adds what the scan missed, and any
other module is read when a lookup needs it. A request whose inputs are all unchanged
is answered from the result cache (:mod:`flydeps.static.results`).
"""

from __future__ import annotations

import logging
import posixpath
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

from ..graph import DepGraph, Node, NodeKind
from ..keys.fingerprint import transitive_digests
from .parse import SummaryCache, cache_dir, facts_of_source, scan_imports, summarize, summarize_with_facts
from .project import (
    Diagnostic,
    FileSystemTree,
    ModuleFile,
    Project,
    SourceTree,
    declared_roots,
    detect_root,
    resolve_relative,
)
from .resolve import RootSpec, build_graph, role_tags
from .results import Analysis, ResultCache, request_key
from .summary import CodeInfo
from .symbols import Index, LoadedModule, Target

if TYPE_CHECKING:  # the call graph is imported only by the runs that ask for it
    from .calls.facts import FlowFacts
    from .calls.result import CallGraph

__all__ = ["Analysis", "analyze", "outside_imports", "split_target"]

log = logging.getLogger("flydeps.static")


def split_target(text: str) -> tuple[str, str | None]:
    """``path/file.py::Qual.name`` -> (path, qualname); no ``::`` -> (text, None)."""
    path, sep, qual = text.partition("::")
    return path, (qual or None) if sep else None


class Loader:
    """Loads modules by name through the parse cache, recording diagnostics; with
    ``facts``, also the flow facts of each module (for the call graph), in the same jobs."""

    def __init__(self, project: Project, cache: SummaryCache, workers: int | None, *, facts: bool = False) -> None:
        self.project, self.cache, self.workers, self.with_facts = project, cache, workers, facts
        self.loaded: dict[str, LoadedModule | None] = {}
        self.facts: dict[str, FlowFacts] = {}  # by module name; missing: extract on demand
        self.diagnostics: list[Diagnostic] = []
        self._bytes: dict[str, bytes] = {}  # read ahead by the import scan

    def _read(self, path: str) -> bytes:
        data = self._bytes.pop(path, None)
        return data if data is not None else self.project.tree.read(path)

    def __call__(self, name: str) -> LoadedModule | None:
        if name not in self.loaded:
            found = self.project.find(name)
            self.load([found] if found else [])
            self.loaded.setdefault(name, None)
        return self.loaded[name]

    def load(self, files: Sequence[ModuleFile]) -> list[LoadedModule]:
        """Read and summarize ``files`` as one batch (skipping already loaded modules)."""
        todo = [f for f in dict.fromkeys(files) if f.name not in self.loaded]
        items, kept = [], []
        for file in todo:
            try:
                items.append((file.path, self._read(file.path)))
                kept.append(file)
            except OSError as exc:
                self.loaded[file.name] = None
                self.diagnostics.append(Diagnostic(file.path, 0, f"cannot read file: {exc.strerror or exc}"))
        out = []
        if self.with_facts:
            pairs = summarize_with_facts(items, self.cache, workers=self.workers)
            self.facts.update(
                (file.name, facts) for file, (_, facts) in zip(kept, pairs, strict=True) if facts is not None
            )
            summaries = [summary for summary, _ in pairs]
        else:
            summaries = summarize(items, self.cache, workers=self.workers)
        for file, summary in zip(kept, summaries, strict=True):
            self.diagnostics.extend(Diagnostic(file.path, p.line, p.message) for p in summary.problems)
            self.loaded[file.name] = module = LoadedModule(file, summary)
            out.append(module)
        return out

    def load_reachable(self, files: Sequence[ModuleFile]) -> list[LoadedModule]:
        """``files`` and, breadth first, the project modules they import.

        A cheap textual import scan first finds (an over-approximation of) every reachable
        file, so that all of them are parsed as one batch across the worker processes;
        the exact import walk afterwards only picks up what the scan missed."""
        self.load(self._scan_reachable(files))
        first = self.load(files) or [m for f in files if (m := self.loaded.get(f.name)) is not None]
        frontier = first
        while frontier:
            wanted = {name for module in frontier for name in _imported_names(module)}
            found = [self.project.find(n) for n in sorted(wanted) if n not in self.loaded]
            frontier = self.load([f for f in found if f is not None])
        return first

    def _scan_reachable(self, files: Sequence[ModuleFile]) -> list[ModuleFile]:
        seen = {f.name: f for f in files if f.name not in self.loaded}
        queue = list(seen.values())
        while queue:
            file = queue.pop()
            try:
                data = self._bytes.setdefault(file.path, self.project.tree.read(file.path))
            except OSError:
                continue  # reported by load()
            for level, module, names in scan_imports(data):
                base = resolve_relative(file.name, file.is_package, module, level)
                for name in _with_parents([base] + [f"{base}.{n}" for n in names if n != "*"] if base else []):
                    if name not in seen and name not in self.loaded:
                        found = self.project.find(name)
                        if found is not None:
                            seen[name] = found
                            queue.append(found)
        return list(seen.values())


def _with_parents(names: Iterable[str]) -> Iterable[str]:
    for name in names:
        parts = name.split(".")
        yield from (".".join(parts[: i + 1]) for i in range(len(parts)))


def _imported_names(module: LoadedModule) -> Iterable[str]:
    """Every module an import statement in ``module`` may load, with parent packages."""
    for imp in module.summary.imports:
        base = resolve_relative(module.name, module.file.is_package, imp.module, imp.level)
        if not base:
            continue
        yield from _with_parents([base] + ([f"{base}.{imp.name}"] if imp.name and imp.name != "*" else []))


def analyze(
    paths: Sequence[str],
    *,
    roots: Sequence[str] = (),
    tree: SourceTree | None = None,
    use_cache: bool = True,
    workers: int | None = None,
    calls: bool = False,
) -> Analysis:
    """Analyse files/directories (``path`` or ``path::Qual.name``) without importing them.

    ``calls``: also solve the call graph of the analysed modules (:mod:`.calls.solve`); the
    flow facts it needs are cached per file next to the summaries, and the solved call
    graph in the result cache with the analysis (an entry of its own)."""
    tree = tree or FileSystemTree()
    diagnostics: list[Diagnostic] = []
    targets = [split_target(p) for p in paths]
    for path, _ in targets:
        if not tree.is_file(path) and not tree.is_dir(path):
            diagnostics.append(Diagnostic(path, 0, _why_not_read(tree, path)))
    existing = [(p, q) for p, q in targets if tree.is_file(p) or tree.is_dir(p)]
    detected = [detect_root(tree, p) for p, _ in existing]
    chosen = [r for (p, _), root in zip(existing, detected, strict=True) for r in declared_roots(tree, p) or [root]]
    project = Project(tree, roots or chosen, confine=_top_levels(tree, existing, detected))
    store = SummaryCache(cache_dir() if use_cache else None)
    results = ResultCache(store)
    key = request_key(paths, project.roots, _requested_bytes(project, existing))
    cached = _cached_calls(results, key, project) if use_cache and calls else None
    if cached is not None:
        return cached
    hit = results.load(key, project) if use_cache and not calls else None
    if hit is not None:
        log.debug("result cache hit for %s", ", ".join(paths))
        return Analysis(hit[0], hit[1], project, hit[2])
    loader = Loader(project, store, workers, facts=calls)
    analysis = _build(project, loader, existing, diagnostics, calls=calls)
    read = [(m.file.path, m.summary.content_digest) for m in loader.loaded.values() if m is not None]
    if analysis.calls is not None:
        from .calls.store import encode_call_graph

        encoded = encode_call_graph(analysis.calls)
        results.save_with(key, project, read, analysis, encoded, variant=_CALLS_VARIANT)
    else:
        results.save(key, project, read, analysis)
    return analysis


# Result-cache entries of ``calls=True`` requests: the analysis and its call graph, apart
# from those of the same request without the call graph (whose instance-attribute details
# come from a call graph of fewer modules). One letter, not a hex digit.
_CALLS_VARIANT = "g"


def _cached_calls(results: ResultCache, key: str, project: Project) -> Analysis | None:
    from .calls.store import decode_call_graph

    hit = results.load_with(key, project, decode_call_graph, variant=_CALLS_VARIANT)
    if hit is None:
        return None
    (graph, diagnostics, digests), calls = hit
    log.debug("result cache hit (with the call graph)")
    return Analysis(graph, diagnostics, project, digests, calls)


def _why_not_read(tree: SourceTree, path: str) -> str:
    """Why a path that is neither a file nor a directory was not read."""
    if isinstance(tree, FileSystemTree) and tree.lexists(path):
        return "not a regular file or directory (a FIFO, device, socket or broken link): skipped"
    return "no such file or directory"


def _build(
    project: Project,
    loader: Loader,
    existing: Sequence[tuple[str, str | None]],
    diagnostics: list[Diagnostic],
    *,
    calls: bool = False,
) -> Analysis:
    """Read what the requested paths reach, pick the roots, resolve the graph."""
    index = Index(project, loader)
    specs: list[RootSpec] = []
    requested: list[str] = []
    for path, qual in existing:
        files = _module_files(project, path, diagnostics)
        modules = loader.load_reachable(files)
        requested.extend(m.name for m in modules)
        specs.extend(_roots_for(index, modules, qual, path, diagnostics))
    graph, problems = build_graph(index, specs)
    call_graph = None
    if calls:
        from .calls.solve import build_call_graph

        call_graph = build_call_graph(index, requested, _facts_source(index, loader))
    digests = transitive_digests(graph)
    graph = _instance_attributes(graph, loader, index, call_graph)
    missing = [
        Diagnostic(
            path,
            line,
            f"import {name}: {_OUTSIDE}; if it is your package, "
            "declare its directory (pyproject package-dir, src/) or pass --root DIR; if it is a "
            f"library, install it or name it in FLYDEPS_ASSUME_INSTALLED={name}",
        )
        for name, (path, line) in index.missing.items()
    ]
    if call_graph is not None:  # the solver's per-slot bound dropped values: say which slot
        from .calls.result import bound_diagnostics
        from .calls.state import MAX_VALUES

        found = project.find
        missing += bound_diagnostics(call_graph, lambda m: getattr(found(m), "path", None), MAX_VALUES)
    all_diagnostics = tuple(sorted(set(diagnostics) | set(loader.diagnostics) | set(problems) | set(missing)))
    return Analysis(graph, all_diagnostics, project, digests, call_graph)


#: What the diagnostic of an import of a module neither in the project nor installed says
#: (an import not under ``try: ... except ImportError``): ``import NAME: <this>; ...``.
_OUTSIDE = "neither a module of the project nor installed"


def outside_imports(analysis: Analysis) -> dict[str, str]:
    """The top-level modules ``analysis`` found imported (not as an optional import) that are
    neither a module of the project nor installed, each with ``path:line`` of its first
    import: code the analysis could not read (a directory put on ``sys.path`` at run time,
    a ``PYTHONPATH`` entry, a package outside the roots). What they bind is an ``unresolved``
    node whose detail starts with ``"<name> is neither a module of the project"``."""
    out: dict[str, str] = {}
    for d in analysis.diagnostics:
        head, sep, rest = d.message.partition(": ")
        if sep and head.startswith("import ") and rest.startswith(_OUTSIDE):
            out.setdefault(head[len("import ") :], f"{d.path}:{d.line}")
    return out


#: The reason the resolver gives a ``self.x`` that no class of the MRO defines.
_INSTANCE_ATTRIBUTE = "instance attribute, not on the class"
#: The detail such a node gets when value flow knows what ``self.x`` holds.
HELD_BY_INSTANCE_ATTRIBUTE = "instance attribute holding "


def _instance_attributes(graph: DepGraph, loader: Loader, index: Index, calls: CallGraph | None) -> DepGraph:
    """Name what each unresolved ``self.x`` holds when value flow knows it (``self.act =
    self.relu`` in ``__init__``): the node's ``detail`` says it. The node, its digest and
    every edge stay as they are, so no digest changes; the call graph is solved only for
    the modules of the classes concerned (all of them when ``calls`` is already solved)."""
    wanted: dict[str, tuple[set[tuple[str, str]], str]] = {}
    for edge in graph.edges:
        node = graph.nodes[edge.dst]
        if node.kind is NodeKind.UNRESOLVED and node.detail == _INSTANCE_ATTRIBUTE and "." in edge.label:
            classes, _ = wanted.setdefault(edge.dst, (set(), edge.label.partition(".")[2]))
            classes.update(_classes_of(graph.nodes[edge.src]))
    if not wanted:
        return graph
    from .calls.result import pycg_callee
    from .calls.solve import build_call_graph

    if calls is None:
        modules = sorted({module for classes, _ in wanted.values() for module, _ in classes})
        calls = build_call_graph(index, modules, _facts_source(index, loader))
    nodes = dict(graph.nodes)
    for nid, (classes, attr) in wanted.items():
        held = {c for module, cls in classes for c in calls.attributes.get((module, cls, attr), ())}
        if held:
            names = ", ".join(sorted(pycg_callee(c) for c in held))
            nodes[nid] = nodes[nid]._replace(detail=HELD_BY_INSTANCE_ATTRIBUTE + names)
    return DepGraph(graph.roots, nodes, graph.edges)


def _classes_of(node: Node) -> set[tuple[str, str]]:
    """The class a method (or a function nested in one) belongs to, and the owner it is seen through."""
    qual, _, owner = node.qualname.partition("@")
    method = qual.split(".<locals>.")[0]
    out = {(node.module, method.rpartition(".")[0])} if "." in method else set()
    if owner:
        module, _, cls = owner.partition(":")
        out.add((module, cls))
    return out


def _facts_source(index: Index, loader: Loader) -> Callable[[str], FlowFacts | None]:
    """Flow facts of a project module: those the loader brought with the summary (a
    ``calls=True`` run: extracted in the parse workers or read from the parse cache), else
    read from the parse cache or extracted here (files parsed in isolation; the few
    modules of a run without ``calls`` that need them)."""

    def facts_of(name: str) -> FlowFacts | None:
        if name in loader.facts:
            return loader.facts[name]
        loaded = index.module(name)
        if loaded is None:
            return None
        try:
            source = loader.project.tree.read(loaded.file.path)
        except OSError:
            return None  # reported by the summary already
        return facts_of_source(source, loader.cache)

    return facts_of


def _top_levels(tree: SourceTree, existing: Sequence[tuple[str, str | None]], roots: Sequence[str]) -> set[str]:
    """Top-level package names of the requested paths (for roots that are library dirs)."""
    names = set()
    for (path, _), root in zip(existing, roots, strict=True):
        rel = posixpath.relpath(posixpath.normpath(path), root) if root not in ("", ".") else path
        first = rel.split("/")[0]
        if first in (".", ""):
            return set()  # the library directory itself was asked for: nothing is confined
        names.add(first[:-3] if first.endswith(".py") else first)
    return names


def _requested_bytes(project: Project, existing: Sequence[tuple[str, str | None]]) -> list[tuple[str, bytes | None]]:
    out: list[tuple[str, bytes | None]] = []
    for path, _ in existing:
        for file in project.files_under(path):
            try:
                out.append((file, project.tree.read(file)))
            except OSError:
                out.append((file, None))
    return out


def _module_files(project: Project, path: str, diagnostics: list[Diagnostic]) -> list[ModuleFile]:
    files = []
    walked = project.tree.is_dir(path)
    for file in project.files_under(path):
        module = project.module_for_path(file)
        roots = ", ".join(project.roots) or "(none)"
        if not file.endswith(".py"):  # only named files get here: a directory walk yields .py files
            diagnostics.append(
                Diagnostic(file, 0, "not a Python file; flydeps reads .py files (or a directory of them)")
            )
        elif module is None and walked:  # a stray script next to the packages: said once, not an error
            diagnostics.append(Diagnostic(file, 0, f"outside every root ({roots}): not analysed", note=True))
        elif module is None:
            diagnostics.append(Diagnostic(file, 0, f"outside every root ({roots}); add --root DIR for its project"))
        else:
            files.append(module)
    return files


def _roots_for(
    index: Index, modules: Sequence[LoadedModule], qual: str | None, path: str, diagnostics: list[Diagnostic]
) -> list[RootSpec]:
    if qual is not None:
        spec = _named_root(index, modules, qual)
        if spec is None:
            names = sorted({c.qualname for m in modules for c in m.summary.codes if "<" not in c.qualname})
            hint = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            diagnostics.append(
                Diagnostic(path, 0, f"no function or class {qual!r} here; try one of: {hint or '(none)'}")
            )
        return [spec] if spec else []
    specs = [s for m in modules for s in module_roots(index, m)]
    if not specs:  # no factory/kernel/launcher: show every module-level function and class
        specs = [s for m in modules for s in _plain_roots(m)]
    return specs


def _named_root(index: Index, modules: Sequence[LoadedModule], qual: str) -> RootSpec | None:
    for module in modules:
        if qual in module.codes or qual in module.classes:
            return RootSpec(module.name, qual)
        head, _, attr = qual.rpartition(".")
        if head in module.classes:
            found = index.member(Target("class", module=module.name, qualname=head), attr)
            if found is not None and found.kind == "def":
                return RootSpec(found.module, found.qualname, found.owner)
    return None


def module_roots(index: Index, module: LoadedModule) -> list[RootSpec]:
    """Factories, kernels and launchers of ``module`` not nested in another one, and, for
    every class, each method (own or inherited) that defines or is one, owned by the class."""
    tagged = {q for q, c in module.codes.items() if role_tags(index, module, c)}
    specs: list[tuple[int, RootSpec]] = []
    for qual, info in module.codes.items():
        if (
            qual in tagged
            and info.kind == "function"
            and not _inside(module, info, tagged)
            and not _in_class(module, info)
        ):
            specs.append((info.line, RootSpec(module.name, qual)))
    for cls in module.classes.values():
        if "<locals>" in cls.qualname:
            continue
        target = Target("class", module=module.name, qualname=cls.qualname)
        for name in _member_names(index, target):
            found = index.member(target, name)
            if found is not None and found.kind == "def" and _has_roles(index, found):
                owner = found.owner if found.owner != (found.module, found.qualname.rpartition(".")[0]) else None
                specs.append((cls.line, RootSpec(found.module, found.qualname, owner)))
    return [s for _, s in sorted(specs, key=lambda p: p[0])]


def _plain_roots(module: LoadedModule) -> list[RootSpec]:
    return [RootSpec(module.name, q) for q, c in module.codes.items() if not c.parent and c.kind == "function"]


def _inside(module: LoadedModule, info: CodeInfo, tagged: set[str]) -> bool:
    parent = info.parent
    while parent:
        if parent in tagged:
            return True
        parent = module.codes[parent].parent if parent in module.codes else ""
    return False


def _in_class(module: LoadedModule, info: CodeInfo | None) -> bool:
    while info is not None:
        if info.kind == "method":
            return True
        info = module.codes.get(info.parent) if info.parent else None
    return False


def _member_names(index: Index, target: Target) -> list[str]:
    names: dict[str, None] = {}
    for klass in index.mro(target):
        info = index.class_info(klass) if klass.kind == "class" else None
        names.update(dict.fromkeys(n for n, _ in (info.body if info else ())))
    return list(names)


def _has_roles(index: Index, target: Target) -> bool:
    module = index.module(target.module)
    if module is None:
        return False
    stack = [target.qualname]
    while stack:
        info = module.codes.get(stack.pop())
        if info is None:
            continue
        if role_tags(index, module, info):
            return True
        stack.extend(info.nested)
    return False
