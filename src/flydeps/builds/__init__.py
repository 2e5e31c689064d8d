"""Builds: running a user's build under a key, and the consumer flydeps ships.

Contract: :mod:`.protocol` is the build protocol every consumer follows (snapshot before,
compare after, adopt only the build's own writes, :mod:`.writes`); :mod:`.drift` the one
policy when only data changed (raise, rebuild, warn); :mod:`.logswitch` the
``FLYDEPS_LOG`` switch for rebuild reasons on stderr. :mod:`.factory` is
``cached_factory``, the drop-in ``functools.lru_cache`` (its hit path in C,
``builds/_fastcache.c``, reads the watchers' capsules). flydsl_runtime's launcher is the other
consumer of this package.
"""
