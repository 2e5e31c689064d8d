"""What ``flydeps migrate`` knows beyond one file: the whole-tree reach of each cache, and
the persistent memo of files with nothing to change.

Contract:

* :func:`kernel_reaching_caches` runs the static analysis (:func:`flydeps.static.analyze.analyze`) once
  over the paths and returns a :class:`Reach`: for every file the analysis read, the
  ``def`` line of each function tagged ``factory`` (``lru_cache``, ``cache`` or
  ``cached_factory``) that reaches a node tagged ``kernel`` or ``launcher``, mapped to the
  id of the first one found. An analysis that raises is logged (a warning) and gives
  None: the codemod's per-file rules still apply.
* :func:`cached_factory_lines` lists, with :mod:`ast`, the ``def`` lines of functions
  decorated with ``...cached_factory`` (already migrated).
* :class:`Memo` stores, per file, what migrating it found when nothing changed: its
  warnings and its cache-decorated functions with why each was kept. The key is the
  blake3 of the memo format, the digest of the code that decides (this package's
  ``migrate``, ``codemod``, ``import_order``, ``isolate`` sources, libcst's version,
  Python's version), the options, the path as given and the file's bytes -- nothing the
  whole-tree graph says enters it: a hit is used only when no kernel-reaching line of
  the file is a cache the per-file rules keep (:mod:`.tree` checks), so an edit of
  another module can never make it stale. Entries live under the flydeps cache root
  (``FLYDEPS_CACHE_DIR`` or the user cache directory: :func:`flydeps.store.memofile.private_dir`
  rules, 0700, owner checked) and carry their blake3 digest; a damaged entry is ignored
  with a warning and recomputed, a missing or refused directory means no memo.
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import json
import logging
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from blake3 import blake3

from .. import settings
from ..store import memofile as _memofile
from ..store.memofile import sources_digest

__all__ = ["Memo", "MemoRecord", "Reach", "cached_factory_lines", "kernel_reaching_caches"]

log = logging.getLogger("flydeps.static")

MEMO_FORMAT = "flydeps-migrate-memo-1"
_KIND = "migrate"


@dataclass(frozen=True)
class Reach:
    """``lines[realpath][def line]``: the kernel or launcher that cache reaches; ``covered``:
    the real paths of every file the analysis read (their caches are judged by the graph);
    ``factories``: those with a function tagged ``factory`` (to be parsed and reported)."""

    lines: Mapping[str, Mapping[int, str]]
    covered: frozenset[str]
    factories: frozenset[str] = frozenset()

    def of(self, path: str) -> Mapping[int, str] | None:
        """The file's kernel-reaching cache lines; None when the analysis did not read it."""
        key = os.path.realpath(path)
        return self.lines.get(key, {}) if key in self.covered else None


def kernel_reaching_caches(paths: Iterable[str]) -> Reach | None:
    """One static analysis of ``paths``; None (a warning) when it fails."""
    from ..static.analyze import analyze

    quiet = logging.getLogger("flydeps.static")
    level = quiet.level
    quiet.setLevel(max(logging.WARNING, quiet.getEffectiveLevel()))  # the analysis's notes are not migrate's
    try:
        analysis = analyze([str(p) for p in paths])
    except Exception as exc:  # the codemod's own rules still apply: say so and go on
        log.warning(
            "flydeps migrate: the whole-tree analysis failed (%s: %s); only caches that define a kernel "
            "or call a builder of their own module are converted -- please report this",
            type(exc).__name__,
            exc,
        )
        return None
    finally:
        quiet.setLevel(level)
    graph = analysis.graph
    files: dict[str, str] = {}
    lines: dict[str, dict[int, str]] = {}
    covered: set[str] = set()
    factories: set[str] = set()
    for nid, node in graph.nodes.items():
        module = node.module
        if module not in files:
            found = analysis.project.find(module) if node.location is not None else None
            files[module] = os.path.realpath(found.path) if found is not None else ""
        path = files[module]
        if not path:
            continue
        covered.add(path)
        if "factory" not in node.tags or node.location is None:
            continue
        factories.add(path)
        reached = next(
            (x for x in graph.reachable(nid) if x != nid and graph.nodes[x].tags & {"kernel", "launcher"}), None
        )
        if reached is not None:
            lines.setdefault(path, {})[node.location.line] = reached
    return Reach({k: dict(v) for k, v in lines.items()}, frozenset(covered), frozenset(factories))


