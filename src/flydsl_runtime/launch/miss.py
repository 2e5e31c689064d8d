"""A launcher's miss path: a call whose key has no usable entry, in named steps.

Contract
--------
:class:`MissPath` is a base class of :class:`~flydsl_runtime.launch.jit.Launcher` (after
:class:`~.states.DependencyStates`; the attributes it reads are set by ``Launcher.__init__``).
``Launcher._call`` and ``Launcher.compile`` call :meth:`MissPath._miss`, under the launcher's
lock, which runs these steps in this order (each one method, named here as in the code):

1. :meth:`~MissPath._built_meanwhile` -- another thread built the entry while this one
   waited for the lock: a hit.
2. :meth:`~MissPath._kept_through_drift` -- data changed under ``on_drift='raise'`` (or came
   back, ``UNDONE``): FlyDSL's IR decides (:meth:`~MissPath._judge_drift`: a re-trace, no
   launch); the same IR key keeps the entry under the new state (a hit, and its row,
   :meth:`~MissPath._persist_kept`), another raises ``GlobalDriftError`` (or, undone, misses).
3. :meth:`~MissPath._explain_miss` -- why it missed (:mod:`flydsl_runtime.trace.explain`),
   logged from the second miss on.
4. :meth:`~MissPath._look_up_row` -- the call's persistent key (:meth:`~MissPath._persistent_key`,
   or why it has none) and the index's row for it (:mod:`flydsl_runtime.persist.index`).
5. :meth:`~MissPath._load_row` -- a row is served by FlyDSL's artifact from its disk cache, no
   trace (not under ``FLYDEPS_VERIFY=1``, nor for an entry the verify canary found stale).
6. :meth:`~MissPath._check_strict` -- ``FLYDEPS_AOT=strict``: a miss the index could not serve
   raises (:mod:`flydsl_runtime.persist.strict`).
7. :meth:`~MissPath._trace` -- FlyDSL traces and compiles (and launches, unless
   ``COMPILE_ONLY``) as a managed build (:mod:`flydeps.builds.protocol`), the environment
   reads recorded (:mod:`.hooks`).
8. :meth:`~MissPath._check_row_ir` -- under ``FLYDEPS_VERIFY=1`` a row's IR must be the
   trace's (:class:`~.verify.StaleArtifactError`).
9. :meth:`~MissPath._judge_trace` -- what changed while it traced: its own writes are adopted
   (:meth:`~MissPath._adopt_own_writes`, the key kept); anything else, or an environment
   variable another thread wrote, and the trace is returned but not kept
   (:meth:`~MissPath._drop_trace`).
10. :meth:`~MissPath._instance_guards` -- what a hit must re-check of an identity-keyed bound
    instance, and why no row will serve the call, if so.
11. :meth:`~MissPath._store` -- the entry, keyed in process, counted as a miss.
12. :meth:`~MissPath._persist` -- the row for it in the persistent index, when one can serve
    another process (FlyDSL wrote the artifact, the key names everything).

``_miss`` returns ``(CompiledFunction or None, already launched)``. Nothing here runs on a
hit; the warm path (``Launcher.__call__``, C or Python) never reaches this module. Before it,
``Launcher._call`` and ``Launcher.compile`` ask :meth:`MissPath._rearmed` about an entry whose
key matched but one of whose extra guards (a function passed as a compile-time value, a
bound instance keyed by identity) failed: each fingerprint taken again with the digest the
entry was built under re-arms it (a hit, as the launcher's own state is found again after a
reload that changed nothing); any other digest leaves the call to ``_miss``.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import NamedTuple

from flydsl.compiler.backends import get_backend
from flydsl.compiler.jit_function import CompiledFunction

from flydeps import Guard, fingerprint, settings
from flydeps.builds import protocol as build
from flydeps.builds.drift import drift_error
from flydeps.graph import NodeKind
from flydeps.keys.fingerprint import Fingerprint, NodeDiff
from flydeps.observe.environ import EnvReads
from flydeps.observe.environ import write_mark as environ_write_mark
from flydeps.observe.environ import written_by_others as environ_written_by_others

from ..persist import diskcache, index, manifest
from ..persist import strict as aot
from ..trace import explain
from ..trace.argsig import ArgSigner
from .hooks import at_trace_end, take_trace_env_reads
from .records import Entry, OwnerState, described, entry_env_reads, usable
from .states import DependencyStates
from .verify import StaleArtifactError, traced_ir_key

__all__ = ["MissPath"]


def _guards(extra: tuple[tuple[Fingerprint, Guard], ...]) -> tuple[Guard, ...]:
    return tuple(guard for _state, guard in extra)


def _states(extra: tuple[tuple[Fingerprint, Guard], ...]) -> tuple[Fingerprint, ...]:
    return tuple(state for state, _guard in extra)


log = logging.getLogger("flydsl_runtime")

# Bound instances whose state fingerprint a launcher keeps (MissPath._instance_state).
_INSTANCES_KEPT = 16


class _Persistent(NamedTuple):
    """A call's key in the persistent index: ``key`` (None: not persistable, ``why_not``),
    the key ``described`` as the index spells it (a bound instance by its state), and the
    instance's fingerprint when it is keyed by its state."""

    key: str | None
    why_not: str
    described: tuple = ()
    self_fp: Fingerprint | None = None
    instance: object = None  # the bound instance keyed by its state
    keyed: Fingerprint | None = None  # the dependency state the key stands for (its row's nodes)

    @property
    def state(self) -> dict[str, list[str]] | None:
        """The instance's attributes for the row's explanation: ``{name: [digest, summary]}``."""
        if self.self_fp is None:
            return None
        return {name: [digest, summary] for name, (digest, summary, _i) in _instance_state(self.instance).items()}


