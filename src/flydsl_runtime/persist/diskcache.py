"""FlyDSL's disk cache as flydsl_runtime reads it: only files no other user can replace, and
without writing where this process cannot write (a shipped directory owned by another user,
a read-only mount).

Contract
--------
:func:`load` is how the persistent index is served an artifact: from the manager's memory,
else from its file only where neither the file nor its directory can be replaced by another
user (:func:`flydeps.store.memofile.open_dir` / :func:`~flydeps.store.memofile.open_entry`, the
checks of flydeps' own caches: the directory, ``$FLYDSL_RUNTIME_CACHE_DIR/<function>``, is
the current user's, or a shipped one of another user, and group and others cannot write it;
the ``.pkl`` file is a regular file, no symlink, owned by this user, root or the directory's
owner, that group and others cannot write), unpickled from the descriptor that was checked.
Any other file is a miss: one WARNING per directory and process names it and why, and the
call traces.

:func:`manager` gives the ``JitFunction`` a :class:`CheckedCache` in place of FlyDSL's own
``JitCacheManager`` (as ``_ensure_cache_manager`` sets it from ``FLYDSL_RUNTIME_CACHE_DIR``):
FlyDSL's manager, whose reads (:meth:`~CheckedCache.get`, and the re-check of the disk in
``compile_lock`` after a trace, which unpickles what it finds) go through the same checks;
where the directory is refused, a trace's artifact is kept in memory (no row can point to
it), and an artifact file it refuses in a trusted directory is removed before FlyDSL writes
its own. Where this process cannot write the directory (a shipped directory of another user,
a read-only mount), FlyDSL's manager would read nothing (it takes a shared lock on each
artifact's ``.lock`` file, which it opens for writing, creating it) and a trace would fail
when it writes its artifact: there it is a :class:`ReadOnlyCache`, which reads as
:func:`load` does (without FlyDSL's lock) and keeps what a trace builds in memory. An
unlocked read is whole: FlyDSL writes an artifact by replacing the file in one rename, so a
reader sees the old file or the new one. FlyDSL keeps a manager whose directory is still the
configured one, so the replacement lasts until ``FLYDSL_RUNTIME_CACHE_DIR`` changes. Touches
only the ``cache_manager`` attribute of the ``JitFunction`` it is given.
"""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from flydsl.compiler.jit_function import JitCacheManager, JitFunction

from flydeps.settings import can_write
from flydeps.store import memofile as _memofile

__all__ = ["CheckedCache", "ReadOnlyCache", "load", "manager"]

log = logging.getLogger("flydsl_runtime")

# (directory, reason) already warned of in this process.
_warned: set[tuple[str, str]] = set()


def _read(directory: Path, name: str) -> Any:
    """The artifact file ``name`` in ``directory``, unpickled from the descriptor whose
    directory and file were checked; ``FileNotFoundError`` when missing,
    :class:`flydeps.store.memofile.Untrusted` when refused."""
    fd = _memofile.open_shared_entry(directory, name)
    with os.fdopen(fd, "rb") as file:
        return pickle.load(file)


def _refuse(why: _memofile.Untrusted, directory: Path) -> None:
    if (str(directory), why.reason) in _warned:
        return
    _warned.add((str(directory), why.reason))
    log.warning(
        "flydsl_runtime: FlyDSL artifacts in %s not used: %s: %s; make the directory yours and private "
        "(`chmod 700`) or set FLYDSL_RUNTIME_CACHE_DIR to a directory only you can write (calls trace, "
        "their artifacts kept in memory)",
        directory,
        why.path,
        why.reason,
    )


