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
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..fingerprint import transitive_digests
from ..graph import DepGraph
from .parse import SummaryCache, cache_dir, scan_imports, summarize
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
from .results import ResultCache, request_key
from .summary import CodeInfo
from .symbols import Index, LoadedModule, Target

__all__ = ["Analysis", "analyze", "split_target"]

log = logging.getLogger("flydeps.static")


@dataclass(frozen=True)
class Analysis:
    """A graph, its transitive (Merkle) digests, and everything that went wrong."""

    graph: DepGraph
    diagnostics: tuple[Diagnostic, ...]
    project: Project
    digests: Mapping[str, str]


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
        for file, summary in zip(kept, summarize(items, self.cache, workers=self.workers), strict=True):
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
) -> Analysis:
    """Analyse files/directories (``path`` or ``path::Qual.name``) without importing them."""
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
    hit = results.load(key, project) if use_cache else None
    if hit is not None:
        log.debug("result cache hit for %s", ", ".join(paths))
        return Analysis(hit[0], hit[1], project, hit[2])
    loader = Loader(project, store, workers)
    analysis = _build(project, loader, existing, diagnostics)
    read = [(m.file.path, m.summary.content_digest) for m in loader.loaded.values() if m is not None]
    results.save(key, project, read, analysis)
    return analysis


def _why_not_read(tree: SourceTree, path: str) -> str:
    """Why a path that is neither a file nor a directory was not read."""
    if isinstance(tree, FileSystemTree) and tree.lexists(path):
        return "not a regular file or directory (a FIFO, device, socket or broken link): skipped"
    return "no such file or directory"


def _build(
    project: Project, loader: Loader, existing: Sequence[tuple[str, str | None]], diagnostics: list[Diagnostic]
) -> Analysis:
    """Read what the requested paths reach, pick the roots, resolve the graph."""
    index = Index(project, loader)
    specs: list[RootSpec] = []
    for path, qual in existing:
        files = _module_files(project, path, diagnostics)
        modules = loader.load_reachable(files)
        specs.extend(_roots_for(index, modules, qual, path, diagnostics))
    graph, problems = build_graph(index, specs)
    missing = [
        Diagnostic(
            path,
            line,
            f"import {name}: neither a module of the project nor installed; if it is your package, "
            "declare its directory (pyproject package-dir, src/) or pass --root DIR; if it is a "
            f"library, install it or name it in FLYDEPS_ASSUME_INSTALLED={name}",
        )
        for name, (path, line) in index.missing.items()
    ]
    all_diagnostics = tuple(sorted(set(diagnostics) | set(loader.diagnostics) | set(problems) | set(missing)))
    return Analysis(graph, all_diagnostics, project, transitive_digests(graph))


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