class _Traced(NamedTuple):
    """What :meth:`MissPath._trace` got: FlyDSL's result and IR key, and the build's start."""

    compiled: CompiledFunction | None
    ir_key: str
    start: build.BuildStart
    env_mark: int  # flydeps.observe.environ.write_mark() before the trace
    # The dependency state and the identity-keyed bound instance's (fingerprint, guard) as
    # the trace ended (before FlyDSL compiled it); None where no trace ran (a cache hit
    # inside FlyDSL) or the hook did not run: then taken after the call.
    ended: tuple[Fingerprint, tuple[Fingerprint, Guard] | None] | None = None


class MissPath(DependencyStates):
    """The miss path of a launcher (a base class of ``Launcher``): :meth:`_miss` and its steps."""

    # Set by Launcher.__init__ (declared for the type checker only, see DependencyStates).
    _entries: dict[tuple, Entry]
    _last: dict[type | None, Entry]
    _hits: int
    _misses: int
    _verify_counts: dict[tuple, int]
    _instances: dict[int, tuple[object, Fingerprint, Guard]]

    def _miss(
        self,
        owner: type | None,
        state: OwnerState,
        bound_self: object,
        positional: tuple,
        key: tuple,
        compile_only: bool,
        stale: bool = False,
    ) -> tuple[CompiledFunction | None, bool]:
        """Trace + compile through FlyDSL; returns (CompiledFunction or None, already launched).
        ``stale``: the verify canary found this key's entry stale, so its persistent row (same
        key, same IR) is not loaded either: the trace replaces it. The steps are listed in
        the module docstring, in this order."""
        with self._lock:  # FlyDSL keeps per-call state (_last_compiled) on the JitFunction
            served = self._built_meanwhile(key, compile_only)
            if served is None:
                served = self._kept_through_drift(owner, state, bound_self, positional, key, compile_only)
            if served is not None:
                self._hits += 1
                return served.compiled, False
            signer = self._signer
            assert signer is not None, "_refresh_binder runs before the first key is made"
            self._explain_miss(owner, state, key, signer)
            # (fingerprint, guard) of each function passed as a compile-time value
            extra = tuple((fp, fp.guard()) for fp in map(fingerprint, signer.callables(positional)))
            full = (bound_self, *positional) if bound_self is not None else positional
            spelled = described(key)
            strict = aot.strict()  # FLYDEPS_AOT=strict: a miss the index cannot serve is an error
            persistent, row = self._look_up_row(spelled, bound_self, state)
            # FLYDEPS_VERIFY=1: rows are traced and compared, never loaded; a fraction (the
            # production canary) checks hits only, and rows load as usual
            verifying = settings.fraction("FLYDEPS_VERIFY", 0.0) >= 1.0
            if row is not None and not verifying and not stale:
                loaded = self._load_row(
                    owner, state, key, spelled, row, persistent, extra, bound_self, positional, compile_only
                )
                if loaded is not None:
                    return loaded[0], False
            if strict:
                self._check_strict(persistent, row, verifying, signer)
            traced = self._trace(state, full, self._pinned(key, bound_self))
            self._check_row_ir(row, traced.ir_key, verifying)
            after, judgement, reads = self._judge_trace(state, traced)
            if judgement.verdict is not build.Verdict.SAME and judgement.verdict is not build.Verdict.ADOPT:
                return self._drop_trace(owner, state, after, judgement, traced.compiled)
            state = self._adopt_own_writes(owner, state, traced, after, judgement)
            ended = traced.ended[1] if traced.ended is not None else None
            extra, pinned, unstored = self._instance_guards(key, bound_self, extra, persistent.self_fp, ended)
            entry = Entry(
                spelled,
                traced.compiled,
                traced.ir_key,
                state.fingerprint,
                _guards(extra),
                pinned,
                reads,
                _states(extra),
            )
            self._store(owner, key, entry)
            manifest.note_call(self, bound_self, positional, entry)  # FLYDEPS_RECORD: the first call of this key here
            self._persist(entry, persistent, row, unstored, signer)
        compiled = traced.compiled
        launched = compiled is not None and compiled._call_state is not None
        return compiled, launched

    # --- 0: an entry whose extra guards failed ----------------------------------------

    def _rearmed(self, owner: type | None, key: tuple, entry: Entry) -> tuple[Entry, bool]:
        """``(entry, whether a guard still fails)`` for ``entry`` (found under ``key``), one of
        whose extra guards failed: each failed guard's fingerprint is taken again from the
        same live object (the function passed, the pinned instance: the key names it by
        identity, so it is the object this call passed); where every one has the digest the
        entry was built under, the entry is kept with fresh guards (a reload of a helper
        module the instance reaches that left its code the same, an attribute rebound to an
        equal value: what the trace read holds as it was). Any other digest: the entry as it
        was, still failing (the call misses; the miss explains which guard)."""
        states = entry.extra_states
        if len(states) != len(entry.extra_guards):
            return entry, True
        with self._lock:
            current = self._entries.get(key)
            if current is not None and current is not entry:  # another thread re-armed or replaced it
                return current, not all(g.check() for g in current.extra_guards)
            guards, fresh = list(entry.extra_guards), list(states)
            for i, (state, guard) in enumerate(zip(states, entry.extra_guards)):
                if guard.check():
                    continue
                again = build.stable(state.refresh)
                if again.digest != state.digest:
                    return entry, True
                fresh[i], guards[i] = again, again.guard()
            rearmed = dataclasses.replace(entry, extra_guards=tuple(guards), extra_states=tuple(fresh))
            if current is entry:
                self._entries[key] = rearmed
            if self._last.get(owner) is entry:
                self._last[owner] = rearmed
        log.info("%s: what its entry's extra guards watch was rebound to the same state; it serves again", self._name)
        return rearmed, False

    # --- 1-2: served after all ------------------------------------------------------

    def _built_meanwhile(self, key: tuple, compile_only: bool) -> Entry | None:
        """The usable entry another thread built for ``key`` while this one waited, if any."""
        entry = self._entries.get(key)
        return entry if entry is not None and usable(entry, compile_only) else None

    def _kept_through_drift(
        self,
        owner: type | None,
        state: OwnerState,
        bound_self: object,
        positional: tuple,
        key: tuple,
        compile_only: bool,
    ) -> Entry | None:
        """The usable entry an undecided drift of the current ``state`` kept (:meth:`_judge_drift`)."""
        if state.drift is None or self._owners.get(owner) is not state:
            return None
        entry = self._judge_drift(owner, state, bound_self, positional, key)
        return entry if entry is not None and usable(entry, compile_only) else None

    def _judge_drift(
        self, owner: type | None, state: OwnerState, bound_self: object, positional: tuple, key: tuple
    ) -> Entry | None:
        """Under ``on_drift='raise'``, after a data change (``state.drift``): the entry this call
        had before the change, re-keyed under the new state when a re-trace (no launch) gives
        FlyDSL the same IR key -- the change does not reach this IR; ``GlobalDriftError`` when
        it does (``UNDONE``: None, the call traces as a miss). None when no earlier state has an
        entry for this call (it is traced as a miss)."""
        drift = state.drift
        assert drift is not None
        old = next((e for d in drift.digests if (e := self._entries.get(_with_digest(key, d))) is not None), None)
        if old is None:
            return None
        if key not in drift.reached:
            if traced_ir_key(self, state.fingerprint, bound_self, positional) == old.ir_key:
                log.info(
                    "%s: %s, but a re-trace gives the same IR (%s): the entry is kept",
                    self._name,
                    drift.judgement.reasons(),
                    old.ir_key[:16],
                )
                entry = dataclasses.replace(old, key=described(key), fingerprint=state.fingerprint)
                self._entries[key] = entry
                self._last[owner] = entry
                self._persist_kept(state, entry)
                return entry
            drift.reached.add(key)
        if not drift.raises:
            return None
        raise drift_error(drift.judgement.diffs[0], self._consumer(owner))

    def _persist_kept(self, state: OwnerState, entry: Entry) -> None:
        """A row for an entry kept under the new state by :meth:`_judge_drift`, keyed by that
        state, so a new process started in it loads the artifact instead of tracing. Not for
        entries a row cannot name (a function argument, a bound instance)."""
        if entry.extra_guards or entry.key[5] is not None or not self._on_disk(entry.ir_key):
            return
        persistent = self._persistent_key(entry.key, None, state)
        pkey, signer = persistent.key, self._signer
        if pkey is None or persistent.keyed is None or signer is None:
            return
        row = index.lookup(pkey)
        if row is not None and row.ir_key == entry.ir_key:
            return
        detail = index.key_parts(self._name, persistent.described, signer.names, persistent.keyed, persistent.state)
        index.record(pkey, self._name, entry.ir_key, entry.env_reads, detail, replace=row is not None)

    # --- 3-6: explain, then the persistent index ------------------------------------

    def _explain_miss(self, owner: type | None, state: OwnerState, key: tuple, signer: ArgSigner) -> None:
        """Why this call missed, against the owner's last entry; logged from the second miss on."""
        previous = self._last.get(owner)
        reasons = explain.describe_miss(
            self._name,
            signer.names,
            previous.key if previous else None,
            described(key),
            previous.fingerprint if previous else None,
            state.fingerprint,
            owner,
        )
        if previous is not None or self._misses:
            explain.log_recompile(self._name, reasons)

    def _look_up_row(
        self, spelled: tuple, bound_self: object, state: OwnerState
    ) -> tuple[_Persistent, index.Row | None]:
        """The call's persistent key (or why it has none) and the index's row for it, if any."""
        persistent = self._persistent_key(spelled, bound_self, state)
        row = index.lookup(persistent.key) if persistent.key is not None else None
        return persistent, row

    def _load_row(
        self,
        owner: type | None,
        state: OwnerState,
        key: tuple,
        spelled: tuple,
        row: index.Row,
        persistent: _Persistent,
        extra: tuple[tuple[Fingerprint, Guard], ...],
        bound_self: object,
        positional: tuple,
        compile_only: bool,
    ) -> tuple[CompiledFunction | None] | None:
        """The row served by FlyDSL's artifact, no trace, stored as the call's entry (the state
        stays as validated): ``(CompiledFunction or None under COMPILE_ONLY,)``; None when the
        artifact is missing or unreadable (the call traces)."""
        loaded = self._load(row, bound_self, positional, compile_only)
        if loaded is None:
            return None
        # An instance keyed by its state in the row, by identity here: its state,
        # as the row's key read it, must still hold on a hit (as after a trace).
        self_fp = persistent.self_fp
        guarded = (*extra, self._instance_state(bound_self, taken=self_fp)) if self_fp is not None else extra
        pinned_self = bound_self if self_fp is not None else None
        entry = Entry(
            spelled,
            loaded[0],
            row.ir_key,
            state.fingerprint,
            _guards(guarded),
            pinned_self,
            EnvReads(row.env_reads),
            _states(guarded),
        )
        self._store(owner, key, entry)
        manifest.note_call(self, bound_self, positional, entry)  # FLYDEPS_RECORD: the first call of this key here
        log.info("%s: loaded from the persistent index, no trace (IR %s)", self._name, row.ir_key[:16])
        return loaded

    def _check_strict(self, persistent: _Persistent, row: index.Row | None, verifying: bool, signer: ArgSigner) -> None:
        """Under ``FLYDEPS_AOT=strict``: raise the miss the index could not serve (a row under
        ``FLYDEPS_VERIFY=1`` is traced and compared instead)."""
        if row is not None and verifying:
            return
        pkey = persistent.key
        parts = (
            index.key_parts(self._name, persistent.described, signer.names, persistent.keyed, persistent.state)
            if pkey and persistent.keyed is not None
            else None
        )
        raise aot.miss_error(self._name, parts, persistent.why_not, key=pkey)

    # --- 7-9: trace, then judge it ---------------------------------------------------

    def _trace(self, state: OwnerState, full: tuple, pinned: object = None) -> _Traced:
        """FlyDSL's trace and compile (and launch, unless COMPILE_ONLY) of the call, as a managed
        build of ``state`` with the environment's writes by other threads marked. The state
        the trace ended in (and ``pinned``'s, an identity-keyed bound instance) is taken when
        FlyDSL's trace returns (:func:`.hooks.at_trace_end`), before it compiles: a change
        another thread makes during the compile is then one the next call's guard sees, not
        one adopted as the trace's own."""
        diskcache.manager(self._jf)  # where this process cannot write: read-only, kept in memory
        env_mark = environ_write_mark()  # env variables other threads write while it traces
        ended: list[tuple[Fingerprint, tuple[Fingerprint, Guard] | None]] = []

        def at_end() -> None:
            after = build.stable(state.fingerprint.refresh)
            ended.append((after, self._instance_state(pinned) if pinned is not None else None))

        start = build.begin(state.fingerprint)  # the build protocol: see flydeps.builds.protocol
        at_trace_end(at_end)
        try:
            compiled = self._jf._compile_or_execute(full, {}, execute=True, return_compiled=True)
        except Exception as error:
            _note_linker(error)
            raise
        finally:  # a trace that failed after writing a memo wrote it all the same
            at_trace_end(None)
            build.finish(start)
        return _Traced(compiled, self._jf._last_compiled[0], start, env_mark, ended[0] if ended else None)

    def _check_row_ir(self, row: index.Row | None, ir_key: str, verifying: bool) -> None:
        """Under ``FLYDEPS_VERIFY=1``: the row's IR must be the one the trace gave."""
        if row is not None and verifying and row.ir_key != ir_key:
            raise StaleArtifactError(self._name, row.ir_key, ir_key, ("the persistent index row's IR differs",))

    def _judge_trace(self, state: OwnerState, traced: _Traced) -> tuple[Fingerprint, build.Judgement, EnvReads]:
        """The state after the trace, the verdict on what changed while it ran (its own writes
        adopted; another thread's write of an env variable it read: RACED) and its env reads."""
        after = traced.ended[0] if traced.ended is not None else build.stable(state.fingerprint.refresh)
        judgement = build.conclude(traced.start, after)  # its own writes (memos, FlyDSL's class caches) adopted
        reads = entry_env_reads()
        return after, _env_raced(judgement, traced.env_mark, reads), reads

    def _drop_trace(
        self,
        owner: type | None,
        state: OwnerState,
        after: Fingerprint,
        judgement: build.Judgement,
        compiled: CompiledFunction | None,
    ) -> tuple[CompiledFunction | None, bool]:
        """What the trace read changed while it ran (not by its own writes): this caller, who
        started before the change, gets the result; nothing is kept, and the next call's guard
        fails and follows on_drift or retraces."""
        log.info("%s: trace not kept, while it ran: %s", self._name, judgement.reasons())
        take_trace_env_reads()  # forget them with the trace
        index.note_trace(self._name, f"not kept, while it traced: {judgement.reasons()}")
        if state.guard.check():
            # What changed is nothing the guard watches (a module the trace imported
            # was unresolved before it): without a new baseline every later call would
            # trace and be judged against the same old state. The fresh digest keys
            # the next call, which traces once more and is kept.
            self._baseline(owner, after)
        self._misses += 1
        return compiled, compiled is not None and compiled._call_state is not None

    def _adopt_own_writes(
        self, owner: type | None, state: OwnerState, traced: _Traced, after: Fingerprint, judgement: build.Judgement
    ) -> OwnerState:
        """The state the entry is kept under: ``after`` under the same key digest when the trace
        wrote what it read (ADOPT), else ``state`` as validated."""
        if judgement.verdict is not build.Verdict.ADOPT:
            return state
        return self._baseline(
            owner,
            after,
            digest=state.digest,
            starts=build.start_states(traced.start, state.starts),
            keyed=state.key_fingerprint,
        )

    # --- 10-12: keep the entry --------------------------------------------------------

    def _instance_guards(
        self,
        key: tuple,
        bound_self: object,
        extra: tuple[tuple[Fingerprint, Guard], ...],
        self_fp: Fingerprint | None,
        ended: tuple[Fingerprint, Guard] | None = None,
    ) -> tuple[tuple[tuple[Fingerprint, Guard], ...], object, str | None]:
        """``(guards a hit re-checks, the instance pinned by identity or None, why no row will
        serve this call or None)``: an identity-keyed bound instance's state as the trace
        ended (``ended``, else taken now) is guarded too; a function passed as an argument has
        no cross-process name."""
        pinned = self._pinned(key, bound_self)
        unstored = "a function passed as a compile-time argument has no cross-process name" if extra else None
        if pinned is not None:
            # Keyed by identity: what the trace read of the instance's own state (its
            # attributes, as they stood when the trace ended) must still hold on a hit.
            after_self, after_guard = ended or self._instance_state(pinned)  # walked again if the trace wrote to it
            extra = (*extra, (after_self, after_guard))
            if self_fp is not None and after_self.digest != self_fp.digest:
                # The row would be keyed by the state before the trace; a process that
                # loads it would not have the trace's writes to the instance.
                log.info("%s: not persisted, the trace changed the bound instance's state", self._name)
                unstored = "its trace changed the bound instance's state, which the row's key covers"
        return extra, pinned, unstored

    @staticmethod
    def _pinned(key: tuple, bound_self: object) -> object:
        """The bound instance a call's entries are keyed by by identity (its class has no
        ``__cache_signature__``), or None."""
        return bound_self if key[5] is not None and not hasattr(type(bound_self), "__cache_signature__") else None

    def _store(self, owner: type | None, key: tuple, entry: Entry) -> None:
        """Keep ``entry`` under ``key`` (the owner's last entry too) and count the miss."""
        self._entries[key] = entry
        self._last[owner] = entry
        self._misses += 1

    def _persist(
        self, entry: Entry, persistent: _Persistent, row: index.Row | None, unstored: str | None, signer: ArgSigner
    ) -> None:
        """Note the trace in the index's statistics and record its row when one can serve another
        process (replacing a row whose artifact was gone and whose IR differs)."""
        pkey, ir_key = persistent.key, entry.ir_key
        if unstored is None and pkey is None:
            unstored = persistent.why_not
        if unstored is None and not self._on_disk(ir_key):
            unstored = "FlyDSL did not write its artifact to its disk cache"
        index.note_trace(self._name, unstored)
        keyed = persistent.keyed  # set wherever the persistent key is
        if unstored is None and pkey is not None and keyed is not None and (row is None or row.ir_key != ir_key):
            if row is not None:  # its artifact was gone, and the trace gives other IR for the same key
                log.warning(
                    "%s: the persistent index row of this call named IR %s, a fresh trace gives %s: "
                    "the trace read something its key does not cover (docs/guarantees.md, Limits); "
                    "the row is replaced",
                    self._name,
                    row.ir_key[:16],
                    ir_key[:16],
                )
            detail = index.key_parts(  # what the key stands for (not what its own traces wrote)
                self._name, persistent.described, signer.names, keyed, persistent.state
            )
            index.record(pkey, self._name, ir_key, entry.env_reads, detail, replace=row is not None)

    # --- the persistent index: key, artifact ---------------------------------------

    def _persistent_key(self, described: tuple, bound_self: object, state: OwnerState) -> _Persistent:
        """The call's key in the persistent index (``key`` None: ``why_not``).

        The dependency state is the one the in-process key stands for (``state.key_fingerprint``):
        a memo or registry is keyed by its content, as this process holds it (a process whose
        earlier traces filled it finds rows of processes in that same state; a build of many
        specializations runs each in the state a new process has: :mod:`flydsl_runtime.aot.build`). A bound
        instance whose class has no ``__cache_signature__`` is keyed by identity in this
        process; across processes by its state: the fingerprint of the instance (its
        attributes by value, what they reach), taken now, before any trace."""
        if not index.enabled():
            return _Persistent(None, "the index is off (FLYDEPS_INDEX=0 or FLYDSL_RUNTIME_ENABLE_CACHE=0)")
        fp = state.fingerprint
        if fp.identified:
            return _Persistent(None, _identified_reason(fp.identified))
        keyed = state.key_fingerprint  # its digest is described[0] (or source positions: not persisted)
        self_fp = None
        if described[5] is not None and not hasattr(type(bound_self), "__cache_signature__"):
            self_fp = self._instance_state(bound_self)[0]
            if self_fp.identified:
                return _Persistent(None, _identified_reason(_identified_attributes(bound_self)))
            described = (*described[:5], (type(bound_self), f"state {self_fp.digest}"))
        key, why_not = index.key_or_reason(self._name, described)
        return _Persistent(key, why_not, described, self_fp, bound_self if self_fp is not None else None, keyed)

    def _instance_state(self, instance: object, taken: Fingerprint | None = None) -> tuple[Fingerprint, Guard]:
        """The fingerprint of a bound ``instance`` keyed by its state, and its guard: taken
        once, then reused while the guard holds (the same identity checks a warm call makes
        of a launcher's own state: any attribute rebound, any container within the snapshot
        bound edited in place, its class swapped or edited fails it, and it is taken again).
        A serving process calling an instance's launcher with many specializations, and the
        one-probe-per-pair of ``flydeps aot build``, walk the instance once, not per miss.
        The last :data:`_INSTANCES_KEPT` instances are kept (alive: their entries pin them
        anyway). ``taken``: the fingerprint this call took of it (the persistent key's), whose
        guard is reused unchecked: its first check, on the next call, compares every binding
        with what that fingerprint saw (a new process's first call does not generate it)."""
        kept = self._instances.get(id(instance))
        if kept is not None and kept[0] is instance and (kept[1] is taken or kept[2].check()):
            return kept[1], kept[2]
        state = fingerprint(instance)
        guard = state.guard()
        self._instances.pop(id(instance), None)
        if len(self._instances) >= _INSTANCES_KEPT:
            del self._instances[next(iter(self._instances))]  # the oldest
        self._instances[id(instance)] = (instance, state, guard)
        return state, guard

    def _on_disk(self, ir_key: str) -> bool:
        """FlyDSL wrote the artifact of ``ir_key`` to its disk cache (what a row may point to)."""
        manager = self._jf.cache_manager
        artifact = self._jf._mem_cache.get(ir_key)
        if manager is None or artifact is None or getattr(artifact, "_ktrace_traced", False):
            return False
        # The file, not the manager's memory (a read-only cache keeps a trace's artifact there);
        # disk_key also remembers the toolchain key in the index.
        return bool(manager._cache_file(index.disk_key(ir_key)).exists())

    def _load(
        self, row: index.Row, bound_self: object, positional: tuple, compile_only: bool
    ) -> tuple[CompiledFunction | None] | None:
        """FlyDSL's artifact of a persistent row, read as :func:`flydsl_runtime.persist.diskcache.load` reads it, made
        into its ``CompiledFunction`` for this call's arguments (``(None,)`` under
        COMPILE_ONLY); None (a miss, noted) when the artifact is missing or unreadable."""
        jf = self._jf
        manager = diskcache.manager(jf)
        artifact = diskcache.load(manager, index.disk_key(row.ir_key)) if manager is not None else None
        if artifact is None or getattr(artifact, "_ktrace_traced", False):
            log.info("%s: persistent index row without a usable FlyDSL artifact, tracing", self._name)
            return None
        jf._mem_cache[row.ir_key] = artifact
        jf._last_compiled = (row.ir_key, artifact)
        if compile_only:
            return (None,)
        jf._backend_target = get_backend().target
        _self, args = jf._split_self((bound_self, *positional) if bound_self is not None else positional)
        bound = jf._sig.bind(*args)
        bound.apply_defaults()
        jf._resolve_arguments(bound.arguments)
        return (jf._make_compiled_function(row.ir_key, bound, None),)


