"""The records a launcher keeps, and the view of a launcher its helpers read.

Contract
--------
* :class:`Entry`: one compiled specialization (what FlyDSL built for one key, and what it
  was built from); :class:`CacheInfo`: a launcher's counters.
* :class:`OwnerState`: the dependency state of one owner class (its fingerprint, guard and
  key digest, the states its kept traces started from, an undecided :class:`Drift`).
* :func:`usable`, :func:`why_unusable`: whether an entry whose key matched may serve a call,
  and if not, the recompile reasons; :func:`described`: a key as :mod:`flydsl_runtime.trace.explain`
  reads it.
* :class:`LauncherView`: the part of a :class:`~flydsl_runtime.launch.jit.Launcher` that
  :mod:`.verify` reads, so that module needs no import of :mod:`.jit`.

Nothing here imports :mod:`.jit`, :mod:`.states`, :mod:`.miss` or :mod:`.verify`: they all
import this module (no import cycle in ``launch/``).
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from flydsl.compiler.jit_function import CompiledFunction, JitFunction

from flydeps import Guard
from flydeps.builds import protocol as build
from flydeps.keys.fingerprint import Fingerprint
from flydeps.observe.environ import EnvReads

from ..trace import explain
from ..trace.argsig import ArgSigner, signatures
from ..trace.envkey import VALUE_KEYED_ENV_VARS
from .hooks import take_trace_env_reads

__all__ = [
    "STATES_KEPT",
    "CacheInfo",
    "Drift",
    "Entry",
    "LauncherView",
    "OwnerState",
    "described",
    "entry_env_reads",
    "usable",
    "why_unusable",
]

STATES_KEPT = 16  # dependency states remembered per owner class (Launcher._states)


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    currsize: int


_VALUE_KEYED = frozenset(VALUE_KEYED_ENV_VARS)


def entry_env_reads() -> EnvReads:
    """The last trace's env reads, minus the variables the key's env segment holds by value
    (re-checking those on a hit would only repeat the key)."""
    reads = take_trace_env_reads()
    if not any(name in _VALUE_KEYED for name, _v in reads.values):
        return reads
    return EnvReads(tuple(read for read in reads.values if read[0] not in _VALUE_KEYED), reads.listed)


@dataclass(frozen=True, slots=True)
class Entry:
    """One compiled specialization: what FlyDSL built for one key, and what it was built from."""

    key: tuple
    compiled: CompiledFunction | None  # None when recorded under COMPILE_ONLY=1
    ir_key: str  # FlyDSL's _artifact_cache_key of the traced IR
    fingerprint: Fingerprint
    extra_guards: tuple[Guard, ...]  # guards of functions passed as compile-time arguments, then of a pinned instance
    pinned_self: object  # an identity-keyed bound instance, kept alive
    # What the trace read of os.environ (kernel code, helpers, FlyDSL's get_rocm_arch());
    # re-checked on every hit. By default, the reads of the trace this thread just ran
    # (see flydsl_runtime.launch.hooks): an Entry is made right after its trace.
    env_reads: EnvReads = field(default_factory=entry_env_reads)
    # The fingerprint each of ``extra_guards`` was made from, in the same order (the bound
    # instance's last): a failed guard whose fingerprint, taken again, has the same digest
    # re-arms the entry (MissPath._rearmed) instead of missing.
    extra_states: tuple[Fingerprint, ...] = ()


@dataclass(frozen=True, slots=True)
class Drift:
    """A data change seen by a guard under ``on_drift='raise'`` (or data back at a state
    before other builds' writes, ``Verdict.UNDONE``, under any policy), decided by FlyDSL's
    IR: an entry of a state before it is re-traced once for its key (no launch) and kept
    under the new state when the IR key is the same; else the call raises
    ``GlobalDriftError`` (``raises``) or traces as a miss."""

    digests: tuple[str, ...]  # the key digests of the states before the change, newest first
    judgement: build.Judgement  # what changed (the first difference names the error)
    raises: bool = True
    reached: set[tuple] = field(default_factory=set)  # keys whose IR it changed: raise, no re-trace


@dataclass(frozen=True, slots=True)
class OwnerState:
    """The dependency state of one owner class (None: an unbound call)."""

    fingerprint: Fingerprint
    guard: Guard
    digest: str
    # label -> states the kept traces started from, for each value they wrote (build.judge)
    starts: Mapping[str, frozenset] = field(default_factory=dict)
    # The fingerprint ``digest`` was taken from: ``fingerprint`` itself, or, after a trace's
    # own writes were adopted (or a drift kept the key), the earlier state the key stands
    # for. A row's explanation spells out this one, so a later miss names what differs
    # from the key, not what the trace wrote (a registry it appended to).
    keyed: Fingerprint | None = None
    # A data change under on_drift='raise' that FlyDSL has not judged yet (Launcher._drift)
    drift: Drift | None = None

    @property
    def key_fingerprint(self) -> Fingerprint:
        return self.keyed if self.keyed is not None else self.fingerprint


def usable(entry: Entry, compile_only: bool) -> bool:
    """Whether ``entry``, whose key matched, may serve this call."""
    if entry.compiled is None and not compile_only:
        return False  # recorded by a COMPILE_ONLY call: this call must build its launchable form
    if not entry.env_reads.holds():
        return False  # an environment variable the trace read has another value now
    return all(g.check() for g in entry.extra_guards) if entry.extra_guards else True


def why_unusable(entry: Entry, compile_only: bool) -> list[str]:
    """Recompile reasons of an entry whose key matched but :func:`usable` refused."""
    reasons = [explain.env_read_change(name, old, new) for name, old, new in entry.env_reads.changes()]
    if entry.compiled is None and not compile_only:
        reasons.append("the entry was compiled under COMPILE_ONLY=1 and this call launches")
    failed = [i for i, g in enumerate(entry.extra_guards) if not g.check()]
    if entry.pinned_self is not None and len(entry.extra_guards) - 1 in failed:
        reasons.append("the bound instance's state changed")
        failed.pop()
    if failed:
        reasons.append("a function passed as a compile-time argument changed")
    return reasons


def described(key: tuple) -> tuple:
    """``key`` as :mod:`flydsl_runtime.trace.explain` reads it (``Entry.key``): ``(digest, argument
    signatures, (target, device id), env key, hints, self key)``."""
    digest, args, env_token, device, hints, self_key = key
    target, env = env_token.sig
    return (digest, signatures(args), (target, device), env, hints, self_key)


class LauncherView(Protocol):
    """What :mod:`.verify` reads of a launcher (:class:`~flydsl_runtime.launch.jit.Launcher`)."""

    _name: str
    _jf: JitFunction
    _lock: threading.RLock
    _entries: dict[tuple, Entry]
    _verify_counts: dict[tuple, int]
    _signer: ArgSigner | None
