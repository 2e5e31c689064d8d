"""The dependency-aware launcher: a FlyDSL ``@jit`` function whose warm call skips the trace.

Contract
--------
:class:`Launcher` wraps a real ``flydsl.compiler.jit_function.JitFunction``. A call is keyed,
in process, by

``(dependency digest, argument signatures, target, code-gen env, compile hints, bound self)``

* dependency digest: ``flydeps.fingerprint`` of the launcher's Python function with the
  owner class of a bound call (so ``Sub`` sees its overrides and ``Base`` does not), one
  state per owner class, re-validated on every call by the fingerprint's ``Guard`` (identity
  checks only). A code change gives a new digest and so a retrace; a data-valued global
  that changed follows ``on_drift`` (:mod:`flydeps.drift`, the policy ``cached_factory``
  uses too): ``"raise"`` (default: FlyDSL's IR decides, :meth:`Launcher._judge_drift` --
  each entry traced before the change is re-traced once, no launch, and kept under the new
  state on the same IR key, else ``GlobalDriftError`` naming the global and module with its
  old and new values), ``"rebuild"`` or ``"warn"``. Data back at a state before other
  builds' writes (``Verdict.UNDONE``, a memo another launcher filled, emptied) is judged
  the same way under every policy, a different IR key giving a miss, never a raise. Traces follow flydeps' build
  protocol (:mod:`flydeps.build`): the baseline is the state validated *before* the trace;
  the trace's own writes (a memo dict, a registry it appends to) are adopted, also by every
  other launcher and factory that read them, and so are the class caches FlyDSL fills while
  tracing (a per-build ``@fx.struct SharedStorage``'s layout: one trace per new launcher);
  any other change made while it ran, or a namespace or dict it read written and put back
  meanwhile (A-B-A, CPython 3.10/3.11), a function of its graph whose ``__code__`` or
  ``__defaults__`` another thread assigned, or an environment variable it read that
  another thread wrote (``_env_raced``), means the trace is returned to its caller but not
  kept. A
  changed default of a runtime-only parameter (the stream) is keyed as the argument, not
  drift; a state the launcher already built for (an undo) takes its key again
  (``Launcher._states``, the last ``_STATES_KEPT`` per owner class);
* argument signatures: :mod:`flydsl_runtime.argsig`; target: :mod:`flydsl_runtime.target`;
  env: :mod:`flydsl_runtime.envkey`; compile hints: persistent plus thread-local overlay;
* bound self: the instance's ``__cache_signature__()`` when it has one, else its identity
  (the entry keeps the instance alive so the id cannot be reused, and guards its state);
  in the persistent index, such an instance is keyed by its state instead.

In the key, every part that does not depend on an argument's value (a tensor's signature, a
stream's, the target with the env key) is an interned token (:func:`.argsig.token`) hashed by
identity, so the key hashes in constant time per argument; ``Entry.key`` holds the same key
spelled out (what :mod:`.explain` compares). A plain call's warm path is written out in
``__call__``: reads and identity checks only, each the test the general path makes, and
anything unusual (keywords, a failed guard, hints, debug info, verify mode, an entry with
extra guards) goes to the general path.

A hit calls the stored ``CompiledFunction`` directly. A miss asks FlyDSL to trace and compile
as usual (its IR-keyed memory and disk caches stay the cross-process truth), records the
entry with FlyDSL's IR key, and logs why it missed (:mod:`flydsl_runtime.explain`). Under
FlyDSL's ``COMPILE_ONLY=1`` a call compiles and records the entry without launching, and
later calls are hits that return ``None``. ``FLYDEPS_VERIFY=1`` re-traces on every hit and
compares IR keys (:mod:`flydsl_runtime.verify`); ``FLYDEPS_VERIFY=0.01`` re-traces that share
of hits, chosen per entry deterministically, as a production canary.

Before tracing, a miss asks the persistent index (:mod:`.index`) for the call's
cross-process key; a row is served by FlyDSL's artifact from its disk cache, read by its
cache manager; where this process cannot write that cache's directory (a shipped directory
owned by another user, a read-only mount) by :mod:`.diskcache`, which reads without FlyDSL's
lock and keeps what a trace builds in memory.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import FunctionType, MappingProxyType, MethodType
from typing import Any, NamedTuple

from blake3 import blake3
from flydsl._mlir import ir
from flydsl.compiler.backends import get_backend
from flydsl.compiler.jit_function import CompiledFunction, JitFunction
from flydsl.compiler.kernel_function import CompilationContext, merge_compile_hints

from flydeps import Guard, build, fingerprint, settings
from flydeps._environ import EnvReads
from flydeps._environ import version as environ_version
from flydeps._environ import write_mark as environ_write_mark
from flydeps._environ import written_by_others as environ_written_by_others
from flydeps.drift import DriftPolicy, check_policy, decide, drift_error
from flydeps.fingerprint import Fingerprint, NodeDiff, fingerprint_roots
from flydeps.graph import NodeKind

from . import aot, diskcache, explain, index
from ._hooks import take_trace_env_reads
from .argsig import ArgSigner, SigToken, signatures, token
from .binder import ArgBinder
from .debuginfo import positions_in_ir
from .envkey import VALUE_KEYED_ENV_VARS, env_key, paths_configured
from .target import device_id_reader, resolved_target
from .verify import StaleArtifactError

__all__ = ["CacheInfo", "Entry", "Launcher", "ON_DRIFT"]

log = logging.getLogger("flydsl_runtime")

ON_DRIFT = ("raise", "rebuild", "warn")
_HINTS_TLS = CompilationContext._compile_hints
_TRUE = frozenset(("1", "true", "yes", "on", b"1", b"true", b"yes", b"on"))
_DEBUG_INFO = os.fsencode("FLYDSL_DEBUG_ENABLE_DEBUG_INFO")

try:
    _ENV_DATA: dict | None = os.environ._data if os.supports_bytes_environ else None  # type: ignore[attr-defined]
except AttributeError:
    _ENV_DATA = None
if isinstance(_ENV_DATA, dict):
    _env_get: Callable[[bytes], object] = _ENV_DATA.get
else:  # pragma: no cover - platforms without a bytes environ

    def _env_get(encoded: bytes) -> object:
        return os.environ.get(os.fsdecode(encoded))


def env_flag(encoded: bytes) -> bool:
    """A FlyDSL-style boolean env var (``1/true/yes/on``), read live; ``encoded`` is its name."""
    raw = _env_get(encoded)
    return raw is not None and raw.lower() in _TRUE  # type: ignore[attr-defined]


class CacheInfo(NamedTuple):
    hits: int
    misses: int
    currsize: int


_VALUE_KEYED = frozenset(VALUE_KEYED_ENV_VARS)


def _entry_env_reads() -> EnvReads:
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
    extra_guards: tuple[Guard, ...]  # guards of functions passed as compile-time arguments
    pinned_self: object  # an identity-keyed bound instance, kept alive
    # What the trace read of os.environ (kernel code, helpers, FlyDSL's get_rocm_arch());
    # re-checked on every hit. By default, the reads of the trace this thread just ran
    # (see flydsl_runtime._hooks): an Entry is made right after its trace.
    env_reads: EnvReads = field(default_factory=_entry_env_reads)


@dataclass(frozen=True, slots=True)
class _Drift:
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
class _OwnerState:
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
    drift: _Drift | None = None

    @property
    def key_fingerprint(self) -> Fingerprint:
        return self.keyed if self.keyed is not None else self.fingerprint


_CODE_NODES = (NodeKind.FUNCTION, NodeKind.METHOD)
_STATES_KEPT = 16  # dependency states remembered per owner class (Launcher._states)
_NO_STARTS: Mapping[str, frozenset] = MappingProxyType({})


def _source_files(fp: Fingerprint) -> tuple[str, ...]:
    """The files of every function a fingerprint reached (what FlyDSL may read for locations)."""
    discovery = fp._discovery
    files = set()
    for b in discovery.bindings if discovery is not None else ():
        if type(b.container) is FunctionType:
            files.add(b.container.__code__.co_filename)
    return tuple(sorted(f for f in files if not f.startswith("<")))


def _file_state(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _positions_digest(fp: Fingerprint) -> str:
    """The code nodes' own digests (with positions) only: data the trace itself writes (a
    memo dict) must not move this part of the key; the state's digest covers data."""
    code = sorted(f"{nid}={node.digest}" for nid, node in fp.graph.nodes.items() if node.kind in _CODE_NODES)
    return blake3("\n".join(code).encode("utf-8", "surrogatepass")).hexdigest()


