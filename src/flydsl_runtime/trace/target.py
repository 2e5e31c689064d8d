"""The compile target as a cache-key segment: resolved GPU target plus device id.

Contract
--------
:func:`current_target` returns ``((backend, arch, warp_size), device_id)`` for the call made now.

* The ``GPUTarget`` is FlyDSL's own resolution (``get_backend().target``): the arch selectors
  ``ARCH`` / ``FLYDSL_GPU_ARCH`` / ``HSA_OVERRIDE_GFX_VERSION``, the backend choice
  ``FLYDSL_COMPILE_BACKEND`` and hardware detection (which FlyDSL caches per process). Only the
  *resolved* value is keyed, so ``ARCH=gfx942`` on a build host and detection of gfx942 at
  run time give the same key (seed 003). FlyDSL's resolution costs ~3 µs, so it is memoised on
  the raw values of those four variables, read live with a fast read on every call.
* ``device_id`` is the active device of FlyDSL's device runtime (``hipGetDevice``), kept in
  the in-process key only: code objects are arch-specific, not device-specific, so
  :func:`persistent_target` (anything written to disk or shipped) is the arch alone
  (seed 000 review).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from flydsl.compiler.backends import get_backend

__all__ = [
    "TargetKey",
    "current_device_id",
    "current_target",
    "device_id_reader",
    "persistent_target",
    "resolved_target",
]

TargetKey = tuple[tuple[str, str, int], int]  # ((backend, arch, warp size), device id)

_SELECTORS = ("ARCH", "FLYDSL_GPU_ARCH", "HSA_OVERRIDE_GFX_VERSION", "FLYDSL_COMPILE_BACKEND")

try:
    _DATA = os.environ._data if os.supports_bytes_environ else None  # type: ignore[attr-defined]
    _ENCODED = tuple(os.fsencode(n) for n in _SELECTORS)
except AttributeError:
    _DATA = None


def _selector_values() -> tuple:
    data = _DATA
    if isinstance(data, dict):
        return tuple(map(data.get, _ENCODED))
    return tuple(map(os.environ.get, _SELECTORS))


# selector values -> (backend, arch, warp size): a plain tuple hashes in C, a GPUTarget in Python.
_resolved: dict[tuple, tuple[str, str, int]] = {}
_device_id: Callable[[], int] | None = None


def _resolve(selectors: tuple) -> tuple[str, str, int]:
    target = get_backend().target
    if len(_resolved) > 64:
        _resolved.clear()
    resolved = _resolved[selectors] = (target.backend, target.arch, target.warp_size)
    return resolved


def device_id_reader() -> Callable[[], int]:
    """FlyDSL's own reader of the active device (``hipGetDevice``), bound once: a warm call
    calls it directly, one call, live every time."""
    global _device_id
    if _device_id is None:
        from flydsl.runtime.device_runtime import get_device_runtime

        _device_id = get_device_runtime().current_device_id
    return _device_id


def _current_device_id() -> int:
    return device_id_reader()()


def resolved_target() -> tuple[str, str, int]:
    """``(backend, arch, warp size)`` of FlyDSL's resolved GPUTarget: a function of the
    environment alone (the selectors, and hardware detection FlyDSL caches per process)."""
    selectors = _selector_values()
    target = _resolved.get(selectors)
    if target is None:
        target = _resolve(selectors)
    return target


def current_device_id() -> int:
    """The active device of FlyDSL's device runtime (in-process keys only)."""
    return _current_device_id()


def current_target() -> TargetKey:
    """``((backend, arch, warp size) of the resolved GPUTarget, active device id)``."""
    return (resolved_target(), _current_device_id())


def persistent_target(key: TargetKey) -> tuple[str, str, int]:
    """The part of a target key that may be persisted: backend, arch, warp size; no device."""
    return key[0]
