"""The static pipeline end to end: paths -> modules -> summaries -> roots -> graph.

Contract: ``analyze(paths, ...)`` never raises for bad input: unreadable, undecodable or
invalid files, paths outside every root and missing files become
:class:`~flydeps.static.project.Diagnostic` records next to a graph built from whatever
could be read. Only modules reachable from the requested files are read: the requested
files first, then the project modules they import, breadth first, each frontier as one
batch (so a cold batch can use the process pool), then any module a later lookup needs.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..graph import DepGraph
from .parse import SummaryCache, cache_dir, summarize
from .project import Diagnostic, FileSystemTree, ModuleFile, Project, SourceTree, detect_root, resolve_relative
from .resolve import RootSpec, build_graph, role_tags
from .symbols import Index, LoadedModule, Target

__all__ = ["Analysis", "analyze", "split_target"]

log = logging.getLogger("flydeps.static")


@dataclass(frozen=True)
class Analysis:
    """A graph plus everything that went wrong while building it."""

    graph: DepGraph
    diagnostics: tuple[Diagnostic, ...]
    project: Project
    modules: Mapping[str, LoadedModule]


def split_target(text: str) -> tuple[str, str | None]:
    """``path/file.py::Qual.name`` -> (path, qualname); no ``::`` -> (text, None)."""
    path, sep, qual = text.partition("::")
    return path, (qual or None) if sep else None


class Loader:
    """Loads modules by name through the parse cache, recording diagnostics."""

    def __init__(self, project: Project, cache: SummaryCache, workers: int | None) -> None:
        self.project, self.cache, self.workers = project, cache, workers
        self.loaded: dict[str, LoadedModule | None] = {}
        self.diagnostics: list[Diagnostic] = []

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
                items.append((file.path, self.project.tree.read(file.path)))
                kept.append(file)
            except OSError as exc:
                self.loaded[file.name] = None
                self.diagnostics.append(Diagnostic(file.path, 1, f"cannot read file: {exc.strerror or exc}"))
        out = []
        for file, summary in zip(kept, summarize(items, self.cache, workers=self.workers)):
            self.diagnostics.extend(Diagnostic(file.path, p.line, p.message) for p in summary.problems)
            self.loaded[file.name] = module = LoadedModule(file, summary)
            out.append(module)
        return out

    def load_reachable(self, files: Sequence[ModuleFile]) -> list[LoadedModule]:
        """``files`` and, breadth first, the project modules they import."""
        first = self.load(files)
        frontier = first
        while frontier:
            wanted = {name for module in frontier for name in _imported_names(module)}
            found = [self.project.find(n) for n in sorted(wanted) if n not in self.loaded]
            frontier = self.load([f for f in found if f is not None])
        return first


def _imported_names(module: LoadedModule) -> Iterable[str]:
    """Every module an import statement in ``module`` may load, with parent packages."""
    for imp in module.summary.imports:
        base = resolve_relative(module.name, module.file.is_package, imp.module, imp.level)
        if not base:
            continue
        names = [base] + ([f"{base}.{imp.name}"] if imp.name and imp.name != "*" else [])
        for name in names:
            parts = name.split(".")
            yield from (".".join(parts[: i + 1]) for i in range(len(parts)))


def analyze(
    paths: Sequence[str],
    *,
    roots: Sequence[str] = (),
    tree: SourceTree | None = None,
    use_cache: bool = True,
    workers: int | None = None,
) -> Analysis:
    """Analyse files/directories (``path`` or ``path::Qual.name``) without importing them."""
    tree = tree or FileSystemTree()
    diagnostics: list[Diagnostic] = []
    targets = [split_target(p) for p in paths]
    for path, _ in targets:
        if not tree.is_file(path) and not tree.is_dir(path):
            diagnostics.append(Diagnostic(path, 1, "no such file or directory"))
    existing = [(p, q) for p, q in targets if tree.is_file(p) or tree.is_dir(p)]
    project = Project(tree, roots or [detect_root(tree, p) for p, _ in existing])
    loader = Loader(project, SummaryCache(cache_dir() if use_cache else None), workers)
    index = Index(project, loader)
    specs: list[RootSpec] = []
    for path, qual in existing:
        files = _module_files(project, path, diagnostics)
        modules = loader.load_reachable(files)
        specs.extend(_roots_for(index, modules, qual, path, diagnostics))
    graph = build_graph(index, specs)
    all_diagnostics = tuple(sorted(set(diagnostics) | set(loader.diagnostics)))
    modules = {k: v for k, v in loader.loaded.items() if v is not None}
    return Analysis(graph, all_diagnostics, project, modules)


def _module_files(project: Project, path: str, diagnostics: list[Diagnostic]) -> list[ModuleFile]:
    files = []
    for file in project.files_under(path):
        module = project.module_for_path(file)
        if module is None:
            roots = ", ".join(project.roots) or "(none)"
            diagnostics.append(Diagnostic(file, 1, f"outside every root ({roots}); add --root DIR for its project"))
        else:
            files.append(module)
    return files


def _roots_for(index: Index, modules: Sequence[LoadedModule], qual: str | None, path: str, diagnostics: list[Diagnostic]) -> list[RootSpec]:
    if qual is not None:
        spec = _named_root(index, modules, qual)
        if spec is None:
            names = sorted({c.qualname for m in modules for c in m.summary.codes if "<" not in c.qualname})
            hint = ", ".join(names[:8]) + (", ..." if len(names) > 8 else "")
            diagnostics.append(Diagnostic(path, 1, f"no function or class {qual!r} here; try one of: {hint or '(none)'}"))
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
        if qual in tagged and info.kind == "function" and not _inside(module, info, tagged) and not _in_class(module, info):
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


def _inside(module: LoadedModule, info, tagged: set[str]) -> bool:
    parent = info.parent
    while parent:
        if parent in tagged:
            return True
        parent = module.codes[parent].parent if parent in module.codes else ""
    return False


def _in_class(module: LoadedModule, info) -> bool:
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
