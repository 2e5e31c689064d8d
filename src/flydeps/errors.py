"""Exceptions raised by flydeps and its consumers.

Contract: data only. Every message names the object involved, the old and new value where
there is one, and what the user can do next.
"""

from __future__ import annotations

__all__ = ["FlydepsError", "GlobalDriftError", "DiscoveryError"]


class FlydepsError(Exception):
    """Base class of every error flydeps raises on purpose."""


class DiscoveryError(FlydepsError, TypeError):
    """The object handed to ``discover``/``fingerprint`` cannot be analysed at all."""


class GlobalDriftError(FlydepsError, RuntimeError):
    """A data-valued global read by cached code changed after it was baselined.

    Attributes name the global so callers can report or recover: ``module``, ``name``,
    ``old`` and ``new`` (short, safe descriptions, never the user's ``repr``).
    """

    def __init__(self, module: str, name: str, old: str, new: str, *, consumer: str = "") -> None:
        self.module, self.name, self.old, self.new, self.consumer = module, name, old, new, consumer
        where = f" (read by {consumer})" if consumer else ""
        super().__init__(
            f"global {module}:{name}{where} changed after it was baselined: {old} -> {new}. "
            "Cached compiled code was built with the old value. Restore the value, call "
            "cache_clear() to rebuild, or choose on_drift='rebuild' / 'warn'."
        )
