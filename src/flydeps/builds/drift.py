"""The one drift policy: what a consumer does when only data it was built with changed.

Contract: shared by :func:`flydeps.cached_factory` and the ``flydsl_runtime`` launchers so
both decide alike and say it alike. A consumer hands :func:`decide` the
:class:`~flydeps.builds.protocol.Judgement` of "baseline vs now" and its ``on_drift`` policy:

* nothing that matters changed, or only data written by flydeps-managed builds
  (:data:`~flydeps.builds.protocol.Verdict.SAME` / ``ADOPT``): keep the build, re-baseline;
* code changed (``CODE``), or data went back to a state before other builds' writes
  (``UNDONE``: what they computed may come from inputs changed since): rebuild, whatever
  the policy (a launcher first compares FlyDSL's IR key, ``flydsl_runtime.launch.jit``);
* a data value changed by someone else (``DATA``): ``"rebuild"``, ``"raise"``
  (:class:`~flydeps.errors.GlobalDriftError` naming the global, its old and new values
  and the consumer; a ``flydsl_runtime`` launcher first re-traces and raises only when
  FlyDSL's IR key changed) or ``"warn"`` (one warning on the ``flydeps`` logger, keep the build
  made with the old value and re-baseline, so it warns once per change).
"""

from __future__ import annotations

import logging
from typing import Literal, cast

from ..errors import GlobalDriftError
from ..keys.fingerprint import NodeDiff
from .protocol import Judgement, Verdict

__all__ = ["DRIFT_POLICIES", "DriftPolicy", "check_policy", "decide", "drift_error"]

log = logging.getLogger("flydeps")

DriftPolicy = Literal["rebuild", "raise", "warn"]
DRIFT_POLICIES: tuple[DriftPolicy, ...] = ("rebuild", "raise", "warn")


def check_policy(value: object, where: str) -> DriftPolicy:
    """``value`` as a policy, or ``ValueError`` naming ``where`` and the choices."""
    if value not in DRIFT_POLICIES:
        raise ValueError(
            f"{where}(on_drift={value!r}): on_drift must be one of {', '.join(DRIFT_POLICIES)}; "
            "'rebuild' rebuilds, 'raise' raises GlobalDriftError, 'warn' logs and keeps the old build"
        )
    return cast(DriftPolicy, value)


def decide(judgement: Judgement, policy: DriftPolicy, consumer: str) -> bool:
    """True: keep the build (re-baseline); False: rebuild. Raises under ``"raise"``."""
    verdict = judgement.verdict
    if verdict is Verdict.SAME or verdict is Verdict.ADOPT:
        return True
    if verdict is Verdict.CODE or verdict is Verdict.UNDONE or policy == "rebuild":
        return False
    if policy == "raise":
        raise drift_error(judgement.diffs[0], consumer)
    log.warning("%s: %s; kept the build made with the old value (on_drift='warn')", consumer, judgement.reasons())
    return True


def drift_error(diff: NodeDiff, consumer: str) -> GlobalDriftError:
    """The error for one changed data node (``module:NAME``), with its old and new values."""
    module, _, name = diff.node.rpartition(":")
    old, new = diff.old or "<unknown>", diff.new or "<unknown>"
    if old == new:  # same summary (a long value changed beyond what the summary shows)
        new = f"{new} (changed in place)"
    return GlobalDriftError(module or "?", name, old, new, consumer=consumer)
