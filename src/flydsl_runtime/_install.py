"""``install()`` / ``uninstall()``: give code that cannot be edited the dependency-aware JIT.

Contract
--------
:func:`install` replaces ``jit`` and ``compile`` on the ``flydsl.compiler`` module object with
the facade's (:mod:`flydsl_runtime.flyc`), so a kernel module that does
``import flydsl.compiler as flyc`` and decorates with ``@flyc.jit`` *after* ``install()`` gets
:class:`~flydsl_runtime.launch.jit.Launcher` objects without a single edit. ``kernel`` stays
FlyDSL's. Names already imported by value (``from flydsl.compiler import jit`` executed
before ``install()``) keep FlyDSL's objects: install before importing kernel modules.

Both functions are idempotent and thread-safe; :func:`uninstall` restores exactly the
objects :func:`installed` replaced. :func:`installed` tells whether the patch is active.
"""

from __future__ import annotations

import threading

import flydsl.compiler as _flydsl_compiler

from . import flyc

__all__ = ["install", "installed", "uninstall"]

_PATCHED = ("jit", "compile")
_lock = threading.Lock()
_originals: dict[str, object] = {}


def install() -> None:
    """Patch ``flydsl.compiler.jit`` / ``.compile`` in place (no-op when already installed)."""
    with _lock:
        if _originals:
            return
        for name in _PATCHED:
            _originals[name] = getattr(_flydsl_compiler, name)
            setattr(_flydsl_compiler, name, getattr(flyc, name))


def uninstall() -> None:
    """Restore FlyDSL's own ``jit`` / ``compile`` (no-op when not installed)."""
    with _lock:
        for name, original in _originals.items():
            setattr(_flydsl_compiler, name, original)
        _originals.clear()


def installed() -> bool:
    return bool(_originals)