def _env_raced(judgement: build.Judgement, mark: int, reads: EnvReads) -> build.Judgement:
    """``RACED`` when the trace kept nothing else from being kept but another thread wrote an
    environment variable it read while it ran (and may have put it back: A-B-A)."""
    if judgement.verdict is not build.Verdict.SAME and judgement.verdict is not build.Verdict.ADOPT:
        return judgement
    written = environ_written_by_others(mark, reads.names)
    if not written:
        return judgement
    status = "was written by another thread while the trace read it"
    return build.Judgement(build.Verdict.RACED, tuple(NodeDiff(f"${n}", NodeKind.GLOBAL, status) for n in written))


def _with_digest(key: tuple, digest: str) -> tuple:
    """``key`` with its dependency digest replaced (the first part of a debug-info digest)."""
    head = key[0]
    return (digest if isinstance(head, str) else (digest, *head[1:]), *key[1:])


def _note_linker(error: Exception) -> None:
    """MLIR's "lld invocation failed" says nothing of why: a note on the error names the
    linker FlyDSL looked for and the ROCM_PATH it followed, when that file is missing."""
    if "lld invocation failed" in str(error):
        problem = index.linker_problem()
        if problem is not None and hasattr(error, "add_note"):  # Python >= 3.11
            error.add_note(f"flydsl_runtime: {problem}")