def load(cache: JitCacheManager, cache_key: str) -> Any | None:
    """The artifact ``cache_key`` of ``cache`` (see the module's contract), or None: missing,
    refused (one warning per directory), or unreadable (one warning)."""
    if cache_key in cache.memory_cache:
        cache._hits += 1
        return cache.memory_cache[cache_key]
    name = cache._cache_file(cache_key).name
    try:
        value = _read(cache.cache_dir, name)
    except FileNotFoundError:
        cache._misses += 1
        return None
    except _memofile.Untrusted as why:
        _refuse(why, cache.cache_dir)
        cache._misses += 1
        return None
    except Exception as error:  # what FlyDSL's own get() catches: a damaged file is a miss
        log.warning("flydsl_runtime: FlyDSL artifact %s not read: %s", cache.cache_dir / name, error)
        cache._misses += 1
        return None
    cache.memory_cache[cache_key] = value
    cache._hits += 1
    return value


class CheckedCache(JitCacheManager):
    """FlyDSL's cache manager, reading only artifacts no other user can replace: :meth:`get`
    is :func:`load`; :meth:`compile_lock` (FlyDSL's re-check of the disk after a trace, which
    unpickles what it finds) uses the disk only where the directory is trusted (else keeps
    the trace's artifact in memory) and first removes an artifact file it may not trust, so
    FlyDSL writes its own. A missing directory is made 0700 (FlyDSL would make it with the
    umask's mode, group-writable under ``umask 002``)."""

    def get(self, cache_key: str) -> Any | None:
        return load(self, cache_key)

    @contextmanager
    def compile_lock(
        self, cache_key: str, *, accept_cached: Callable[[Any], bool] | None = None
    ) -> Iterator[tuple[Any | None, Callable[[Any], None] | None]]:
        if not self._disk_usable(cache_key):
            yield (None, lambda value: self.memory_cache.__setitem__(cache_key, value))
            return
        with super().compile_lock(cache_key, accept_cached=accept_cached) as found:
            yield found

    def _disk_usable(self, cache_key: str) -> bool:
        """The directory may be used; an untrusted artifact file in it is removed first."""
        directory = self.cache_dir
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            dir_fd, info = _memofile.open_dir(directory, shared=True)
        except _memofile.Untrusted as why:
            _refuse(why, directory)
            return False
        except OSError:
            return True  # FlyDSL meets the same error and reports it
        name = self._cache_file(cache_key).name
        try:
            _memofile.check_entry(name, dir_fd, _memofile.trusted_owners(info), where=directory)
        except _memofile.Untrusted as why:
            _refuse(why, directory)
            try:
                os.unlink(name, dir_fd=dir_fd)  # a trusted directory: the trace writes its own
            except OSError:  # a directory of that name: the trace's artifact stays in memory
                return False
        finally:
            os.close(dir_fd)
        return True


class ReadOnlyCache(CheckedCache):
    """FlyDSL's cache manager for a directory this process cannot write: artifacts read as
    :func:`load` reads them, a trace's kept in memory."""

    def set(self, cache_key: str, value: Any) -> None:
        self.memory_cache[cache_key] = value

    @contextmanager
    def compile_lock(
        self, cache_key: str, *, accept_cached: Callable[[Any], bool] | None = None
    ) -> Iterator[tuple[Any | None, Callable[[Any], None] | None]]:
        existing = self.get(cache_key)
        if existing is not None and (accept_cached is None or accept_cached(existing)):
            yield (existing, None)
            return
        yield (None, lambda value: self.memory_cache.__setitem__(cache_key, value))


def manager(jf: JitFunction) -> JitCacheManager | None:
    """``jf``'s disk cache manager for this call (None: FlyDSL's disk cache is off): a
    :class:`CheckedCache` in place of FlyDSL's, a :class:`ReadOnlyCache` where this process
    cannot write its directory."""
    jf._ensure_cache_manager()
    current = jf.cache_manager
    if current is None or isinstance(current, CheckedCache):
        return current
    writable = can_write(current.cache_dir)
    replacement = (CheckedCache if writable else ReadOnlyCache)(current.cache_dir)
    replacement.memory_cache.update(current.memory_cache)
    jf.cache_manager = replacement
    if not writable:
        log.info("flydsl_runtime: FlyDSL's disk cache %s is read-only here: read without locks", current.cache_dir)
    return replacement
