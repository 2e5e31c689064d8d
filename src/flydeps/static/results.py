"""The result cache: a whole analysis reused when none of its inputs changed.

Contract: an entry is keyed by the request (paths, roots) and the bytes of the requested
files, and records every other input the analysis looked at: the content digest of each
file it read, the answer of each module-name probe (``pkg/x.py`` exists or not, a
namespace directory exists or not), and the ``dist==version`` of each external leaf. A
hit re-checks all of them (re-reading and hashing every file), so it is exact: it
returns what a fresh analysis would. Entries live next to the parse cache, are written
atomically and are ignored when unreadable, like parse-cache entries.

Why: the warm whole-tree budget (0.5 s for 50,000 lines) leaves no room to re-run name
resolution over ten thousand functions; re-hashing the files is ten times cheaper.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple

from blake3 import blake3

from .. import _origin
from ..graph import DepGraph, Edge, EdgeKind, Location, Node, NodeKind
from . import parse
from .parse import SummaryCache
from .project import Diagnostic, Project, is_library_dir
from .symbols import assumed_installed

if TYPE_CHECKING:
    from .analyze import Analysis

__all__ = ["ResultCache", "request_key"]

_VERSION = b"flydeps-static-result-v5"
_EDGE_KINDS = {k.value: k for k in EdgeKind}
_NODE_KINDS = {k.value: k for k in NodeKind}
_KIND: dict[object, str] = {k: k.value for k in (*NodeKind, *EdgeKind)}
log = logging.getLogger("flydeps.static")


class _Entry(NamedTuple):
    read: tuple[tuple[str, str], ...]
    probes: tuple[tuple[str, str], ...]
    namespaces: tuple[tuple[str, bool], ...]
    extensions: tuple[tuple[str, bool], ...]
    roots: tuple[str, ...]
    environment: str
    nodes: tuple[tuple, ...]
    edges: tuple[tuple[str, str, str, str], ...]
    diagnostics: tuple[tuple[str, int, str, bool], ...]
    digests: tuple[tuple[str, str], ...]


@functools.lru_cache(maxsize=1)
def _code_salt() -> bytes:
    """Digest of the analyzer's own sources: a new flydeps never reuses old results."""
    here = Path(__file__).resolve().parent
    h = blake3(_VERSION)
    for path in sorted(
        [
            *here.glob("*.py"),
            *(
                here.parent / n
                for n in (
                    "graph.py",
                    "_builder.py",
                    "_bytecode.py",
                    "_opcodes.py",
                    "_normalize.py",
                    "_disref.py",
                    "_values.py",
                    "_origin.py",
                )
            ),
        ]
    ):
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(path.name.encode())
    return h.digest()


@functools.lru_cache(maxsize=1)
def _environment() -> str:
    """A cheap stamp of the installed libraries: the entries of every library directory on
    ``sys.path`` (``torch-2.13.0.dist-info`` names carry versions). When it is unchanged,
    the (slower) per-leaf ``distribution==version`` check is skipped."""
    h = blake3(sys.version.encode())
    for entry in sys.path:
        if entry and is_library_dir(entry) and os.path.isdir(entry):
            h.update(entry.encode("utf-8", "surrogateescape") + b"\0")
            h.update("\0".join(sorted(os.listdir(entry))).encode("utf-8", "surrogateescape"))
    return h.hexdigest()


def _digest(data: bytes) -> str:
    return blake3(data).hexdigest()


def request_key(paths: Sequence[str], roots: Sequence[str], files: Iterable[tuple[str, bytes | None]]) -> str:
    """Key of a request: what was asked and the bytes of the requested files."""
    h = blake3(_code_salt())
    h.update(str(parse.MAX_FILE_BYTES).encode() + b"\0")  # decides which files are skipped
    h.update(",".join(sorted(assumed_installed())).encode() + b"\0")  # decides which imports are libraries
    for part in (*paths, "\0", *roots, "\0"):
        h.update(part.encode("utf-8", "surrogateescape") + b"\0")
    for path, data in files:
        h.update(
            path.encode("utf-8", "surrogateescape") + b"\0" + (_digest(data) if data is not None else "-").encode()
        )
    return h.hexdigest()


class ResultCache:
    """Whole analyses on disk, validated input by input on every hit."""

    def __init__(self, store: SummaryCache) -> None:
        self.store = store

    def load(self, key: str, project: Project) -> tuple[DepGraph, tuple[Diagnostic, ...], Mapping[str, str]] | None:
        """The stored analysis for ``key`` if every input it read is unchanged, else None."""
        raw = self.store.get_object("r" + key, "marshal")
        if raw is None:
            return None
        try:
            return self._revive(_Entry(*raw), project)  # type: ignore[misc]
        except Exception as exc:  # a corrupted or foreign entry is a miss, never an error
            log.debug("ignoring unusable result-cache entry %s: %s", key, exc)
            return None

    def _revive(
        self, entry: _Entry, project: Project
    ) -> tuple[DepGraph, tuple[Diagnostic, ...], Mapping[str, str]] | None:
        if not _still_valid(entry, project):
            return None
        nodes = {n[0]: _node(n) for n in entry.nodes}
        edges = tuple(Edge(s, d, _EDGE_KINDS[k], label) for s, d, k, label in entry.edges)
        graph = DepGraph(entry.roots, nodes, edges)
        if entry.environment != _environment() and any(
            n.kind is NodeKind.EXTERNAL and _origin.external_detail(n.id[9:].partition(".")[0]) != n.detail
            for n in graph.nodes.values()
        ):
            return None  # a library was upgraded: its leaves' digests changed
        return graph, tuple(Diagnostic(*d) for d in entry.diagnostics), MappingProxyType(dict(entry.digests))

    def save(self, key: str, project: Project, read: Iterable[tuple[str, str]], analysis: Analysis) -> None:
        graph, diagnostics = analysis.graph, analysis.diagnostics
        probes = tuple((name, found.path if found else "") for name, found in sorted(project.probed().items()))
        entry = _Entry(
            read=tuple(sorted(read)),
            probes=probes,
            namespaces=tuple(sorted(project.namespace_probes().items())),
            extensions=tuple(sorted(project.extension_probes().items())),
            roots=graph.roots,
            environment=_environment(),
            nodes=tuple(_node_tuple(n) for n in graph.nodes.values()),
            edges=tuple((e.src, e.dst, _KIND[e.kind], e.label) for e in graph.edges),
            diagnostics=tuple((d.path, d.line, d.message, d.note) for d in diagnostics),
            digests=tuple(analysis.digests.items()),
        )
        self.store.put_object("r" + key, tuple(entry), "marshal")


def _still_valid(entry: _Entry, project: Project) -> bool:
    for path, digest in entry.read:
        try:
            if _digest(project.tree.read(path)) != digest:
                return False
        except OSError:
            return False
    for name, path in entry.probes:
        found = project.find(name)
        if (found.path if found else "") != path:
            return False
    if any(project.is_namespace(name) != was for name, was in entry.namespaces):
        return False
    return all(project.is_extension(name) == was for name, was in entry.extensions)


def _node_tuple(node: Node) -> tuple:
    where = (node.location.path, node.location.line) if node.location else None
    return (node.id, _KIND[node.kind], node.digest, where, node.detail, tuple(sorted(node.tags)))


def _node(row: tuple) -> Node:
    nid, kind, digest, where, detail, tags = row
    location = Location(*where) if where else None
    return Node(nid, _NODE_KINDS[kind], digest, location, detail, frozenset(tags))
