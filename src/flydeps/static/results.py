"""The result cache: a whole analysis reused when none of its inputs changed.

Contract: an entry is keyed by the request (paths, roots) and the bytes of the requested
files, and records every other input the analysis looked at: the content digest of each
file it read, the answer of each module-name probe (``pkg/x.py`` exists or not, a
namespace directory exists or not), and the ``dist==version`` of each external leaf. A
hit re-checks all of them (re-reading and hashing every file), so it is exact: it
returns what a fresh analysis would. Entries live next to the parse cache, in the same
validated format (:mod:`flydeps.static.store`): written atomically, bound to their key
(an entry copied from another request is a miss), ignored when unreadable or malformed.

Why: the warm whole-tree budget (0.5 s for 50,000 lines) leaves no room to re-run name
resolution over ten thousand functions; re-hashing the files is ten times cheaper.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from blake3 import blake3

from ..code import origin as _origin
from ..graph import DepGraph, Edge, EdgeKind, Location, Node, NodeKind
from ..store.memofile import sources_digest
from . import parse
from .parse import SummaryCache
from .project import Diagnostic, Project, is_library_dir
from .store import Invalid
from .symbols import assumed_installed

if TYPE_CHECKING:  # the call graph is imported only by the runs that ask for it
    from .calls.result import CallGraph

__all__ = ["Analysis", "ResultCache", "request_key"]

_T = TypeVar("_T")

_VERSION = b"flydeps-static-result-v7"
_EDGE_KINDS = {k.value: k for k in EdgeKind}
_NODE_KINDS = {k.value: k for k in NodeKind}
_KIND: dict[object, str] = {k: k.value for k in (*NodeKind, *EdgeKind)}
log = logging.getLogger("flydeps.static")


class _Inputs(NamedTuple):
    """What a stored analysis looked at, decoded first: a stale entry costs no graph build."""

    read: tuple[tuple[str, str], ...]
    probes: tuple[tuple[str, str], ...]
    namespaces: tuple[tuple[str, bool], ...]
    extensions: tuple[tuple[str, bool], ...]


@functools.lru_cache(maxsize=1)
def _code_salt() -> bytes:
    """Digest of the analyzer's own sources: a new flydeps never reuses old results."""
    h = blake3(_VERSION)
    here = Path(__file__).resolve().parent
    static = sorted(
        f"flydeps.static.{p.relative_to(here).with_suffix('').as_posix().replace('/', '.')}" for p in here.rglob("*.py")
    )
    others = ["flydeps.graph", "flydeps.code.graphbuild", "flydeps.code.bytecode", "flydeps.code.opcodes"]
    others += ["flydeps.code.normalize", "flydeps.code.scan", "flydeps.code.disref", "flydeps.values.snapshot"]
    sources_digest(h, static + others + ["flydeps.code.origin"])
    return h.digest()


@functools.lru_cache(maxsize=1)
def _environment() -> str:
    """A cheap stamp of the installed libraries: the entries of every library directory on
    ``sys.path`` (``torch-2.13.0.dist-info`` names carry versions), and the inode and time of
    each distribution's metadata directory (a reinstall of the same version writes a new
    one). When it is unchanged, the (slower) per-leaf digest check is skipped."""
    h = blake3(sys.version.encode())
    for entry in sys.path:
        if entry and is_library_dir(entry) and os.path.isdir(entry):
            h.update(entry.encode("utf-8", "surrogateescape") + b"\0")
            for name in sorted(os.listdir(entry)):
                h.update(name.encode("utf-8", "surrogateescape") + b"\0")
                if name.endswith((".dist-info", ".egg-info")):
                    try:
                        st = os.stat(os.path.join(entry, name))
                    except OSError:
                        continue
                    h.update(f"{st.st_ino} {st.st_mtime_ns}\0".encode())
    return h.hexdigest()


def _digest(data: bytes) -> str:
    return blake3(data).hexdigest()


def request_key(paths: Sequence[str], roots: Sequence[str], files: Iterable[tuple[str, bytes | None]]) -> str:
    """Key of a request: what was asked and the bytes of the requested files."""
    h = blake3(_code_salt())
    h.update(str(parse.max_file_bytes()).encode() + b"\0")  # decides which files are skipped
    h.update(",".join(sorted(assumed_installed())).encode() + b"\0")  # decides which imports are libraries
    for part in (*paths, "\0", *roots, "\0"):
        h.update(part.encode("utf-8", "surrogateescape") + b"\0")
    for path, data in files:
        h.update(
            path.encode("utf-8", "surrogateescape") + b"\0" + (_digest(data) if data is not None else "-").encode()
        )
    return h.hexdigest()


