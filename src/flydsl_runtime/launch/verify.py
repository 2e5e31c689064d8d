"""Verify mode: re-trace cache hits and compare FlyDSL's IR key (``FLYDEPS_VERIFY``).

Contract
--------
:func:`checked_hit` is called by a :class:`~flydsl_runtime.launch.jit.Launcher` after a key hit,
before it launches, when ``FLYDEPS_VERIFY`` is set (:func:`flydeps.settings.fraction`):

* ``FLYDEPS_VERIFY=1`` (a test suite's safety net): every hit is re-traced; a mismatch raises
  :class:`StaleArtifactError`.
* ``FLYDEPS_VERIFY=<fraction>`` such as ``0.01`` (a production canary against the unknown
  unknowns): that share of hits is re-traced. Which hits is deterministic per entry: the
  n-th hit of an entry is checked when the blake3 digest of the entry's IR key and ``n``,
  read as a number in ``[0, 1)``, is below the fraction, so a process repeats its choices
  and every entry is checked about once per ``1/fraction`` of its hits, the rarely hit ones
  too. A mismatch is logged (ERROR on the ``flydsl_runtime`` logger, the error's message)
  and the entry dropped: this call and later ones trace again, so nothing stale runs.

The check asks FlyDSL to trace the same call again without launching
(``JitFunction._compile_or_execute(..., execute=False)``) and compares the IR key FlyDSL
computes (``_artifact_cache_key``: the traced module text + pipeline + target + env) with
the one recorded when the entry was built. A mismatch means the dependency analysis missed
an input the trace reads -- e.g. a helper reached through a computed ``getattr``, a dynamic
import, or instance state read through ``self``. :class:`StaleArtifactError` names the
entry (its key: dependency digest and argument signatures) and the first differing input
the fingerprint can find. Each checked hit costs a full trace; unchecked hits cost the
general (Python) warm path, not the C one (docs/benchmarks.md).

:func:`traced_ir_key` is the same re-trace as a managed build (:mod:`flydeps.builds.protocol`: what it
writes is its own effect), used by a launcher under ``on_drift='raise'`` to let FlyDSL's IR
decide whether a data change reaches an entry (``Launcher._judge_drift``, :mod:`flydsl_runtime.miss`). FlyDSL compiles
only IR it has not compiled yet: an unchanged IR key costs the trace alone.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from blake3 import blake3

from flydeps.builds import protocol as build
from flydeps.errors import FlydepsError

from .hooks import take_trace_env_reads
from .records import Entry, LauncherView

if TYPE_CHECKING:
    from flydeps.keys.fingerprint import Fingerprint

__all__ = ["StaleArtifactError", "checked_hit", "sampled", "traced_ir_key", "verify_hit"]

log = logging.getLogger("flydsl_runtime")
_SCALE = float(1 << 64)


class StaleArtifactError(FlydepsError, RuntimeError):
    """A cache hit would have run code compiled from different IR than a fresh trace gives."""

    def __init__(
        self, launcher: str, recorded: str, current: str, explanation: tuple[str, ...], entry: str = ""
    ) -> None:
        self.launcher, self.recorded, self.current, self.explanation = launcher, recorded, current, explanation
        self.entry = entry
        why = (
            "; ".join(explanation)
            if explanation
            else (
                "no tracked dependency changed, so the trace read something the analysis cannot see "
                "(a computed getattr, a dynamic import, instance state through self, ...)"
            )
        )
        which = f" ({entry})" if entry else ""
        super().__init__(
            f"FLYDEPS_VERIFY: {launcher} hit a cached artifact{which} built from IR {recorded[:16]}, but re-tracing "
            f"now gives IR {current[:16]}: {why}. Make the dependency visible (reference the helper by name, or "
            "pass it as an fx.Constexpr argument), or call cache_clear() on the launcher after changing it."
        )


def sampled(ir_key: str, hit: int, share: float) -> bool:
    """Whether the ``hit``-th hit of the entry built from ``ir_key`` is checked at ``share``."""
    if share >= 1.0:
        return True
    digest = blake3(f"{ir_key}:{hit}".encode()).digest(8)
    return int.from_bytes(digest, "big") / _SCALE < share


def checked_hit(
    launcher: LauncherView, key: tuple, entry: Entry, bound_self: object, positional: tuple, share: float
) -> bool:
    """Check this hit when :func:`sampled` picks it; False when the entry was stale (then
    logged and dropped: the caller traces). Under ``share`` 1 a stale entry raises."""
    counts = launcher._verify_counts
    hit = counts.get(key, 0) + 1
    counts[key] = hit
    if not sampled(entry.ir_key, hit, share):
        return True
    try:
        verify_hit(launcher, entry, bound_self, positional)
    except StaleArtifactError as error:
        if share >= 1.0:
            raise
        log.error("%s", error)
        with launcher._lock:
            if launcher._entries.get(key) is entry:
                del launcher._entries[key]
        return False
    return True


def _describe(entry: Entry, names: tuple[str, ...]) -> str:
    """The entry for a message: its dependency digest and its argument signatures by name."""
    digest, args = entry.key[0], entry.key[1]
    shown = digest[:12] if isinstance(digest, str) else str(digest)[:24]
    pairs = ", ".join(f"{n}={a!r}" for n, a in zip(names, args)) if names else repr(args)
    return f"entry keyed by dependency state {shown} and arguments {pairs[:300]}"


def verify_hit(launcher: LauncherView, entry: Entry, bound_self: object, positional: tuple) -> None:
    """Re-trace the call and raise :class:`StaleArtifactError` if its IR key moved."""
    jf = launcher._jf
    full = (bound_self, *positional) if bound_self is not None else positional
    with launcher._lock:  # FlyDSL keeps _last_compiled on the JitFunction
        jf._compile_or_execute(full, {}, execute=False)
        current = jf._last_compiled[0]
    if current != entry.ir_key:
        fresh = entry.fingerprint.refresh()
        signer = launcher._signer
        names = signer.names if signer is not None else ()
        raise StaleArtifactError(
            launcher._name, entry.ir_key, current, fresh.explain(entry.fingerprint), _describe(entry, names)
        )


def traced_ir_key(launcher: LauncherView, fp: Fingerprint, bound_self: object, positional: tuple) -> str:
    """FlyDSL's IR key of this call traced now, not launched, as a managed build of ``fp``
    (its own writes recorded, its environment reads forgotten: no entry is made from it)."""
    jf = launcher._jf
    full = (bound_self, *positional) if bound_self is not None else positional
    with launcher._lock:  # FlyDSL keeps _last_compiled on the JitFunction
        start = build.begin(fp)
        try:
            jf._compile_or_execute(full, {}, execute=False)
        finally:
            build.finish(start)
            take_trace_env_reads()
        return str(jf._last_compiled[0])