class CallEnv(NamedTuple):
    """What a warm call reads from the environment: the resolved target, the code-gen env
    key, ``COMPILE_ONLY``, whether ``FLYDEPS_VERIFY`` and ``FLYDSL_DEBUG_ENABLE_DEBUG_INFO``
    are set. All are functions of ``os.environ`` alone. ``token`` stands for
    ``(target, env)`` in a launcher key (:func:`.argsig.token`: hashed by identity)."""

    target: tuple[str, str, int]
    env: object
    compile_only: bool
    verify: bool
    debug_info: bool
    token: SigToken


# (environment version, CallEnv): a warm call re-reads the environment only after
# os.environ was modified (flydeps._environ.version: PEP 509 tag or dict watcher).
# [environment version, CallEnv], replaced as a pair (one slice assignment, under the GIL;
# flydsl_runtime._warmcall reads the same list). The first item starts as an object that is
# never a version (None means "no version on this interpreter": nothing is memoized then).
_call_env_memo: list = [object(), None]


def _call_env() -> CallEnv:
    """The environment's part of a warm call, memoized on the environment's version."""
    version = environ_version()
    memo_version, memo_env = _call_env_memo
    if version is not None and memo_version == version:
        return memo_env  # type: ignore[no-any-return]
    resolved = resolved_target()
    env = env_key(resolved[1])
    facts = CallEnv(
        resolved,
        env,
        env_flag(b"COMPILE_ONLY"),
        _env_get(b"FLYDEPS_VERIFY") is not None,
        _env_get(_DEBUG_INFO) is not None,
        token((resolved, env)),
    )
    if version is not None and not paths_configured():  # path effects are re-stat'ed per call
        _call_env_memo[:] = (version, facts)
    return facts