@dataclass(frozen=True)
class Analysis:
    """A graph, its transitive (Merkle) digests, and everything that went wrong."""

    graph: DepGraph
    diagnostics: tuple[Diagnostic, ...]
    project: Project
    digests: Mapping[str, str]
    calls: CallGraph | None = None  # when asked for (``analyze(..., calls=True)``)


class ResultCache:
    """Whole analyses on disk, validated input by input on every hit.

    An entry is a JSON array: a string table, then flat arrays of indexes into it (see
    :func:`_encode`): node ids repeat in thousands of edges, so the table keeps entries
    small and fast to decode, and every index is checked while the records are rebuilt."""

    def __init__(self, store: SummaryCache) -> None:
        self.store = store

    def load(self, key: str, project: Project) -> tuple[DepGraph, tuple[Diagnostic, ...], Mapping[str, str]] | None:
        """The stored analysis for ``key`` if every input it read is unchanged, else None."""
        found = self._load("r" + key, project, None)
        return found[0] if found is not None else None

    def save(self, key: str, project: Project, read: Iterable[tuple[str, str]], analysis: Analysis) -> None:
        self.store.write(_KIND_TAG, "r" + key, _encode(project, read, analysis))

    def load_with(
        self, key: str, project: Project, decode: Callable[[object], _T], *, variant: str
    ) -> tuple[tuple[DepGraph, tuple[Diagnostic, ...], Mapping[str, str]], _T] | None:
        """As :meth:`load`, for an entry saved by :meth:`save_with` under ``variant``: the
        analysis and its extra document, rebuilt (and validated) by ``decode``; anything
        ``decode`` raises makes the entry a miss."""
        return self._load(_variant(variant) + key, project, decode)  # type: ignore[return-value]

    def save_with(
        self,
        key: str,
        project: Project,
        read: Iterable[tuple[str, str]],
        analysis: Analysis,
        extra: object,
        *,
        variant: str,
    ) -> None:
        """Store ``analysis`` with an extra JSON-able document (what a variant of the request
        also computed, e.g. the call graph) under ``variant`` + ``key``."""
        self.store.write(_KIND_TAG, _variant(variant) + key, [_encode(project, read, analysis), extra])

    def _load(
        self, name: str, project: Project, decode: Callable[[object], object] | None
    ) -> tuple[tuple[DepGraph, tuple[Diagnostic, ...], Mapping[str, str]], object] | None:
        """The entry ``name``: a plain analysis (``decode`` None) or ``[analysis, extra]``."""
        raw = self.store.read(_KIND_TAG, name)
        if raw is None:
            return None
        try:
            extra = None
            if decode is not None:
                if type(raw) is not list or len(raw) != 2:
                    raise Invalid("not a result entry with an extra document")
                raw, extra = raw
            table, rows = _table(raw)
            if not _still_valid(_inputs(table, rows), project):
                return None
            revived = _revive(table, rows)
            if revived is None:
                return None
            return revived, (decode(extra) if decode is not None else None)
        except Exception as exc:  # a foreign or corrupted entry (Invalid, IndexError...) is a miss, never an error
            log.debug("ignoring unusable result-cache entry %s: %s", name, exc)
            return None


def _variant(variant: str) -> str:
    """A variant's one-letter prefix; ``r`` is the plain entry's."""
    if len(variant) != 1 or variant == "r":
        raise ValueError(f"result-cache variant must be one letter other than 'r', got {variant!r}")
    return variant


_KIND_TAG = "result-" + _VERSION.decode()
# Entry layout: [strings, read, probes, namespaces, extensions, roots, environment, nodes,
# edges, diagnostics, digests]; every array but ``strings`` is flat, of these strides.
_STRIDES = (2, 2, 2, 2, 1, 1, 7, 4, 4, 2)


