"""FlyDSL's disk cache where this process cannot write (a shipped directory owned by another
user, a read-only mount).

Contract
--------
:func:`manager` returns the ``JitFunction``'s own cache manager (FlyDSL's
``JitCacheManager``, as ``_ensure_cache_manager`` sets it from ``FLYDSL_RUNTIME_CACHE_DIR``)
where this process can write its directory. Where it cannot, FlyDSL's manager reads
nothing (it takes a shared lock on each artifact's ``.lock`` file, which it opens for
writing, creating it) and a trace fails when it writes its artifact: the manager is then
replaced, on that ``JitFunction`` only, by :class:`ReadOnlyCache`, which reads artifacts the
way FlyDSL reads them but without the lock, and keeps what a trace builds in memory. An
unlocked read is whole: FlyDSL writes an artifact by replacing the file in one rename, so a
reader sees the old file or the new one; and nothing can be written through a directory
this process cannot write. FlyDSL keeps a manager whose directory is still the configured
one, so the replacement lasts until ``FLYDSL_RUNTIME_CACHE_DIR`` changes. Touches only the
``cache_manager`` attribute of the ``JitFunction`` it is given.
"""

from __future__ import annotations

import logging
import pickle
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from flydsl.compiler.jit_function import JitCacheManager, JitFunction

from flydeps.settings import can_write

__all__ = ["ReadOnlyCache", "manager"]

log = logging.getLogger("flydsl_runtime")


class ReadOnlyCache(JitCacheManager):
    """FlyDSL's cache manager for a directory this process cannot write."""

    def get(self, cache_key: str) -> Any | None:
        if cache_key in self.memory_cache:
            self._hits += 1
            return self.memory_cache[cache_key]
        path = self._cache_file(cache_key)
        try:
            with open(path, "rb") as file:
                value = pickle.load(file)
        except FileNotFoundError:
            self._misses += 1
            return None
        except Exception as error:  # what FlyDSL's own get() catches: a damaged file is a miss
            log.warning("flydsl_runtime: FlyDSL artifact %s not read: %s", path, error)
            self._misses += 1
            return None
        self.memory_cache[cache_key] = value
        self._hits += 1
        return value

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
    """``jf``'s disk cache manager for this call (None: FlyDSL's disk cache is off), a
    :class:`ReadOnlyCache` where this process cannot write its directory."""
    jf._ensure_cache_manager()
    current = jf.cache_manager
    if current is None or isinstance(current, ReadOnlyCache) or can_write(current.cache_dir):
        return current
    replacement = ReadOnlyCache(current.cache_dir)
    replacement.memory_cache.update(current.memory_cache)
    jf.cache_manager = replacement
    log.info("flydsl_runtime: FlyDSL's disk cache %s is read-only here: read without locks", current.cache_dir)
    return replacement
