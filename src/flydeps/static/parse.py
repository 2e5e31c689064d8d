"""Reading many files fast: the content-addressed parse cache and the process pool.

Contract: ``summarize(items)`` maps (path, bytes) pairs to :class:`FileSummary` records,
in order. A summary is looked up in the cache by the blake3 digest of the file's bytes
salted with the Python cache tag and the digest of the extractor's own sources, so a
new Python or a new flydeps never reads stale entries. The cache lives in
``platformdirs.user_cache_dir("flydeps")`` (``FLYDEPS_CACHE_DIR`` overrides it); it is safe
to delete at any time, unreadable or corrupted entries are ignored and rewritten, and
entries are written to a temporary file and renamed into place so concurrent runs never
see half an entry. Misses are extracted in a pool of worker processes when there is
enough work to pay for it (cold whole-tree runs), else in-process.
"""

from __future__ import annotations

import functools
import logging
import marshal
import multiprocessing
import os
import pickle
import re
import sys
import tempfile
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO, cast

from blake3 import blake3

from .extract import extract, failed_summary
from .summary import SUMMARY_VERSION, FileSummary

__all__ = ["SummaryCache", "cache_dir", "scan_imports", "summarize"]

log = logging.getLogger("flydeps.static")

# Below this much uncached source, starting worker processes costs more than it saves.
POOL_MIN_BYTES = 256 * 1024
POOL_MIN_FILES = 4
# Files above this size are reported and skipped rather than parsed.
MAX_FILE_BYTES = int(os.environ.get("FLYDEPS_MAX_FILE_BYTES", str(32 * 1024 * 1024)))


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
    base = os.environ.get("FLYDEPS_CACHE_DIR")
    if not base:
        import platformdirs

        base = platformdirs.user_cache_dir("flydeps")
    return Path(base) / f"static-v{SUMMARY_VERSION}-{sys.implementation.cache_tag}-{_salt()[:12]}"


@functools.lru_cache(maxsize=1)
def _salt() -> str:
    """Digest of the code and settings that produce summaries: editing flydeps or changing
    the value-snapshot bound (``FLYDEPS_SNAPSHOT_LIMIT``, it shapes literal digests)
    invalidates the cache."""
    here = Path(__file__).resolve().parent
    h = blake3(os.environ.get("FLYDEPS_SNAPSHOT_LIMIT", "").encode() + b"\0")
    sources = (
        "extract.py",
        "expressions.py",
        "summary.py",
        "../_bytecode.py",
        "../_opcodes.py",
        "../_normalize.py",
        "../_disref.py",
        "../_values.py",
    )
    for path in (here / name for name in sources):
        try:
            h.update(path.read_bytes())
        except OSError:
            h.update(path.name.encode())
    return h.hexdigest()


class SummaryCache:
    """Content-addressed summaries on disk; every failure degrades to a miss."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory

    def _entry(self, key: str, codec: str) -> Path:
        assert self.directory is not None
        return self.directory / key[:2] / f"{key[2:]}.{codec}"

    def get(self, digest: str) -> FileSummary | None:
        summary = self.get_object(digest)
        if isinstance(summary, FileSummary) and summary.content_digest == digest:
            return summary
        return None

    def put(self, summary: FileSummary) -> None:
        self.put_object(summary.content_digest, summary)

    def get_object(self, key: str, codec: str = "pickle") -> object:
        """Any entry by key (None when missing or unreadable). ``codec`` is ``pickle`` (any
        object) or ``marshal`` (plain tuples of str/int/None: several times faster)."""
        if self.directory is None:
            return None
        try:
            with open(self._entry(key, codec), "rb") as handle:
                return _CODECS[codec][0](handle)
        except FileNotFoundError:
            return None
        except Exception as exc:  # corrupted or foreign entry: ignore it, it will be rewritten
            log.debug("ignoring unreadable cache entry %s: %s", key, exc)
            return None

    def put_object(self, key: str, value: object, codec: str = "pickle") -> None:
        """Write an entry atomically (temporary file + rename); failures only log."""
        if self.directory is None:
            return
        path = self._entry(key, codec)
        tmp = None
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as handle:
                _CODECS[codec][1](value, handle)
            os.replace(tmp, path)
        except (OSError, ValueError) as exc:  # read-only or full cache: analysis goes on uncached
            log.debug("cannot write cache entry %s: %s", path, exc)
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)


_CODECS: dict[str, tuple[Callable[[BinaryIO], object], Callable[[object, BinaryIO], None]]] = {
    "pickle": (pickle.load, lambda value, handle: pickle.dump(value, handle, protocol=pickle.HIGHEST_PROTOCOL)),
    # marshal.load on a file reads in small pieces; one read + loads is several times faster
    "marshal": (
        lambda handle: marshal.loads(handle.read()),
        lambda value, handle: marshal.dump(cast(Any, value), handle),
    ),
}


def _extract_and_store(job: tuple[str, bytes, str | None]) -> FileSummary:
    path, source, directory = job
    summary = _safe_extract(source, path)
    SummaryCache(Path(directory) if directory else None).put(summary)
    return summary


def _safe_extract(source: bytes, path: str) -> FileSummary:
    try:
        return extract(source, path)
    except RecursionError:
        digest = blake3(source).hexdigest()
        return failed_summary(digest, source.count(b"\n") + 1, 1, "nesting too deep to analyse; simplify the file")


def summarize(
    items: Sequence[tuple[str, bytes]], cache: SummaryCache, *, workers: int | None = None
) -> list[FileSummary]:
    """Summaries of ``items`` (path, bytes), from the cache or extracted (in parallel if worth it)."""
    results: list[FileSummary | None] = []
    misses: list[int] = []
    for index, (_, source) in enumerate(items):
        if len(source) > MAX_FILE_BYTES:
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
        f"file too large to analyse ({size:.1f} MB > {MAX_FILE_BYTES / 1e6:.1f} MB); "
        "raise FLYDEPS_MAX_FILE_BYTES to include it",
    )


def _run(jobs: list[tuple[str, bytes, str | None]], workers: int | None) -> list[FileSummary]:
    count = workers if workers is not None else min(2, os.cpu_count() or 1)
    total = sum(len(job[1]) for job in jobs)
    if count < 2 or len(jobs) < POOL_MIN_FILES or total < POOL_MIN_BYTES:
        return [_extract_and_store(job) for job in jobs]
    # Largest files first so the two workers finish together; results go back in job order.
    order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i][1]))
    with ProcessPoolExecutor(max_workers=count, mp_context=_context()) as pool:
        done = list(pool.map(_extract_and_store, [jobs[i] for i in order], chunksize=1))
    results: list[FileSummary] = [done[0]] * len(jobs)
    for position, index in enumerate(order):
        results[index] = done[position]
    return results


def _context() -> multiprocessing.context.BaseContext:
    # fork starts in milliseconds; it is only safe while this process has a single thread.
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")
