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
  that changed follows ``on_drift`` (:mod:`flydeps.builds.drift`, the policy ``cached_factory``
  uses too): ``"raise"`` (default: FlyDSL's IR decides, ``Launcher._judge_drift`` in :mod:`flydsl_runtime.miss` --
  each entry traced before the change is re-traced once, no launch, and kept under the new
  state on the same IR key, else ``GlobalDriftError`` naming the global and module with its
  old and new values), ``"rebuild"`` or ``"warn"``. Data back at a state before other
  builds' writes (``Verdict.UNDONE``, a memo another launcher filled, emptied) is judged
  the same way under every policy, a different IR key giving a miss, never a raise. Traces follow flydeps' build
  protocol (:mod:`flydeps.builds.protocol`): the baseline is the state validated *before* the trace;
  the trace's own writes (a memo dict, a registry it appends to) are adopted, also by every
  other launcher and factory that read them, and so are the class caches FlyDSL fills while
  tracing (a per-build ``@fx.struct SharedStorage``'s layout: one trace per new launcher);
  any other change made while it ran, or a namespace or dict it read written and put back
  meanwhile (A-B-A, CPython 3.10/3.11), a function of its graph whose ``__code__`` or
  ``__defaults__`` another thread assigned, or an environment variable it read that
  another thread wrote (``_env_raced`` in :mod:`flydsl_runtime.miss`), means the trace is returned to its caller
  but not kept. A changed default of a runtime-only parameter (the stream) is keyed as the argument, not
  drift; a state the launcher already built for (an undo) takes its key again
  (``Launcher._states``, the last :data:`flydsl_runtime.records.STATES_KEPT` per owner class; the
  bookkeeping is :mod:`flydsl_runtime.states`);
* argument signatures: :mod:`flydsl_runtime.trace.argsig`; target: :mod:`flydsl_runtime.trace.target`;
  env: :mod:`flydsl_runtime.trace.envkey`; compile hints: persistent plus thread-local overlay;
* bound self: the instance's ``__cache_signature__()`` when it has one, else its identity
  (the entry keeps the instance alive so the id cannot be reused, and guards its state);
  in the persistent index, such an instance is keyed by its state instead.

In the key, every part that does not depend on an argument's value (a tensor's signature, a
stream's, the target with the env key) is an interned token (:func:`trace.argsig.token`) hashed by
identity, so the key hashes in constant time per argument; ``Entry.key`` holds the same key
spelled out (what :mod:`trace.explain` compares). A plain call's warm path is written out in
``__call__``: reads and identity checks only, each the test the general path makes, and
anything unusual (keywords, a failed guard, hints, debug info, verify mode, an entry with
extra guards) goes to the general path.

A hit calls the stored ``CompiledFunction`` directly. A miss (:mod:`flydsl_runtime.miss`, in named steps) asks
FlyDSL to trace and compile as usual (its IR-keyed memory and disk caches stay the cross-process truth), records the
entry with FlyDSL's IR key, and logs why it missed (:mod:`flydsl_runtime.trace.explain`). Under
FlyDSL's ``COMPILE_ONLY=1`` a call compiles and records the entry without launching, and
later calls are hits that return ``None``. ``FLYDEPS_VERIFY=1`` re-traces on every hit and
compares IR keys (:mod:`flydsl_runtime.launch.verify`); ``FLYDEPS_VERIFY=0.01`` re-traces that share
of hits, chosen per entry deterministically, as a production canary.

Before tracing, a miss asks the persistent index (:mod:`persist.index`) for the call's
cross-process key; a row is served by FlyDSL's artifact from its disk cache, read by its
cache manager; where this process cannot write that cache's directory (a shipped directory
owned by another user, a read-only mount) by :mod:`persist.diskcache`, which reads without
FlyDSL's lock and keeps what a trace builds in memory.

This module holds the call paths (the warm path, ``_call``, ``compile``), the key and the
signature; :class:`Launcher` inherits the miss path (:class:`flydsl_runtime.miss.MissPath`) and the
dependency-state bookkeeping (:class:`flydsl_runtime.states.DependencyStates`); its records (``Entry``,
``CacheInfo``, the owner states) are :mod:`flydsl_runtime.records`, re-exported here.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
import weakref
from collections.abc import Callable, Iterable, Mapping
from types import FunctionType, MethodType
from typing import Any, NamedTuple, cast

from blake3 import blake3
from flydsl._mlir import ir
from flydsl.compiler.jit_function import CompiledFunction, JitFunction
from flydsl.compiler.kernel_function import CompilationContext, merge_compile_hints

from flydeps import Guard, register_unwrapper, settings
from flydeps.builds.drift import DriftPolicy, check_policy
from flydeps.graph import NodeKind
from flydeps.keys.fingerprint import Fingerprint, fingerprint_roots
from flydeps.live.discover import Unwrapper
from flydeps.observe.environ import version as environ_version

from ..trace import explain
from ..trace.argsig import ArgSigner, SigToken, token
from ..trace.binder import ArgBinder
from ..trace.debuginfo import positions_in_ir
from ..trace.envkey import env_key, paths_configured
from ..trace.target import device_id_reader, resolved_target
from .hooks import ensure_hooks
from .miss import MissPath
from .records import CacheInfo, Entry, OwnerState, usable, why_unusable
from .verify import checked_hit

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


