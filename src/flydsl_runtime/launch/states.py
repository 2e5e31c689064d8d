"""A launcher's dependency states: one per owner class, re-taken when its guard fails.

Contract
--------
:class:`DependencyStates` is a base class of :class:`~flydsl_runtime.launch.jit.Launcher`
(the attributes it reads are set by ``Launcher.__init__``). It keeps, per owner class (None
for an unbound call), the :class:`~.records.OwnerState` the key's digest comes from:

* :meth:`~DependencyStates._revalidate` runs when the state's guard fails (or on the first
  call): the first state of an owner is fingerprinted (and, after a reload of the module,
  compared with the predecessor's for the log); a state the launcher already built for
  (an undo, the last :data:`~.records.STATES_KEPT` per owner, ``Launcher._states``) takes
  its key again; any other change is judged (:func:`flydeps.builds.protocol.judge`) and
  follows the drift policy in :meth:`~DependencyStates._drift`.
* :meth:`~DependencyStates._baseline` records a state (and remembers it as built for,
  unless a drift is still undecided).

Nothing here runs on a warm call: only after a failed guard, and on a miss (which adopts a
trace's own writes through :meth:`~DependencyStates._baseline`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from types import MappingProxyType

from flydsl.compiler.jit_function import JitFunction

from flydeps.builds import protocol as build
from flydeps.builds.drift import DriftPolicy, decide
from flydeps.keys.fingerprint import Fingerprint, fingerprint_roots

from ..trace.argsig import ArgSigner
from .records import STATES_KEPT, Drift, OwnerState

__all__ = ["DependencyStates"]

log = logging.getLogger("flydsl_runtime")

_NO_STARTS: Mapping[str, frozenset] = MappingProxyType({})


class DependencyStates:
    """The dependency-state bookkeeping of a launcher (a base class of ``Launcher``)."""

    # Set by Launcher.__init__ (declared here for the type checker only: no class attributes,
    # the C warm path's members of the same names stay the ones found).
    _name: str
    _jf: JitFunction
    _lock: threading.RLock
    _on_drift: DriftPolicy
    _owners: dict[type | None, OwnerState]
    _states: dict[type | None, dict[str, OwnerState]]
    _signer: ArgSigner | None
    _predecessor: dict[type | None, Fingerprint]

    def _ensure_signature(self) -> None:
        """Bind the launcher's signature (defined by ``Launcher``)."""
        raise NotImplementedError

    def _roots(self, owner: type | None) -> list[tuple[object, type | None, str]]:
        """The launcher's function, walked with the owner class of a bound call, so
        ``self.kern`` -> ``KernelFunction`` -> ``self.op`` resolves on the owner's MRO."""
        return [(self._jf.func, owner, "root")]

    def _revalidate(self, owner: type | None, state: OwnerState | None) -> OwnerState:
        """The owner's state after its guard failed (or its first): found again, judged, or new."""
        with self._lock:
            current = self._owners.get(owner)
            if current is not None and current is not state and current.guard.check():
                return current  # another thread already re-validated
            if self._signer is None:
                self._ensure_signature()
            if current is None:
                fp = build.stable(fingerprint_roots, self._roots(owner))
                previous = self._predecessor.pop(owner, None) if self._predecessor else None
                if previous is not None:
                    shown = "; ".join(fp.explain(previous)) or "nothing it depends on changed"
                    log.info("%s: new launcher after a reload of its module: %s", self._name, shown)
                return self._baseline(owner, fp)
            fresh = build.stable(current.fingerprint.refresh)
            earlier = self._states.get(owner, {}).get(fresh.digest)
            if earlier is not None:  # back to a state already built for: its key, no drift to decide
                log.info("%s: back to a dependency state it has built for; its entries serve again", self._name)
                return self._baseline(
                    owner, fresh, digest=earlier.digest, starts=earlier.starts, keyed=earlier.key_fingerprint
                )
            judgement = build.judge(current.fingerprint, fresh, starts=current.starts)
            return self._drift(owner, current, fresh, self._runtime_defaults_kept(judgement))

    def _runtime_defaults_kept(self, judgement: build.Judgement) -> build.Judgement:
        """``judgement`` without the changed defaults of runtime-only parameters (a stream's
        ``fx.Stream(None)`` -> ``fx.Stream(0)``): FlyDSL passes them at launch, never into the
        IR, and the key signs them as arguments (:mod:`.argsig`), so such a change is no
        drift. ADOPT (the key is kept) when nothing else changed."""
        if judgement.verdict is not build.Verdict.DATA or self._signer is None:
            return judgement
        constexpr = set(self._signer._callable_slots)  # Constexpr/Type parameters: in the IR
        root = f"{self._jf.func.__module__}:{self._jf.func.__qualname__}"
        runtime = {f"{root}#default.{n}" for i, n in enumerate(self._signer.names) if i not in constexpr}
        rest = tuple(d for d in judgement.diffs if d.node not in runtime)
        if rest:
            return judgement
        dropped = tuple(d.node for d in judgement.diffs)
        log.info("%s: only runtime-only defaults changed (%s): keyed as arguments", self._name, ", ".join(dropped))
        return build.Judgement(build.Verdict.ADOPT, (), (*judgement.adopted, *dropped))

    def _baseline(
        self,
        owner: type | None,
        fp: Fingerprint,
        digest: str | None = None,
        starts: Mapping[str, frozenset] = _NO_STARTS,
        keyed: Fingerprint | None = None,
        drift: Drift | None = None,
    ) -> OwnerState:
        """The owner's state ``fp``; ``digest`` (with ``keyed``, the fingerprint it was taken
        from) when the key of an earlier state is kept. A state with an undecided ``drift`` is
        not remembered as one built for: coming back to it judges the change again."""
        state = OwnerState(fp, fp.guard(), digest or fp.digest, starts, keyed if digest else None, drift)
        self._owners[owner] = state
        if drift is not None:
            return state
        seen = self._states.setdefault(owner, {})
        seen[fp.digest] = state
        if len(seen) > STATES_KEPT:  # the oldest first (dicts keep insertion order)
            del seen[next(iter(seen))]
        return state

    def _drift(
        self, owner: type | None, current: OwnerState, fresh: Fingerprint, judgement: build.Judgement
    ) -> OwnerState:
        """The one drift policy (:mod:`flydeps.builds.drift`): a kept state keeps its key digest, so
        entries traced before a managed build's write (or, under ``warn``, a data change)
        stay hits; anything else takes the fresh digest, and the next trace is a miss."""
        undone = judgement.verdict is build.Verdict.UNDONE
        if undone or (judgement.verdict is build.Verdict.DATA and self._on_drift == "raise"):
            # FlyDSL's IR decides, per entry, on its next call (Launcher._judge_drift): a new key now
            earlier = current.drift.digests if current.drift is not None else ()
            digests = (current.digest, *earlier)[:STATES_KEPT]
            log.info("%s: %s; each entry is re-traced once to see if its IR changed", self._name, judgement.reasons())
            return self._baseline(owner, fresh, drift=Drift(digests, judgement, raises=not undone))
        if decide(judgement, self._on_drift, self._consumer(owner)):  # raises under on_drift='raise'
            return self._baseline(
                owner, fresh, digest=current.digest, starts=current.starts, keyed=current.key_fingerprint
            )
        return self._baseline(owner, fresh)

    def _consumer(self, owner: type | None) -> str:
        """The launcher as a drift message names it (with the owner class of a bound call)."""
        return self._name + (f" (owner class {owner.__qualname__})" if owner is not None else "")
