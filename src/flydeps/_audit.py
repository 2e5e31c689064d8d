"""Function-attribute generation counter for interpreters without function watchers.

Contract: ``generation()`` changes whenever any function's ``__code__``,
``__defaults__`` or ``__kwdefaults__`` is assigned anywhere in the process (CPython
raises the ``object.__setattr__`` audit event for exactly those assignments). Guards on
CPython 3.10/3.11 compare it instead of re-reading every function's attributes per call.

The hook is installed lazily, once, on the first guard (audit hooks cannot be removed).
Its cost is one string comparison per audit event elsewhere in the process. Set
``FLYDEPS_AUDIT_HOOK=0`` to never install it: guards then re-read function attributes
on every check (slower, same answers).
"""

from __future__ import annotations

import os
import sys
import threading

__all__ = ["ENABLED", "generation", "install"]

ENABLED = os.environ.get("FLYDEPS_AUDIT_HOOK", "1") != "0"
_GEN = [0]
_installed = False
_lock = threading.Lock()
_WATCHED_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__"})


def _hook(event: str, args: tuple) -> None:
    if event == "object.__setattr__" and len(args) > 1 and args[1] in _WATCHED_ATTRS:
        _GEN[0] += 1


def install() -> bool:
    """Install the hook (idempotent). False when disabled by ``FLYDEPS_AUDIT_HOOK=0``."""
    global _installed
    if not ENABLED:
        return False
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
    return True


def generation() -> int:
    """The current generation (bumped on every function attribute assignment)."""
    return _GEN[0]