_CODE_NODES = (NodeKind.FUNCTION, NodeKind.METHOD)


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
    ``(target, env)`` in a launcher key (:func:`flydsl_runtime.trace.argsig.token`: hashed by identity)."""

    target: tuple[str, str, int]
    env: object
    compile_only: bool
    verify: bool
    debug_info: bool
    token: SigToken


# (environment version, CallEnv): a warm call re-reads the environment only after
# os.environ was modified (flydeps.observe.environ.version: PEP 509 tag or dict watcher).
# [environment version, CallEnv], replaced as a pair (one slice assignment, under the GIL;
# flydsl_runtime.launch._warmcall reads the same list). The first item starts as an object that is
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


_device_cell: list = [None]  # the same reader, for flydsl_runtime.launch._warmcall


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


# MissPath first: its MRO holds whether _WarmBase is the C WarmCall or object (FLYDEPS_WARMCALL=0);
# neither mixin defines __call__ or a class attribute, so WarmCall's slot and members are the ones found.
class Launcher(MissPath, _WarmBase):  # type: ignore[misc,valid-type]
    """A FlyDSL ``@jit`` launcher with an exact, guard-validated in-process key."""

    def __init__(self, jit_function: JitFunction, *, on_drift: str = "raise") -> None:
        if not isinstance(jit_function, JitFunction):
            raise TypeError(f"Launcher wraps a flydsl JitFunction, got {type(jit_function).__name__}")
        ensure_hooks()  # (flyc's import installs them; a launcher made through this module alone needs them too)
        self._on_drift: DriftPolicy = check_policy(on_drift, "Launcher")
        self._jf = jit_function
        self._name = f"{jit_function.func.__module__}.{jit_function.func.__qualname__}"
        self._owners: dict[type | None, OwnerState] = {}
        self._entries: dict[tuple, Entry] = {}
        self._last: dict[type | None, Entry] = {}
        # owner -> (dependency state, (digest, digest with source positions)); debug info only
        self._positions: dict[type | None, tuple[OwnerState, tuple[str, str], tuple[str, ...]]] = {}
        # owner -> {fingerprint digest: the state kept for it}: a state the process already
        # built for (an undo, a mock.patch leaving its block) is found again by its digest
        self._states: dict[type | None, dict[str, OwnerState]] = {}
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
        # id(instance) -> (instance, its state's fingerprint, that fingerprint's guard): bound
        # instances keyed by their state, reused while the guard holds (MissPath._instance_state)
        self._instances: dict[int, tuple[object, Fingerprint, Guard]] = {}
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
        guarded = entry is not None and entry.extra_guards and not all(g.check() for g in entry.extra_guards)
        if guarded:  # a function argument's or a bound instance's guard: re-armed when its state is the same
            entry, guarded = self._rearmed(owner, key, entry)  # type: ignore[arg-type]  # guarded => entry
        if (  # _usable(entry, compile_only), written out: this is the warm path
            entry is None or (entry.compiled is None and not compile_only) or not entry.env_reads.holds() or guarded
        ):
            if entry is not None:
                explain.note_unusable(self._name, why_unusable(entry, compile_only))
            compiled, launched = self._miss(owner, state, bound_self, positional, key, compile_only)
            if compiled is not None and not launched and not compile_only:
                return compiled(*positional)
            return None
        self._hits += 1
        if call_env.verify and (share := _verify_share()):
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
        if entry is not None and entry.extra_guards and not all(g.check() for g in entry.extra_guards):
            entry = self._rearmed(owner, key, entry)[0]
        if entry is not None and usable(entry, compile_only):
            self._hits += 1
            return entry.compiled
        if entry is not None:
            explain.note_unusable(self._name, why_unusable(entry, compile_only))
        compiled, _launched = self._miss(owner, state, bound_self, positional, key, compile_only)
        return compiled

    # --- key ------------------------------------------------------------------------

    def _key(self, state: OwnerState, bound_self: object, positional: tuple, call_env: CallEnv | None = None) -> tuple:
        """The call's key: ``(digest, argument key form, env token, device id, hints, self key)``
        (see :func:`flydsl_runtime.records.described` for the same key with every token spelled out)."""
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

    def _with_positions(self, owner: type | None, state: OwnerState) -> tuple[str, str, tuple]:
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

    def _bind(self, args: tuple, kwargs: dict) -> tuple:
        """The call's arguments in parameter order, defaults filled (:mod:`flydsl_runtime.trace.binder`,
        no ``inspect``)."""
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


# The type that defines the wrapper teaches discovery to see through it (what hooks.py does
# for FlyDSL's own types): a launcher's fingerprint reaches its JitFunction's helpers.
register_unwrapper(Launcher, cast("Unwrapper", Launcher.unwrap))  # called on Launchers only


def jit(func: Callable[..., Any] | None = None, *, on_drift: str = "raise") -> Any:
    """``@flyc.jit`` with a dependency-aware key: ``@jit``, ``@jit()``, ``@jit(on_drift=...)``."""
    check_policy(on_drift, "jit")

    def decorate(f: Callable[..., Any]) -> Launcher:
        if isinstance(f, Launcher):
            return f
        jf = f if isinstance(f, JitFunction) else JitFunction(f)
        return Launcher(jf, on_drift=on_drift)

    return decorate if func is None else decorate(func)