def _encode(project: Project, read: Iterable[tuple[str, str]], analysis: Analysis) -> list:
    strings: dict[str, int] = {}

    def ref(text: str) -> int:
        found = strings.get(text)
        if found is None:
            found = strings[text] = len(strings)
        return found

    def flat(rows: Iterable[Iterable[str | int]]) -> list[int]:
        return [value if type(value) is int else ref(value) for row in rows for value in row]  # type: ignore[arg-type]

    graph = analysis.graph
    probes = ((name, found.path if found else "") for name, found in sorted(project.probed().items()))
    nodes = (
        (n.id, _KIND[n.kind], n.digest, *((n.location.path, n.location.line) if n.location else (-1, 0)))
        + (n.detail, "\0".join(sorted(n.tags)))
        for n in graph.nodes.values()
    )
    rows = [
        flat(sorted(read)),
        flat(probes),
        flat((name, int(was)) for name, was in sorted(project.namespace_probes().items())),
        flat((name, int(was)) for name, was in sorted(project.extension_probes().items())),
        flat((r,) for r in graph.roots),
        [ref(_environment())],
        flat(nodes),
        flat((e.src, e.dst, _KIND[e.kind], e.label) for e in graph.edges),
        flat((d.path, d.line, d.message, int(d.note)) for d in analysis.diagnostics),
        flat(analysis.digests.items()),
    ]
    return [list(strings), *rows]


def _table(raw: object) -> tuple[list[str], list[list]]:
    """The string table and the flat arrays, checked for types and lengths."""
    if type(raw) is not list or len(raw) != 1 + len(_STRIDES) or type(raw[0]) is not list:
        raise Invalid("not a result entry")
    table: list[str] = raw[0]
    "".join(table)  # TypeError unless every entry is a string
    for row, stride in zip(raw[1:], _STRIDES, strict=True):
        if type(row) is not list or len(row) % stride:
            raise Invalid("malformed result entry")
        if row and min(row) < -1:  # ints only (a str raises TypeError); -1 is "no location"
            raise Invalid("negative index")
    return table, raw[1:]


def _pairs(table: list[str], row: list) -> tuple[tuple[str, str], ...]:
    it = iter(row)
    return tuple((table[a], table[b]) for a, b in zip(it, it))


def _flags(table: list[str], row: list) -> tuple[tuple[str, bool], ...]:
    it = iter(row)
    return tuple((table[a], _bit(b)) for a, b in zip(it, it))


def _bit(value: object) -> bool:
    if value != 0 and value != 1 or type(value) is not int:
        raise Invalid("expected 0 or 1")
    return value == 1


def _inputs(table: list[str], rows: list[list]) -> _Inputs:
    return _Inputs(_pairs(table, rows[0]), _pairs(table, rows[1]), _flags(table, rows[2]), _flags(table, rows[3]))


def _revive(table: list[str], rows: list[list]) -> tuple[DepGraph, tuple[Diagnostic, ...], Mapping[str, str]] | None:
    """The graph, diagnostics and digests of an entry whose inputs re-checked equal."""
    roots = tuple(table[i] for i in rows[4])
    environment = table[rows[5][0]] if rows[5] else ""
    nodes = _nodes(table, rows[6])
    it = iter(rows[7])
    edges = tuple(
        Edge(table[s], table[d], _EDGE_KINDS[table[k]], table[label]) for s, d, k, label in zip(it, it, it, it)
    )
    graph = DepGraph(roots, nodes, edges)
    if environment != _environment() and any(
        n.kind is NodeKind.EXTERNAL and _origin.external_digest(n.id[9:])[0] != n.digest for n in graph.nodes.values()
    ):
        return None  # a library was upgraded or reinstalled with other files: its leaves' digests changed
    it = iter(rows[8])
    diagnostics = tuple(
        Diagnostic(table[p], _int(line), table[m], _bit(note)) for p, line, m, note in zip(it, it, it, it)
    )
    return graph, diagnostics, MappingProxyType(dict(_pairs(table, rows[9])))


def _int(value: object) -> int:
    if type(value) is not int:
        raise Invalid("expected an int")
    return value


def _nodes(table: list[str], row: list) -> dict[str, Node]:
    nodes: dict[str, Node] = {}
    it = iter(row)
    for nid, kind, digest, path, line, detail, tags in zip(it, it, it, it, it, it, it):
        location = Location(table[path], _int(line)) if path != -1 else None
        tag_text = table[tags]
        nodes[table[nid]] = Node(
            table[nid],
            _NODE_KINDS[table[kind]],
            table[digest],
            location,
            table[detail],
            frozenset(tag_text.split("\0")) if tag_text else frozenset(),
        )
    return nodes


def _still_valid(entry: _Inputs, project: Project) -> bool:
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
