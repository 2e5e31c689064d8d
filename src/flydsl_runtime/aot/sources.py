"""The source snapshot an AOT build leaves in its directory, for ``flydeps aot plan``.

Contract
--------
:func:`write` (called by :func:`.build.build` once its rows are in ``DIR``) runs the static
analysis (:func:`flydeps.static.analyze`) over the modules of the launchers the build made
and keeps, in ``DIR/aot-sources.json`` (schema ``flydeps.aot-sources/1``, replaced
atomically), everything that analysis read (and the files of its graph's modules and their
packages): each file's bytes and each answer about the
file system (a file, a directory, a listing), with the analysis' targets and roots, and the
keys of the index rows the build built or found serving (the rows whose trace ran on these
sources). :func:`load` gives it back as a :class:`Snapshot`, whose :meth:`Snapshot.tree`
replays those answers: the same analysis run on it gives the graph of the sources the build
traced, so ``aot plan`` compares static digests with static digests (an expression a global
is bound to, a rebinding under module-level control flow: what no runtime digest stored in a
row can be compared with). Reads only the modules' files; never imports or writes anything
but that one file.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from flydeps.static.project import FileSystemTree

__all__ = ["SCHEMA", "SOURCES_NAME", "Snapshot", "SnapshotError", "load", "write"]

log = logging.getLogger("flydsl_runtime")

SCHEMA = "flydeps.aot-sources/1"
SOURCES_NAME = "aot-sources.json"


class SnapshotError(ValueError):
    """``DIR/aot-sources.json`` cannot be read back (the message names the file and why)."""


class _RecordingTree(FileSystemTree):
    """Files on disk, every answer kept (what :class:`_ReplayTree` gives back)."""

    def __init__(self) -> None:
        super().__init__()
        self.files: dict[str, bytes] = {}
        self.answers: dict[str, dict[str, object]] = {"is_file": {}, "is_dir": {}, "lexists": {}, "python_files": {}}
        self.unreadable: set[str] = set()

    def read(self, path: str) -> bytes:
        try:
            data = super().read(path)
        except OSError:
            self.unreadable.add(path)
            raise
        self.files[path] = data
        return data

    def is_file(self, path: str) -> bool:
        found = super().is_file(path)
        self.answers["is_file"][path] = found
        return found

    def is_dir(self, path: str) -> bool:
        found = super().is_dir(path)
        self.answers["is_dir"][path] = found
        return found

    def lexists(self, path: str) -> bool:
        found = super().lexists(path)
        self.answers["lexists"][path] = found
        return found

    def python_files(self, directory: str) -> list[str]:
        found = super().python_files(directory)
        self.answers["python_files"][directory] = found
        return found


class _ReplayTree:
    """The recorded answers; a question the build's analysis did not ask is answered as a
    missing file (the same analysis of the same bytes asks the same questions)."""

    def __init__(self, files: dict[str, bytes], answers: dict[str, dict], unreadable: frozenset[str]) -> None:
        self._files, self._answers, self._unreadable = files, answers, unreadable

    def read(self, path: str) -> bytes:
        if path in self._files:
            return self._files[path]
        why = "unreadable" if path in self._unreadable else "not read by the build's analysis"
        raise FileNotFoundError(2, why, path)

    def is_file(self, path: str) -> bool:
        return bool(self._answers["is_file"].get(path, False))

    def is_dir(self, path: str) -> bool:
        return bool(self._answers["is_dir"].get(path, False))

    def lexists(self, path: str) -> bool:
        return bool(self._answers["lexists"].get(path, False))

    def python_files(self, directory: str) -> list[str]:
        return list(self._answers["python_files"].get(directory, []))


@dataclass(frozen=True)
class Snapshot:
    """The sources a build traced: its analysis' ``targets`` and ``roots``, the ``modules``
    analysed, and the index ``rows`` (keys) built or served on them."""

    path: Path
    targets: tuple[str, ...]
    roots: tuple[str, ...]
    modules: frozenset[str]
    rows: frozenset[str]
    files: dict[str, bytes]
    answers: dict[str, dict]
    unreadable: frozenset[str]

    def tree(self) -> _ReplayTree:
        return _ReplayTree(self.files, self.answers, self.unreadable)

    def read(self, path: str) -> bytes | None:
        return self.files.get(path)


def _module_file(name: str) -> tuple[str, str] | None:
    """``(file, source root)`` of the imported module ``name``, or None (not a source file)."""
    module = sys.modules.get(name)
    file = getattr(module, "__file__", None)
    if not isinstance(file, str) or not file.endswith(".py"):
        return None
    path = Path(file).resolve()
    depth = name.count(".") + (2 if path.name == "__init__.py" else 1)
    root = path
    for _ in range(depth):
        root = root.parent
    return str(path), str(root)


def imported_base(package: str, level: int, module: str | None) -> str:
    """The absolute module ``from <level dots><module> import ...`` names in ``package``."""
    base = module or ""
    if not level:
        return base
    parts = package.split(".")
    parts = parts[: len(parts) - (level - 1)] if level > 1 else parts
    return ".".join(p for p in (*parts, *([base] if base else [])) if p)


def module_imports(tree: Any, name: str, is_package: bool) -> list[str]:
    """The modules a parsed module ``name`` may import, anywhere in it: ``import``/``from``
    statements (each name of a ``from`` as a submodule too, if it is one), and lookups by a
    constant name (``importlib.import_module("m")``, ``__import__("m")``, ``sys.modules["m"]``)."""
    import ast

    package = name if is_package else name.rpartition(".")[0]
    out: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = imported_base(package, node.level, node.module)
            out.append(base)
            out += [f"{base}.{a.name}" for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                out.append(node.args[0].value)
        elif isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
            if isinstance(node.value, ast.Attribute) and node.value.attr == "modules":
                if isinstance(node.slice.value, str):
                    out.append(node.slice.value)
    return [m for m in out if m]


def module_closure(analysis: Any) -> list[Any]:
    """The module files (``ModuleFile``) whose code may act on a trace of ``analysis``' graph:
    its nodes' modules, their packages (an ``__init__`` runs first), and, transitively, the
    project modules those may import (:func:`module_imports`: ``import kernels.patches`` in a
    package's ``__init__``, ``import_module("m")`` in a helper); read through ``analysis``' tree."""
    return list(_closure(analysis)[0].values())


def import_edges(analysis: Any) -> dict[str, frozenset[str]]:
    """Module -> the project modules it may import (:func:`module_imports`), over the closure."""
    return _closure(analysis)[1]


def _closure(analysis: Any) -> tuple[dict[str, Any], dict[str, frozenset[str]]]:
    import ast

    project = analysis.project
    todo = sorted({n.module for n in analysis.graph.nodes.values() if n.module})
    seen: dict[str, Any] = {}
    edges: dict[str, frozenset[str]] = {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        found = project.find(name)
        seen[name] = found
        if "." in name:
            todo.append(name.rpartition(".")[0])
        if found is None:
            continue
        try:
            tree = ast.parse(project.tree.read(found.path))
        except (OSError, SyntaxError, ValueError):
            continue
        imported = module_imports(tree, name, found.is_package)
        edges[name] = frozenset(imported)
        todo += imported
    located = {name: found for name, found in sorted(seen.items()) if found is not None}
    return located, {name: frozenset(m for m in targets if m in located) for name, targets in edges.items()}


def write(out: Path, modules: Iterable[str], rows: Iterable[str]) -> Path | None:
    """Snapshot the sources of ``modules`` (imported in this process) into ``out`` with the
    row keys ``rows``; returns the file written, or None when no module has a source file
    (the previous snapshot is then removed: it no longer describes the rows)."""
    from flydeps.static import analyze

    located = [found for found in map(_module_file, sorted(set(modules))) if found is not None]
    target = out / SOURCES_NAME
    if not located:
        target.unlink(missing_ok=True)
        return None
    targets = sorted({file for file, _root in located})
    roots = sorted({root for _file, root in located})
    tree = _RecordingTree()
    analysis = analyze(targets, roots=roots, tree=tree, use_cache=False)
    module_closure(analysis)  # read through the recording tree: what `aot plan` scans for import-time code
    doc = {
        "schema": SCHEMA,
        "targets": targets,
        "roots": roots,
        "modules": sorted({name for name in modules if _module_file(name) is not None}),
        "rows": sorted(set(rows)),
        "files": {p: base64.b64encode(b).decode("ascii") for p, b in sorted(tree.files.items())},
        "answers": tree.answers,
        "unreadable": sorted(tree.unreadable),
    }
    fd, tmp = tempfile.mkstemp(prefix=".aot-sources-", dir=out)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(doc, handle)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    log.info("aot build: source snapshot of %d file(s) in %s", len(tree.files), target)
    return target


def load(directory: Path) -> Snapshot | None:
    """``directory``'s snapshot, None when it has none; :class:`SnapshotError` naming the file
    when it is not one :func:`write` wrote."""
    from flydeps.store import memofile

    path = directory / SOURCES_NAME
    try:  # as the index is opened: no symlink, no FIFO, a directory and a file no other user may write
        fd = memofile.open_shared_entry(directory, SOURCES_NAME)
        with os.fdopen(fd, "rb") as handle:
            text = handle.read().decode("utf-8")
    except FileNotFoundError:
        return None
    except memofile.Untrusted as why:
        raise SnapshotError(f"{why.path}: not used ({why.reason})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SnapshotError(f"{path}: cannot be read ({exc})") from None
    try:
        doc = json.loads(text)
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ValueError(f"not schema {SCHEMA}")
        answers = doc["answers"]
        if not isinstance(answers, dict) or set(answers) != {"is_file", "is_dir", "lexists", "python_files"}:
            raise ValueError("answers malformed")
        if not all(isinstance(v, dict) for v in answers.values()):
            raise ValueError("answers malformed")
        files = {str(p): base64.b64decode(b, validate=True) for p, b in doc["files"].items()}
        return Snapshot(
            path,
            tuple(str(t) for t in doc["targets"]),
            tuple(str(r) for r in doc["roots"]),
            frozenset(str(m) for m in doc["modules"]),
            frozenset(str(k) for k in doc["rows"]),
            files,
            answers,
            frozenset(str(u) for u in doc["unreadable"]),
        )
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise SnapshotError(f"{path}: not a source snapshot of `flydeps aot build` ({exc})") from None