# [environment version, FLYDEPS_VERIFY's share]: parsed again only after os.environ changed
_verify_memo: list = [object(), 0.0]


def _verify_share() -> float:
    """``FLYDEPS_VERIFY`` as a share of hits (:func:`flydeps.settings.fraction`, which raises
    on a bad value), memoized on the environment's version like :func:`_call_env`."""
    version = environ_version()
    memo_version, share = _verify_memo
    if version is not None and memo_version == version:
        return share  # type: ignore[no-any-return]
    share = settings.fraction("FLYDEPS_VERIFY", 0.0)
    if version is not None:
        _verify_memo[:] = (version, share)
    return share


_device_id: Callable[[], int] | None = None  # FlyDSL's active-device reader (target.device_id_reader)


_device_cell: list = [None]  # the same reader, for flydsl_runtime._warmcall


def _bind_device_id() -> Callable[[], int]:
    global _device_id
    _device_id = device_id_reader()
    _device_cell[0] = _device_id
    return _device_id


def _device(compile_only: bool) -> int | None:
    """The key's device: the active device; under COMPILE_ONLY=1, where nothing is launched,
    None until the process has asked (a launch bound the reader): FlyDSL's COMPILE_ONLY call
    does not touch HIP, and neither does this one (no ``libamdhip64`` load, no runtime
    start in an AOT build's workers). A COMPILE_ONLY entry is never launched, so the device
    it is keyed under only decides which later COMPILE_ONLY calls find it."""
    reader = _device_id
    if reader is not None:
        return reader()
    return None if compile_only else _bind_device_id()()


def _freeze(value: object) -> object:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, set):
        return frozenset(_freeze(v) for v in value)
    return value


def _warm_base() -> type:
    """The C warm path's base type, configured; ``object`` when it is not built or
    ``FLYDEPS_WARMCALL=0`` (the Python warm path, ``Launcher._py_call``, is then ``__call__``)."""
    if not settings.flag("FLYDEPS_WARMCALL", True):
        return object
    try:
        from . import _warmcall  # type: ignore[attr-defined]
    except ImportError:
        return object
    _warmcall.configure(_call_env_memo, environ_version, ir.Context, _HINTS_TLS, _device_cell)
    return _warmcall.WarmCall


_WarmBase = _warm_base()

# Every launcher of this process, weakly: an AOT build worker tells a call that its launchers'
# memory served from one that ran no launcher at all (:func:`memory_hits`).
_LAUNCHERS: weakref.WeakSet[Launcher] = weakref.WeakSet()


def memory_hits() -> int:
    """Calls the live launchers of this process have served from their memory so far."""
    return sum(launcher._hits for launcher in list(_LAUNCHERS))


def launcher_of(call: object) -> Launcher | None:
    """The launcher that calling ``call`` calls, when that is all it does: a launcher, or
    one bound to an instance (``obj.launch``); None for anything else (a function that may
    call several). Reads types and attributes of library objects only."""
    if type(call) is Launcher:
        return call
    if type(call) is functools.partial and len(call.args) == 1 and not call.keywords:
        bound = call.func
        if type(bound) is MethodType and type(bound.__self__) is Launcher and bound.__func__ is Launcher._bound_call:
            return bound.__self__
    return None


def _predecessor_states(name: str) -> dict[type | None, Fingerprint]:
    """The dependency states (graphs and digests, no live objects) of the module-level
    launcher named ``name`` that a new one replaces; empty for a launcher made by each call
    of a builder (``<locals>``: not a reload)."""
    if "<locals>" in name:
        return {}
    old = next((x for x in list(_LAUNCHERS) if x._name == name), None)
    if old is None:
        return {}
    with old._lock:
        states = list(old._owners.items())
    return {owner: state.fingerprint.detached() for owner, state in states}


