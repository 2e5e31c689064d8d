"""Reading many files fast and safely: the content-addressed parse cache and the worker processes.

Contract: ``summarize(items)`` maps (path, bytes) pairs to :class:`FileSummary` records,
in order, and never raises or crashes for a bad file: every failure is a summary with one
problem (``path:line: message``). A summary is looked up in the cache by the blake3 digest
of the file's bytes, under a kind naming the summary schema version and a digest of the
extractor's own sources and settings, so a new Python or a new flydeps never reads stale
entries. The cache lives in ``platformdirs.user_cache_dir("flydeps")``
(``FLYDEPS_CACHE_DIR`` overrides it); it is safe to delete at any time. Entries are JSON
validated field by field and bound to their key (:mod:`flydeps.static.store`): nothing in
the cache directory can run code, crash the interpreter or stand for another file; a
malformed entry is a miss and gets rewritten. A directory others can write, or another
user's, is refused (one warning) and the run goes on uncached. The cache is kept under
``FLYDEPS_PARSE_CACHE_MAX_BYTES``: about once per :data:`flydeps.store.caches.WRITE_CHECK_EVERY`
writes, its least recently used entries past the limit are deleted (:mod:`flydeps.store.caches`).

Misses are extracted in a pool of worker processes when there is enough work to pay for
it (cold whole-tree runs), else in-process; workers die with this process
(:mod:`flydeps.static.processes`). A cheap pre-check (:func:`needs_isolation`: size,
longest line) sends files that could crash or exhaust the CPython parser to a child
process of their own, so a crash there is a problem of that file only.

Flow facts (:mod:`flydeps.static.calls.collect`, for the call graph) are cached the same way in
an entry of their own kind per file content, validated field by field
(:data:`~flydeps.static.calls.facts.FACTS_SHAPE`), and extracted in the same worker jobs as
the summaries, but only when asked for (:func:`summarize_with_facts`): runs that want no
call graph neither compute nor read them.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar, cast

from blake3 import blake3

from .. import settings
from ..store import caches
from ..store.memofile import sources_digest
from . import processes, store
from .extract import extract, failed_summary, longest_line, too_complex
from .store import Invalid
from .summary import SUMMARY_SHAPE, SUMMARY_VERSION, FileSummary

if TYPE_CHECKING:  # the call graph is imported only by the runs that ask for it
    from .calls.facts import FlowFacts

__all__ = ["SummaryCache", "cache_dir", "facts_of_source", "scan_imports", "summarize", "summarize_with_facts"]

log = logging.getLogger("flydeps.static")

# Below this much uncached source, starting worker processes costs more than it saves.
POOL_MIN_BYTES = 256 * 1024
POOL_MIN_FILES = 4
# The pre-check (:func:`needs_isolation`): larger files, or files with a longer line, are
# parsed in a child process of their own, which is killed after ISOLATED_TIMEOUT seconds.
ISOLATE_BYTES = 128 * 1024
ISOLATE_LINE = 8 * 1024
ISOLATED_TIMEOUT = 600.0
# Files above this size are reported and skipped rather than parsed.
# ``None``: ``FLYDEPS_MAX_FILE_BYTES``, read when used (never at import, so a bad value cannot
# break ``--help``); a test may set an int here.
MAX_FILE_BYTES: int | None = None


def max_file_bytes() -> int:
    """Files above this many bytes are reported and skipped (raises ``SettingError`` on a bad value)."""
    return MAX_FILE_BYTES if MAX_FILE_BYTES is not None else settings.integer("FLYDEPS_MAX_FILE_BYTES", 32 << 20)


# ``import a.b as c, d`` / ``from ..a import (b, c as d)``: a cheap over-approximation of a
# file's imports, used to find every reachable file before the (parallel) real parse.
_IMPORT_RE = re.compile(
    rb"^[ \t]*(?:from[ \t]+(\.*)[ \t]*([\w.]*)[ \t]+import[ \t]*(\([^)]*\)|[^#\n]*)|import[ \t]+([^#\n]+))",
    re.MULTILINE,
)


def scan_imports(source: bytes) -> list[tuple[int, str, tuple[str, ...]]]:
    """(level, module, imported names) of every import-looking line. May include imports
    inside strings or dead code (harmless: a file read too many); the real parse decides."""
    found: list[tuple[int, str, tuple[str, ...]]] = []
    for level, module, names, plain in _IMPORT_RE.findall(source):
        if plain:
            for part in plain.split(b","):
                name = part.split()[0] if part.split() else b""
                found.append((0, name.decode("ascii", "replace"), ()))
            continue
        items = names.strip(b"()").replace(b"\\", b" ").split(b",")
        imported = tuple(p.split()[0].decode("ascii", "replace") for p in items if p.split())
        found.append((len(level), module.decode("ascii", "replace"), imported))
    return found


def cache_dir() -> Path:
    """The parse-cache directory for this Python and this flydeps build."""
    base = settings.cache_root()
    return Path(base) / f"static-v{SUMMARY_VERSION}-{sys.implementation.cache_tag}-{_salt()[:12]}"


@functools.lru_cache(maxsize=1)
def _salt() -> str:
    """Digest of the code and settings that produce summaries: editing flydeps or changing
    the value-snapshot bound (``FLYDEPS_SNAPSHOT_LIMIT``, it shapes literal digests)
    invalidates the cache."""
    h = blake3(str(settings.integer("FLYDEPS_SNAPSHOT_LIMIT", 256)).encode() + b"\0")
    static = ("extract", "expressions", "moduleflow", "summary")
    code = ("bytecode", "opcodes", "normalize", "scan", "disref")
    sources_digest(
        h, [f"flydeps.static.{n}" for n in static] + [f"flydeps.code.{n}" for n in code] + ["flydeps.values.snapshot"]
    )
    return h.hexdigest()


# The flow facts of a file live next to its summary, in a file of their own.
_FACTS_SUFFIX = "-facts"


@functools.lru_cache(maxsize=1)
def _facts_kind() -> str:
    """The entry kind of flow facts: their schema version and a digest of their extractor."""
    from .calls.collect import EXTRACTOR_MODULES
    from .calls.facts import FACTS_VERSION

    h = blake3()
    sources_digest(h, EXTRACTOR_MODULES)
    return "flowfacts-v%d-%s" % (FACTS_VERSION, h.hexdigest())


class SummaryCache:
    """Content-addressed summaries on disk (see :mod:`flydeps.static.store` for the entry
    format and the directory rules); every failure degrades to a miss.

    ``directory`` is checked (owner, mode) and created 0700 by :func:`store.private_dir`
    unless ``checked`` says the caller already did; a refused directory means no cache."""

    def __init__(self, directory: Path | None, *, checked: bool = False) -> None:
        if directory is not None and not checked:
            directory = store.private_dir(directory.parent, directory)
        self.directory = directory

    def _path(self, key: str) -> Path:
        assert self.directory is not None
        return self.directory / key[:2] / f"{key[2:]}.json"

    def get(self, digest: str) -> FileSummary | None:
        """The stored summary of the file whose bytes have blake3 ``digest``, if valid."""
        raw = self.read("summary-v%d-%s" % (SUMMARY_VERSION, _salt()), digest)
        if raw is None:
            return None
        try:
            summary = SUMMARY_SHAPE.decode(raw)
        except (Invalid, TypeError, ValueError, IndexError, KeyError, RecursionError) as exc:
            log.debug("ignoring malformed parse-cache entry %s: %s", digest, exc)
            return None
        return summary if summary.content_digest == digest else None

    def put(self, summary: FileSummary) -> None:
        self.write("summary-v%d-%s" % (SUMMARY_VERSION, _salt()), summary.content_digest, SUMMARY_SHAPE.encode(summary))

    def get_facts(self, digest: str) -> FlowFacts | None:
        """The stored flow facts of the file whose bytes have blake3 ``digest``, if valid."""
        if self.directory is None:
            return None
        from .calls.facts import FACTS_SHAPE

        raw = self.read(_facts_kind(), digest + _FACTS_SUFFIX)
        if raw is None:
            return None
        try:
            return cast("FlowFacts", FACTS_SHAPE.decode(raw))
        except (Invalid, TypeError, ValueError, IndexError, KeyError, RecursionError) as exc:
            log.debug("ignoring malformed flow-facts entry %s: %s", digest, exc)
            return None

    def put_facts(self, digest: str, facts: FlowFacts) -> None:
        if self.directory is not None:
            from .calls.facts import FACTS_SHAPE

            self.write(_facts_kind(), digest + _FACTS_SUFFIX, FACTS_SHAPE.encode(facts))

    def read(self, kind: str, key: str) -> object:
        """The JSON document stored for (``kind``, ``key``), None when missing or foreign."""
        if self.directory is None:
            return None
        return store.read_entry(self._path(key), kind, key)

    def write(self, kind: str, key: str, document: object) -> None:
        """Store a JSON-able document for (``kind``, ``key``); failures only log."""
        if self.directory is not None:
            store.write_entry(self._path(key), kind, key, document)
            caches.note_parse_write()  # about once per WRITE_CHECK_EVERY writes: its size limit


def _extract_and_store(job: tuple[str, bytes, str | None]) -> FileSummary:
    path, source, directory = job
    summary = _safe_extract(source, path)
    SummaryCache(Path(directory) if directory else None, checked=True).put(summary)
    return summary


def _safe_extract(source: bytes, path: str) -> FileSummary:
    try:
        return extract(source, path)
    except (RecursionError, MemoryError) as exc:  # in the analyzer's own walk of a compiled file
        return failed_summary(blake3(source).hexdigest(), source.count(b"\n") + 1, *too_complex(source, exc))


def needs_isolation(source: bytes) -> bool:
    """The cheap pre-check run before ``compile``: True when the file is parsed in a child
    process of its own. CPython 3.11+ turns deep nesting into RecursionError/MemoryError,
    but 3.10's parser overflows the C stack (a segfault) on ~150,000 chained operators,
    which takes at least ~300 KB of source; and time and memory grow with size. So: files
    over :data:`ISOLATE_BYTES`, or with a line over :data:`ISOLATE_LINE` bytes (where
    generated chains live), are isolated; ordinary files stay in-process (or in the pool)."""
    if len(source) > ISOLATE_BYTES:
        return True
    return len(source) > ISOLATE_LINE and max(map(len, source.split(b"\n"))) > ISOLATE_LINE


def _extract_encoded(job: tuple[str, bytes, str | None]) -> bytes:
    """In the isolated child: the summary, stored in the cache and sent back as JSON."""
    return json.dumps(SUMMARY_SHAPE.encode(_extract_and_store(job))).encode("ascii")


def _isolated(job: tuple[str, bytes, str | None]) -> FileSummary:
    """Extract one suspicious file in a child: a crash there is a problem of this file."""
    path, source, _ = job
    answer = processes.run_isolated(_extract_encoded, job, ISOLATED_TIMEOUT)
    if isinstance(answer, bytes):
        try:
            return cast(FileSummary, SUMMARY_SHAPE.decode(json.loads(answer)))
        except (ValueError, TypeError, RecursionError) as exc:
            answer = processes.Abort(exitcode=-1)
            log.debug("unreadable answer of the parser process for %s: %s", path, exc)
    hint = " (out of memory?)" if answer.signal == "SIGKILL" else ""
    fix = "split the file" if answer.timeout else "split the long statement on this line"
    return failed_summary(
        blake3(source).hexdigest(),
        source.count(b"\n") + 1,
        longest_line(source),
        f"cannot analyse: parsing this file {answer}{hint} in a separate process; {fix}",
    )


def summarize(
    items: Sequence[tuple[str, bytes]], cache: SummaryCache, *, workers: int | None = None
) -> list[FileSummary]:
    """Summaries of ``items`` (path, bytes), from the cache or extracted (in parallel if worth it)."""
    results: list[FileSummary | None] = []
    misses: list[int] = []
    for index, (_, source) in enumerate(items):
        if len(source) > max_file_bytes():
            results.append(_too_large(source))
            continue
        hit = cache.get(blake3(source).hexdigest())
        results.append(hit)
        if hit is None:
            misses.append(index)
    directory = str(cache.directory) if cache.directory else None
    jobs = [(items[i][0], items[i][1], directory) for i in misses]
    for index, summary in zip(misses, _run(jobs, workers), strict=True):
        results[index] = summary
    return [r for r in results if r is not None]


def _too_large(source: bytes) -> FileSummary:
    size = len(source) / 1e6
    return failed_summary(
        blake3(source).hexdigest(),
        source.count(b"\n") + 1,
        1,
        f"file too large to analyse ({size:.1f} MB > {max_file_bytes() / 1e6:.1f} MB); "
        "raise FLYDEPS_MAX_FILE_BYTES to include it",
    )


def _run(jobs: list[tuple[str, bytes, str | None]], workers: int | None) -> list[FileSummary]:
    """Summaries of ``jobs`` in order: suspicious files one child each, the rest batched."""
    results: list[FileSummary | None] = [None] * len(jobs)
    plain = []
    for index, job in enumerate(jobs):
        if needs_isolation(job[1]):
            results[index] = _isolated(job)
        else:
            plain.append(index)
    for index, summary in zip(plain, _run_plain([jobs[i] for i in plain], workers), strict=True):
        results[index] = summary
    return cast(list[FileSummary], results)


def _run_plain(jobs: list[tuple[str, bytes, str | None]], workers: int | None) -> list[FileSummary]:
    try:
        return _pool_map(_extract_and_store, jobs, workers)
    except BrokenProcessPool:  # a worker died (a crash on some file): one child per file finds which
        log.debug("a parse worker died; extracting %d files one process each", len(jobs))
        return [_isolated(job) for job in jobs]


_Job = TypeVar("_Job", bound=tuple)
_Result = TypeVar("_Result")


def _pool_map(function: Callable[[_Job], _Result], jobs: list[_Job], workers: int | None) -> list[_Result]:
    """``function`` over ``jobs`` (``job[1]`` is the file's bytes), in order: in the worker
    pool when there is enough work, else in-process; a dead worker raises BrokenProcessPool."""
    count = workers if workers is not None else min(2, os.cpu_count() or 1)
    total = sum(len(job[1]) for job in jobs)
    if count < 2 or len(jobs) < POOL_MIN_FILES or total < POOL_MIN_BYTES:
        return [function(job) for job in jobs]
    # Largest files first so the two workers finish together; results go back in job order.
    order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i][1]))
    with processes.pool(count) as pool:
        done = list(pool.map(function, [jobs[i] for i in order], chunksize=1))
    results: list[_Result] = [done[0]] * len(jobs)
    for position, index in enumerate(order):
        results[index] = done[position]
    return results


# -- flow facts (only when the call graph is asked for) ---------------------------------

_FactsJob = tuple[str, bytes, str | None, bool]  # path, bytes, cache directory, summary wanted


def facts_of_source(source: bytes, cache: SummaryCache) -> FlowFacts | None:
    """The flow facts of ``source``, from the cache or extracted (in-process) and stored;
    None when the file does not parse (its summary reports why)."""
    digest = blake3(source).hexdigest()
    facts = cache.get_facts(digest)
    return facts if facts is not None else _extract_facts(source, digest, cache)


def _extract_facts(source: bytes, digest: str, cache: SummaryCache) -> FlowFacts | None:
    import ast

    from .calls.collect import flow_facts

    try:
        facts = flow_facts(ast.parse(source))
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # reported by the summary already
    cache.put_facts(digest, facts)
    return facts


def _extract_with_facts(job: _FactsJob) -> tuple[FileSummary | None, FlowFacts | None]:
    """In a worker: the summary (when wanted) and the flow facts of one file, both stored."""
    path, source, directory, want_summary = job
    summary = _extract_and_store((path, source, directory)) if want_summary else None
    cache = SummaryCache(Path(directory) if directory else None, checked=True)
    return summary, _extract_facts(source, blake3(source).hexdigest(), cache)


def summarize_with_facts(
    items: Sequence[tuple[str, bytes]], cache: SummaryCache, *, workers: int | None = None
) -> list[tuple[FileSummary, FlowFacts | None]]:
    """:func:`summarize`, with each file's flow facts (None: not parsed, or left for the
    caller to extract in-process: files that need isolation). A file missing either entry
    is one job, run in the worker pool when worth it, which extracts what is missing."""
    directory = str(cache.directory) if cache.directory else None
    results: list[tuple[FileSummary | None, FlowFacts | None]] = []
    misses: list[int] = []
    for index, (path, source) in enumerate(items):
        if len(source) > max_file_bytes():
            results.append((_too_large(source), None))
            continue
        digest = blake3(source).hexdigest()
        summary, facts = cache.get(digest), cache.get_facts(digest)
        isolate = needs_isolation(source)
        if summary is None and isolate:  # and its facts are left to the caller
            summary = _isolated((path, source, directory))
        results.append((summary, facts))
        if summary is None or (facts is None and not isolate):
            misses.append(index)
    jobs = [(items[i][0], items[i][1], directory, results[i][0] is None) for i in misses]
    for index, (summary, facts) in zip(misses, _run_with_facts(jobs, workers), strict=True):
        results[index] = (summary or results[index][0], facts)
    return [(s, f) for s, f in results if s is not None]


def _run_with_facts(jobs: list[_FactsJob], workers: int | None) -> list[tuple[FileSummary | None, FlowFacts | None]]:
    try:
        return _pool_map(_extract_with_facts, jobs, workers)
    except BrokenProcessPool:  # a worker died (a crash on some file): one child per file finds which
        log.debug("a parse worker died; extracting %d files one process each", len(jobs))
        return [(_isolated(job[:3]) if job[3] else None, None) for job in jobs]