def _instance_state(obj: object) -> dict[str, tuple[str, str, bool]]:
    """A bound instance's attributes, each ``(digest, short description, digested by
    identity)``: what the persistent key's ``self`` part covers, named attribute by attribute
    for explanations (the instance's own fingerprint digests them as one node)."""
    from flydeps.values.bindings import dict_items
    from flydeps.values.objects import instance_dict
    from flydeps.values.snapshot import snapshot

    state = instance_dict(obj)
    out: dict[str, tuple[str, str, bool]] = {}
    for name, value in dict_items(state) if state is not None else ():
        if type(name) is str:
            snap = snapshot(value)
            out[name] = (snap.digest, snap.summary, snap.identified)
    return out


def _identified_attributes(obj: object) -> tuple[str, ...]:
    """The attributes of a bound instance whose digest includes an object's identity, named
    for a message."""
    where = f"the bound {type(obj).__qualname__} instance"
    names = tuple(f"{where}'s attribute {name}" for name, (_d, _s, ident) in _instance_state(obj).items() if ident)
    return names or (where,)


def _identified_reason(nodes: tuple[str, ...]) -> str:
    more = f" (and {len(nodes) - 1} more)" if len(nodes) > 1 else ""
    return (
        f"{nodes[0]}{more} is digested by its identity (a value over FLYDEPS_SNAPSHOT_LIMIT elements or "
        "an object with no readable state), which no other process shares"
    )