def cached_factory_lines(data: bytes) -> frozenset[int]:
    """``def`` lines of functions with a decorator named ``cached_factory`` (any prefix,
    called or not); empty when the bytes do not parse."""
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return frozenset()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
                if name == "cached_factory":
                    found.add(node.lineno)
    return frozenset(found)


@dataclass(frozen=True)
class MemoRecord:
    """A file that did not change: its warnings and its caches ``(line, name, why kept)``."""

    warnings: tuple[str, ...]
    caches: tuple[tuple[int, str, str], ...]


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """Digest of everything that decides a migration's outcome."""
    h = blake3(f"{MEMO_FORMAT}\0{sys.version}\0{importlib.metadata.version('libcst')}\0".encode())
    sources_digest(h, [f"flydeps.migrate.{name}" for name in ("tree", "memo", "codemod", "imports", "isolate")])
    return h.hexdigest()


class Memo:
    """The per-file memo (see the module contract); ``hits``/``misses`` count lookups."""

    def __init__(self, directory: Path | None, options: str) -> None:
        self.directory = directory
        self.options = options
        self.hits = 0
        self.misses = 0

    @classmethod
    def open(cls, options: str) -> Memo:
        """The memo under the flydeps cache root (no memo when the directory is refused)."""
        root = Path(settings.cache_root())
        return cls(_memofile.private_dir(root, root / f"migrate-{MEMO_FORMAT[-1]}"), options)

    def key(self, path: str, data: bytes) -> str:
        h = blake3(f"{code_digest()}\0{self.options}\0".encode())
        h.update(os.fsencode(path) + b"\0")  # a path may hold surrogate escapes (undecodable names)
        h.update(data)
        return h.hexdigest()

    def _file(self, key: str) -> Path | None:
        return None if self.directory is None else self.directory / key[:2] / key

    def get(self, path: str, data: bytes) -> MemoRecord | None:
        key = self.key(path, data)
        file = self._file(key)
        if file is None:
            return None
        payload = _memofile.read(file, _KIND, key)
        record = _decode(payload) if payload is not None else None
        if record is None:
            if payload is not None or os.path.lexists(file):
                log.warning(
                    "flydeps migrate: ignoring a damaged memo entry %s (for %s); migrating the file again",
                    file,
                    path,
                )
            self.misses += 1
            return None
        self.hits += 1
        log.debug("migrate memo hit: %s", path)
        return record

    def put(self, path: str, data: bytes, record: MemoRecord) -> None:
        key = self.key(path, data)
        file = self._file(key)
        if file is None:
            return
        document = {"warnings": list(record.warnings), "caches": [list(c) for c in record.caches]}
        _memofile.write(file, _KIND, json.dumps(document, separators=(",", ":")).encode(), key)


def _decode(payload: bytes) -> MemoRecord | None:
    """The record, or None for anything not exactly of the stored shape."""
    try:
        document = json.loads(payload)
    except (ValueError, RecursionError):
        return None
    if not isinstance(document, dict) or set(document) != {"warnings", "caches"}:
        return None
    warnings, caches = document["warnings"], document["caches"]
    if not isinstance(warnings, list) or not all(isinstance(w, str) for w in warnings):
        return None
    if not isinstance(caches, list):
        return None
    rows = []
    for row in caches:
        if not (isinstance(row, list) and len(row) == 3 and type(row[0]) is int):
            return None
        if not (isinstance(row[1], str) and isinstance(row[2], str)):
            return None
        rows.append((row[0], row[1], row[2]))
    return MemoRecord(tuple(warnings), tuple(rows))
