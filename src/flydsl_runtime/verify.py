"""Verify mode (``FLYDEPS_VERIFY=1``): re-trace on every hit and compare FlyDSL's IR key.

Contract
--------
:func:`verify_hit` is called by a :class:`~flydsl_runtime.jit.Launcher` after a key hit,
before it launches. It asks FlyDSL to trace the same call again without launching
(``JitFunction._compile_or_execute(..., execute=False)``) and compares the IR key FlyDSL
computes (``_artifact_cache_key``: the traced module text + pipeline + target + env) with
the one recorded when the entry was built. A mismatch means the dependency analysis missed
an input the trace reads -- e.g. a helper reached through a computed ``getattr``, a dynamic
import, or instance state read through ``self`` -- and raises :class:`StaleArtifactError`
with the recorded and current keys and what the fingerprint can say about the difference.

This is a safety net for a test suite, not a production mode: every hit costs a full trace.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from flydeps.errors import FlydepsError

if TYPE_CHECKING:
    from .jit import Entry, Launcher

__all__ = ["StaleArtifactError", "verify_hit"]


class StaleArtifactError(FlydepsError, RuntimeError):
    """A cache hit would have run code compiled from different IR than a fresh trace gives."""

    def __init__(self, launcher: str, recorded: str, current: str, explanation: tuple[str, ...]) -> None:
        self.launcher, self.recorded, self.current, self.explanation = launcher, recorded, current, explanation
        why = (
            "; ".join(explanation)
            if explanation
            else (
                "no tracked dependency changed, so the trace read something the analysis cannot see "
                "(a computed getattr, a dynamic import, instance state through self, ...)"
            )
        )
        super().__init__(
            f"FLYDEPS_VERIFY: {launcher} hit a cached artifact built from IR {recorded[:16]}, but re-tracing now "
            f"gives IR {current[:16]}: {why}. Make the dependency visible (reference the helper by name, or "
            "pass it as an fx.Constexpr argument), or call cache_clear() on the launcher after changing it."
        )


def verify_hit(launcher: Launcher, entry: Entry, bound_self: object, positional: tuple) -> None:
    """Re-trace the call and raise :class:`StaleArtifactError` if its IR key moved."""
    jf = launcher.jit_function
    full = (bound_self, *positional) if bound_self is not None else positional
    with launcher._lock:  # FlyDSL keeps _last_compiled on the JitFunction
        jf._compile_or_execute(full, {}, execute=False)
        current = jf._last_compiled[0]
    if current != entry.ir_key:
        fresh = entry.fingerprint.refresh()
        raise StaleArtifactError(launcher._name, entry.ir_key, current, fresh.explain(entry.fingerprint))