class Launcher(_WarmBase):  # type: ignore[misc,valid-type]
    """A FlyDSL ``@jit`` launcher with an exact, guard-validated in-process key."""

    def __init__(self, jit_function: JitFunction, *, on_drift: str = "raise") -> None:
        if not isinstance(jit_function, JitFunction):
            raise TypeError(f"Launcher wraps a flydsl JitFunction, got {type(jit_function).__name__}")
        self._on_drift: DriftPolicy = check_policy(on_drift, "Launcher")
        self._jf = jit_function
        self._name = f"{jit_function.func.__module__}.{jit_function.func.__qualname__}"
        self._owners: dict[type | None, _OwnerState] = {}
        self._entries: dict[tuple, Entry] = {}
        self._last: dict[type | None, Entry] = {}
        # owner -> (dependency state, (digest, digest with source positions)); debug info only
        self._positions: dict[type | None, tuple[_OwnerState, tuple[str, str], tuple[str, ...]]] = {}
        # owner -> {fingerprint digest: the state kept for it}: a state the process already
        # built for (an undo, a mock.patch leaving its block) is found again by its digest
        self._states: dict[type | None, dict[str, _OwnerState]] = {}
        self._lock = threading.RLock()
        self._signer: ArgSigner | None = None
        self._binder: ArgBinder | None = None
        self._nparams = -1
        # number of positional arguments -> the defaults completing them (ArgBinder.tails);
        # empty until the first call has bound the signature
        self._tails: Mapping[int, tuple] = {}
        self._hits = 0
        self._misses = 0
        self._verify_counts: dict[tuple, int] = {}  # key -> hits counted by FLYDEPS_VERIFY=<fraction>
        functools.update_wrapper(self, jit_function.func)
        # A launcher replacing one of the same name (``importlib.reload`` of its module, a
        # notebook cell run again): the states the old one traced for, to say what changed.
        self._predecessor: dict[type | None, Fingerprint] = _predecessor_states(self._name)
        _LAUNCHERS.add(self)

    # --- FlyDSL JitFunction surface ---------------------------------------------------

    @property
    def jit_function(self) -> JitFunction:
        return self._jf

    @property
    def compile_hints(self) -> dict:
        return self._jf.compile_hints

    @compile_hints.setter
    def compile_hints(self, hints: dict) -> None:
        self._jf.compile_hints = hints

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "_jf":  # _jf unset: __init__ has not run
            raise AttributeError(name)
        return getattr(self._jf, name)

    def unwrap(self) -> Iterable[tuple[str, object]]:
        """What flydeps discovery walks: the wrapped FlyDSL function."""
        return (("jit", self._jf),)

    def __get__(self, obj: object, objtype: type | None = None) -> Any:
        if obj is None:
            return self
        return functools.partial(self._bound_call, obj)

    def __repr__(self) -> str:
        return f"<flydsl_runtime launcher {self._name}>"

    def cache_info(self) -> CacheInfo:
        return CacheInfo(self._hits, self._misses, len(self._entries))

    def cache_clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._owners.clear()
            self._last.clear()
            self._positions.clear()
            self._states.clear()
            self._verify_counts.clear()
            self._hits = self._misses = 0

    def entries(self) -> tuple[Entry, ...]:
        return tuple(self._entries.values())

    # --- calls ----------------------------------------------------------------------

    def _bound_call(self, obj: object, *args: Any, **kwargs: Any) -> Any:
        return self._call(obj, args, kwargs)

    def _py_call(self, *args: Any, **kwargs: Any) -> Any:
        """The warm path of a plain call, written out: reads and identity checks only, each
        the same test :meth:`_call` makes. Anything else (first call, a failed guard,
        keywords, an argument list the binder must complete, a call inside a trace,
        compile hints, debug info, FLYDEPS_VERIFY, a key without a usable entry) goes to
        _call, which decides it from the start. ``__call__`` when the C warm path
        (:mod:`._warmcall`, which makes the same tests and falls back to this) is not used."""
        state = self._owners.get(None)
        tail = self._tails.get(len(args))
        memo_version, call_env = _call_env_memo  # one consistent pair
        if (
            state is not None
            and tail is not None
            and not kwargs
            and memo_version == environ_version()
            and ir.Context.current is None
            and state.guard.check()
        ):
            if not call_env.debug_info and not call_env.verify and not self._jf.compile_hints:
                positional = args + tail
                key = (
                    state.digest,
                    self._signer.key(positional),  # type: ignore[union-attr]  # _tails set => signer set
                    call_env.token,
                    reader() if (reader := _device_id) is not None else _device(call_env.compile_only),
                    (),
                    None,
                )
                entry = self._entries.get(key)
                if (
                    entry is not None
                    and (entry.compiled is not None or call_env.compile_only)
                    and not entry.extra_guards
                    and getattr(_HINTS_TLS, "data", None) is None
                    and entry.env_reads.holds()
                ):
                    self._hits += 1
                    if call_env.compile_only:
                        return None
                    return entry.compiled(*positional)  # type: ignore[misc]
        return self._call(None, args, kwargs)

    if _WarmBase is object:
        __call__ = _py_call

    def _call(self, bound_self: object, args: tuple, kwargs: dict) -> Any:
        if ir.Context.current is not None:  # called from inside another trace: FlyDSL inlines
            return self._jf.func(*((bound_self,) if bound_self is not None else ()), *args, **kwargs)
        owner = type(bound_self) if bound_self is not None else None
        state = self._owners.get(owner)
        if state is None or not state.guard.check():
            state = self._revalidate(owner, state)
            self._refresh_binder()
        if not kwargs and len(args) == self._nparams:
            positional = args
        else:  # an omitted default (the stream) or keywords: the binder, without Launcher._bind's frame
            binder = self._binder
            positional = binder.bind(args, kwargs) if binder is not None else self._bind(args, kwargs)
        call_env = _call_env()
        key = self._key(state, bound_self, positional, call_env)
        compile_only = call_env.compile_only
        entry = self._entries.get(key)
        if (  # _usable(entry, compile_only), written out: this is the warm path
            entry is None
            or (entry.compiled is None and not compile_only)
            or not entry.env_reads.holds()
            or (entry.extra_guards and not all(g.check() for g in entry.extra_guards))
        ):
            if entry is not None:
                explain.note_unusable(self._name, self._why_unusable(entry, compile_only))
            compiled, launched = self._miss(owner, state, bound_self, positional, key, compile_only)
            if compiled is not None and not launched and not compile_only:
                return compiled(*positional)
            return None
        self._hits += 1
        if call_env.verify and (share := _verify_share()):
            from .verify import checked_hit

            if not checked_hit(self, key, entry, bound_self, positional, share):  # stale: dropped, logged
                compiled, launched = self._miss(owner, state, bound_self, positional, key, compile_only, stale=True)
                if compiled is not None and not launched and not compile_only:
                    return compiled(*positional)
                return None
        if compile_only:
            return None
        return entry.compiled(*positional)  # type: ignore[misc]  # _usable refused None when launching

    def compile(self, bound_self: object, args: tuple, kwargs: dict) -> CompiledFunction | None:
        """``flyc.compile`` for this launcher: the stored ``CompiledFunction`` or a new one."""
        owner = type(bound_self) if bound_self is not None else None
        state = self._owners.get(owner)
        if state is None or not state.guard.check():
            state = self._revalidate(owner, state)
            self._refresh_binder()
        positional = self._bind(args, kwargs)
        call_env = _call_env()
        key = self._key(state, bound_self, positional, call_env)
        compile_only = call_env.compile_only
        entry = self._entries.get(key)
        if entry is not None and self._usable(entry, compile_only):
            self._hits += 1
            return entry.compiled
        if entry is not None:
            explain.note_unusable(self._name, self._why_unusable(entry, compile_only))
        compiled, _launched = self._miss(owner, state, bound_self, positional, key, compile_only)
        return compiled

    # --- key ------------------------------------------------------------------------

    def _key(self, state: _OwnerState, bound_self: object, positional: tuple, call_env: CallEnv | None = None) -> tuple:
        """The call's key: ``(digest, argument key form, env token, device id, hints, self key)``
        (see :meth:`_described` for the same key with every token spelled out)."""
        if call_env is None:
            call_env = _call_env()
        overlay = getattr(_HINTS_TLS, "data", None)
        persistent = self._jf.compile_hints
        hints = _freeze(merge_compile_hints(persistent, overlay)) if (persistent or overlay) else ()
        if bound_self is None:
            self_key = None
        else:
            signed = getattr(type(bound_self), "__cache_signature__", None)
            self_key = (type(bound_self), getattr(bound_self, "__cache_signature__")() if signed else id(bound_self))
        digest: str | tuple = state.digest
        if call_env.debug_info and positions_in_ir():  # FlyDSL's own parsing, when set
            digest = self._with_positions(type(bound_self) if bound_self is not None else None, state)
        device = _device(call_env.compile_only)
        # _signer is set by _refresh_binder, which runs before the first key is made.
        return (digest, self._signer.key(positional), call_env.token, device, hints, self_key)  # type: ignore[union-attr]

    @staticmethod
    def _described(key: tuple) -> tuple:
        """``key`` as :mod:`.explain` reads it (``Entry.key``): ``(digest, argument signatures,
        (target, device id), env key, hints, self key)``."""
        digest, args, env_token, device, hints, self_key = key
        target, env = env_token.sig
        return (digest, signatures(args), (target, device), env, hints, self_key)

    def _with_positions(self, owner: type | None, state: _OwnerState) -> tuple[str, str, tuple]:
        """Under FLYDSL_DEBUG_ENABLE_DEBUG_INFO=1 the IR carries file names and line tables, so
        the key's digest also covers the source positions of everything the launcher reaches.
        Computed once per dependency state: any edit, move or reload fails the guard and
        re-takes the state, so a stale position cannot outlive it. FlyDSL also reads the
        *current* file (``inspect.getsourcelines`` for a kernel's location), which an edit
        changes before any reload: the source files are re-``stat``ed on every call in this
        mode (size and modification time)."""
        cached = self._positions.get(owner)
        if cached is None or cached[0] is not state:
            fp = fingerprint_roots(self._roots(owner), positions=True)
            cached = (state, (state.digest, _positions_digest(fp)), _source_files(fp))
            self._positions[owner] = cached
        return (*cached[1], tuple(map(_file_state, cached[2])))

    @staticmethod
    def _usable(entry: Entry, compile_only: bool) -> bool:
        if entry.compiled is None and not compile_only:
            return False  # recorded by a COMPILE_ONLY call: this call must build its launchable form
        if not entry.env_reads.holds():
            return False  # an environment variable the trace read has another value now
        return all(g.check() for g in entry.extra_guards) if entry.extra_guards else True

    @staticmethod
    def _why_unusable(entry: Entry, compile_only: bool) -> list[str]:
        """Recompile reasons of an entry whose key matched but :meth:`_usable` refused."""
        reasons = [explain.env_read_change(name, old, new) for name, old, new in entry.env_reads.changes()]
        if entry.compiled is None and not compile_only:
            reasons.append("the entry was compiled under COMPILE_ONLY=1 and this call launches")
        if any(not g.check() for g in entry.extra_guards):
            reasons.append("a function passed as a compile-time argument changed")
        return reasons

    def _bind(self, args: tuple, kwargs: dict) -> tuple:
        """The call's arguments in parameter order, defaults filled (:mod:`.binder`, no ``inspect``)."""
        binder = self._binder
        if binder is None:
            self._ensure_signature()
            binder = self._binder
        return binder.bind(args, kwargs)  # type: ignore[union-attr]

    def _ensure_signature(self) -> None:
        self._jf._ensure_sig()
        self._signer = ArgSigner(self._name, self._jf._sig)
        self._binder = ArgBinder(self._name, self._jf._sig, self._jf.func)
        self._nparams = len(self._jf._sig.parameters)
        self._tails = self._binder.tails  # last: the warm path reads it before _signer

    def _refresh_binder(self) -> None:
        """After a failed guard: the launcher's ``__defaults__`` may have been replaced (the guard
        watches them); bind omitted arguments to the new defaults, as a fresh FlyDSL would."""
        binder = self._binder
        if binder is not None and binder.stale():
            with self._lock:
                self._jf._sig = None  # FlyDSL caches the signature, defaults included
                self._ensure_signature()

    # --- dependency state -----------------------------------------------------------

    def _roots(self, owner: type | None) -> list[tuple[object, type | None, str]]:
        """The launcher's function, walked with the owner class of a bound call, so
        ``self.kern`` -> ``KernelFunction`` -> ``self.op`` resolves on the owner's MRO."""
        return [(self._jf.func, owner, "root")]

    def _revalidate(self, owner: type | None, state: _OwnerState | None) -> _OwnerState:
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
        drift: _Drift | None = None,
    ) -> _OwnerState:
        """The owner's state ``fp``; ``digest`` (with ``keyed``, the fingerprint it was taken
        from) when the key of an earlier state is kept. A state with an undecided ``drift`` is
        not remembered as one built for: coming back to it judges the change again."""
        state = _OwnerState(fp, fp.guard(), digest or fp.digest, starts, keyed if digest else None, drift)
        self._owners[owner] = state
        if drift is not None:
            return state
        seen = self._states.setdefault(owner, {})
        seen[fp.digest] = state
        if len(seen) > _STATES_KEPT:  # the oldest first (dicts keep insertion order)
            del seen[next(iter(seen))]
        return state

    def _drift(
        self, owner: type | None, current: _OwnerState, fresh: Fingerprint, judgement: build.Judgement
    ) -> _OwnerState:
        """The one drift policy (:mod:`flydeps.drift`): a kept state keeps its key digest, so
        entries traced before a managed build's write (or, under ``warn``, a data change)
        stay hits; anything else takes the fresh digest, and the next trace is a miss."""
        undone = judgement.verdict is build.Verdict.UNDONE
        if undone or (judgement.verdict is build.Verdict.DATA and self._on_drift == "raise"):
            # FlyDSL's IR decides, per entry, on its next call (_judge_drift): a new key now
            earlier = current.drift.digests if current.drift is not None else ()
            digests = (current.digest, *earlier)[:_STATES_KEPT]
            log.info("%s: %s; each entry is re-traced once to see if its IR changed", self._name, judgement.reasons())
            return self._baseline(owner, fresh, drift=_Drift(digests, judgement, raises=not undone))
        if decide(judgement, self._on_drift, self._consumer(owner)):  # raises under on_drift='raise'
            return self._baseline(
                owner, fresh, digest=current.digest, starts=current.starts, keyed=current.key_fingerprint
            )
        return self._baseline(owner, fresh)

    def _consumer(self, owner: type | None) -> str:
        return self._name + (f" (owner class {owner.__qualname__})" if owner is not None else "")

    def _judge_drift(
        self, owner: type | None, state: _OwnerState, bound_self: object, positional: tuple, key: tuple
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
            from .verify import traced_ir_key

            if traced_ir_key(self, state.fingerprint, bound_self, positional) == old.ir_key:
                log.info(
                    "%s: %s, but a re-trace gives the same IR (%s): the entry is kept",
                    self._name,
                    drift.judgement.reasons(),
                    old.ir_key[:16],
                )
                entry = dataclasses.replace(old, key=self._described(key), fingerprint=state.fingerprint)
                self._entries[key] = entry
                self._last[owner] = entry
                self._persist_kept(state, entry)
                return entry
            drift.reached.add(key)
        if not drift.raises:
            return None
        raise drift_error(drift.judgement.diffs[0], self._consumer(owner))

    def _persist_kept(self, state: _OwnerState, entry: Entry) -> None:
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

    # --- miss -----------------------------------------------------------------------

    def _miss(
        self,
        owner: type | None,
        state: _OwnerState,
        bound_self: object,
        positional: tuple,
        key: tuple,
        compile_only: bool,
        stale: bool = False,
    ) -> tuple[CompiledFunction | None, bool]:
        """Trace + compile through FlyDSL; returns (CompiledFunction or None, already launched).
        ``stale``: the verify canary found this key's entry stale, so its persistent row (same
        key, same IR) is not loaded either: the trace replaces it."""
        with self._lock:  # FlyDSL keeps per-call state (_last_compiled) on the JitFunction
            entry = self._entries.get(key)
            if entry is not None and self._usable(entry, compile_only):
                self._hits += 1  # another thread built it while this one waited
                return entry.compiled, False
            if state.drift is not None and self._owners.get(owner) is state:
                entry = self._judge_drift(owner, state, bound_self, positional, key)
                if entry is not None and self._usable(entry, compile_only):
                    self._hits += 1
                    return entry.compiled, False
            previous = self._last.get(owner)
            signer = self._signer
            assert signer is not None, "_refresh_binder runs before the first key is made"
            reasons = explain.describe_miss(
                self._name,
                signer.names,
                previous.key if previous else None,
                self._described(key),
                previous.fingerprint if previous else None,
                state.fingerprint,
                owner,
            )
            if previous is not None or self._misses:
                explain.log_recompile(self._name, reasons)
            extra = tuple(fingerprint(fn).guard() for fn in signer.callables(positional))
            full = (bound_self, *positional) if bound_self is not None else positional
            described = self._described(key)
            strict = aot.strict()  # FLYDEPS_AOT=strict: a miss the index cannot serve is an error
            persistent = self._persistent_key(described, bound_self, state)
            pkey, why_not, self_fp = persistent.key, persistent.why_not, persistent.self_fp
            row = index.lookup(pkey) if pkey is not None else None
            # FLYDEPS_VERIFY=1: rows are traced and compared, never loaded; a fraction (the
            # production canary) checks hits only, and rows load as usual
            verifying = settings.fraction("FLYDEPS_VERIFY", 0.0) >= 1.0
            if row is not None and not verifying and not stale:
                loaded = self._load(row, bound_self, positional, compile_only)
                if loaded is not None:  # FlyDSL's artifact, no trace: the state stays as validated
                    compiled = loaded[0]
                    # An instance keyed by its state in the row, by identity here: its state,
                    # as the row's key read it, must still hold on a hit (as after a trace).
                    guards = (*extra, self_fp.guard()) if self_fp is not None else extra
                    pinned_self = bound_self if self_fp is not None else None
                    entry = Entry(
                        described, compiled, row.ir_key, state.fingerprint, guards, pinned_self, EnvReads(row.env_reads)
                    )
                    self._entries[key] = entry
                    self._last[owner] = entry
                    self._misses += 1
                    log.info("%s: loaded from the persistent index, no trace (IR %s)", self._name, row.ir_key[:16])
                    return compiled, False
            if strict and (row is None or not verifying):
                parts = (
                    index.key_parts(self._name, persistent.described, signer.names, persistent.keyed, persistent.state)
                    if pkey and persistent.keyed is not None
                    else None
                )
                raise aot.miss_error(self._name, parts, why_not, key=pkey)
            diskcache.manager(self._jf)  # where this process cannot write: read-only, kept in memory
            env_mark = environ_write_mark()  # env variables other threads write while it traces
            start = build.begin(state.fingerprint)  # the build protocol: see flydeps.build
            try:
                compiled = self._jf._compile_or_execute(full, {}, execute=True, return_compiled=True)
            except Exception as error:
                _note_linker(error)
                raise
            finally:  # a trace that failed after writing a memo wrote it all the same
                build.finish(start)
            ir_key = self._jf._last_compiled[0]
            if row is not None and verifying and row.ir_key != ir_key:
                raise StaleArtifactError(self._name, row.ir_key, ir_key, ("the persistent index row's IR differs",))
            after = build.stable(state.fingerprint.refresh)
            judgement = build.conclude(start, after)  # its own writes (memos, FlyDSL's class caches) adopted
            reads = _entry_env_reads()
            judgement = _env_raced(judgement, env_mark, reads)
            if judgement.verdict is not build.Verdict.SAME and judgement.verdict is not build.Verdict.ADOPT:
                # What the trace read changed while it ran (not by its own writes): this caller,
                # who started before the change, gets the result; nothing is kept, and the next
                # call's guard fails and follows on_drift or retraces.
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
            if judgement.verdict is build.Verdict.ADOPT:  # its own writes: same key digest
                state = self._baseline(
                    owner,
                    after,
                    digest=state.digest,
                    starts=build.start_states(start, state.starts),
                    keyed=state.key_fingerprint,
                )
            pinned = bound_self if key[5] is not None and not hasattr(type(bound_self), "__cache_signature__") else None
            # Why no row will serve this call (None: one will): a function passed as an argument
            # has no cross-process name.
            unstored = "a function passed as a compile-time argument has no cross-process name" if extra else None
            if pinned is not None:
                # Keyed by identity: what the trace read of the instance's own state (its
                # attributes, as they stand now the trace finished) must still hold on a hit.
                after_self = fingerprint(pinned)
                extra = (*extra, after_self.guard())
                if self_fp is not None and after_self.digest != self_fp.digest:
                    # The row would be keyed by the state before the trace; a process that
                    # loads it would not have the trace's writes to the instance.
                    log.info("%s: not persisted, the trace changed the bound instance's state", self._name)
                    unstored = "its trace changed the bound instance's state, which the row's key covers"
            entry = Entry(described, compiled, ir_key, state.fingerprint, extra, pinned, reads)
            self._entries[key] = entry
            self._last[owner] = entry
            self._misses += 1
            if unstored is None and pkey is None:
                unstored = why_not
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
        launched = compiled is not None and compiled._call_state is not None
        return compiled, launched

    def _persistent_key(self, described: tuple, bound_self: object, state: _OwnerState) -> _Persistent:
        """The call's key in the persistent index (``key`` None: ``why_not``).

        The dependency state is the one the in-process key stands for (``state.key_fingerprint``):
        a memo or registry is keyed by its content, as this process holds it (a process whose
        earlier traces filled it finds rows of processes in that same state; a build of many
        specializations runs each in the state a new process has: :mod:`.aotbuild`). A bound
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
            self_fp = fingerprint(bound_self)
            if self_fp.identified:
                return _Persistent(None, _identified_reason(_identified_attributes(bound_self)))
            described = (*described[:5], (type(bound_self), f"state {self_fp.digest}"))
        key, why_not = index.key_or_reason(self._name, described)
        return _Persistent(key, why_not, described, self_fp, bound_self if self_fp is not None else None, keyed)

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
        """FlyDSL's artifact of a persistent row, read as :func:`.diskcache.load` reads it, made
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
    from flydeps._bindings import dict_items
    from flydeps._objects import instance_dict
    from flydeps._values import snapshot

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


def jit(func: Callable[..., Any] | None = None, *, on_drift: str = "raise") -> Any:
    """``@flyc.jit`` with a dependency-aware key: ``@jit``, ``@jit()``, ``@jit(on_drift=...)``."""
    check_policy(on_drift, "jit")

    def decorate(f: Callable[..., Any]) -> Launcher:
        if isinstance(f, Launcher):
            return f
        jf = f if isinstance(f, JitFunction) else JitFunction(f)
        return Launcher(jf, on_drift=on_drift)

    return decorate if func is None else decorate(func)
