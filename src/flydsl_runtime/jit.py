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
  that changed follows ``on_drift``: ``"raise"`` (default, ``GlobalDriftError`` naming the
  global and module), ``"rebuild"`` or ``"warn"``. Baselines are taken as things stand when
  the trace finishes, per owner class;
* argument signatures: :mod:`flydsl_runtime.argsig`; target: :mod:`flydsl_runtime.target`;
  env: :mod:`flydsl_runtime.envkey`; compile hints: persistent plus thread-local overlay;
* bound self: the instance's ``__cache_signature__()`` when it has one, else its identity
  (the entry keeps the instance alive so the id cannot be reused).

A hit calls the stored ``CompiledFunction`` directly. A miss asks FlyDSL to trace and compile
as usual (its IR-keyed memory and disk caches stay the cross-process truth), records the
entry with FlyDSL's IR key, and logs why it missed (:mod:`flydsl_runtime.explain`). Under
FlyDSL's ``COMPILE_ONLY=1`` a call compiles and records the entry without launching, and
later calls are hits that return ``None``. ``FLYDEPS_VERIFY=1`` re-traces on every hit and
compares IR keys (:mod:`flydsl_runtime.verify`).
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

from flydsl._mlir import ir
from flydsl.compiler.jit_function import CompiledFunction, JitFunction
from flydsl.compiler.kernel_function import CompilationContext, merge_compile_hints

from flydeps import Guard, fingerprint
from flydeps.errors import GlobalDriftError
from flydeps.fingerprint import Fingerprint, fingerprint_roots

from . import explain
from .argsig import ArgSigner
from .envkey import env_key
from .target import current_target

__all__ = ["CacheInfo", "Entry", "Launcher", "ON_DRIFT"]

log = logging.getLogger("flydsl_runtime")

ON_DRIFT = ("raise", "rebuild", "warn")
_HINTS_TLS = CompilationContext._compile_hints
_TRUE = frozenset(("1", "true", "yes", "on", b"1", b"true", b"yes", b"on"))

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


@dataclass(frozen=True, slots=True)
class Entry:
    """One compiled specialization: what FlyDSL built for one key, and what it was built from."""

    key: tuple
    compiled: CompiledFunction | None  # None when recorded under COMPILE_ONLY=1
    ir_key: str  # FlyDSL's _artifact_cache_key of the traced IR
    fingerprint: Fingerprint
    extra_guards: tuple[Guard, ...]  # guards of functions passed as compile-time arguments
    pinned_self: object  # an identity-keyed bound instance, kept alive


@dataclass(frozen=True, slots=True)
class _OwnerState:
    fingerprint: Fingerprint
    guard: Guard
    digest: str


def _freeze(value: object) -> object:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, set):
        return frozenset(_freeze(v) for v in value)
    return value


class Launcher:
    """A FlyDSL ``@jit`` launcher with an exact, guard-validated in-process key."""

    def __init__(self, jit_function: JitFunction, *, on_drift: str = "raise") -> None:
        if not isinstance(jit_function, JitFunction):
            raise TypeError(f"Launcher wraps a flydsl JitFunction, got {type(jit_function).__name__}")
        if on_drift not in ON_DRIFT:
            raise ValueError(f"on_drift must be one of {ON_DRIFT}, got {on_drift!r}")
        self._jf = jit_function
        self._on_drift = on_drift
        self._name = f"{jit_function.func.__module__}.{jit_function.func.__qualname__}"
        self._owners: dict[type | None, _OwnerState] = {}
        self._entries: dict[tuple, Entry] = {}
        self._last: dict[type | None, Entry] = {}
        self._lock = threading.RLock()
        self._signer: ArgSigner | None = None
        self._nparams = -1
        self._hits = 0
        self._misses = 0
        functools.update_wrapper(self, jit_function.func)

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
        if name.startswith("__") or "_jf" not in self.__dict__:
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
            self._hits = self._misses = 0

    def entries(self) -> tuple[Entry, ...]:
        return tuple(self._entries.values())

    # --- calls ----------------------------------------------------------------------

    def _bound_call(self, obj: object, *args: Any, **kwargs: Any) -> Any:
        return self._call(obj, args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(None, args, kwargs)

    def _call(self, bound_self: object, args: tuple, kwargs: dict) -> Any:
        if ir.Context.current is not None:  # called from inside another trace: FlyDSL inlines
            return self._jf.func(*((bound_self,) if bound_self is not None else ()), *args, **kwargs)
        owner = type(bound_self) if bound_self is not None else None
        state = self._owners.get(owner)
        if state is None or not state.guard.check():
            state = self._revalidate(owner, state)
        positional = args if not kwargs and len(args) == self._nparams else self._bind(args, kwargs)
        key = self._key(state, bound_self, positional)
        compile_only = env_flag(b"COMPILE_ONLY")
        entry = self._entries.get(key)
        if entry is None or not self._usable(entry, compile_only):
            compiled, launched = self._miss(owner, state, bound_self, positional, key, compile_only)
            if compiled is not None and not launched and not compile_only:
                return compiled(*positional)
            return None
        self._hits += 1
        if _env_get(b"FLYDEPS_VERIFY") is not None and env_flag(b"FLYDEPS_VERIFY"):
            from .verify import verify_hit

            verify_hit(self, entry, bound_self, positional)
        if compile_only:
            return None
        return entry.compiled(*positional)

    def compile(self, bound_self: object, args: tuple, kwargs: dict) -> CompiledFunction | None:
        """``flyc.compile`` for this launcher: the stored ``CompiledFunction`` or a new one."""
        owner = type(bound_self) if bound_self is not None else None
        state = self._owners.get(owner)
        if state is None or not state.guard.check():
            state = self._revalidate(owner, state)
        positional = self._bind(args, kwargs)
        key = self._key(state, bound_self, positional)
        compile_only = env_flag(b"COMPILE_ONLY")
        entry = self._entries.get(key)
        if entry is not None and self._usable(entry, compile_only):
            self._hits += 1
            return entry.compiled
        compiled, _launched = self._miss(owner, state, bound_self, positional, key, compile_only)
        return compiled

    # --- key ------------------------------------------------------------------------

    def _key(self, state: _OwnerState, bound_self: object, positional: tuple) -> tuple:
        target = current_target()
        overlay = getattr(_HINTS_TLS, "data", None)
        persistent = self._jf.compile_hints
        hints = _freeze(merge_compile_hints(persistent, overlay)) if (persistent or overlay) else ()
        if bound_self is None:
            self_key = None
        else:
            signed = getattr(type(bound_self), "__cache_signature__", None)
            self_key = (type(bound_self), bound_self.__cache_signature__() if signed else id(bound_self))
        return (state.digest, self._signer(positional), target, env_key(target[0][1]), hints, self_key)

    @staticmethod
    def _usable(entry: Entry, compile_only: bool) -> bool:
        if entry.compiled is None and not compile_only:
            return False  # recorded by a COMPILE_ONLY call: this call must build its launchable form
        return all(g.check() for g in entry.extra_guards) if entry.extra_guards else True

    def _bind(self, args: tuple, kwargs: dict) -> tuple:
        if self._signer is None:
            self._ensure_signature()
        try:
            bound = self._jf._sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self._name}(): {exc}") from None
        bound.apply_defaults()
        return tuple(bound.arguments.values())

    def _ensure_signature(self) -> None:
        self._jf._ensure_sig()
        self._signer = ArgSigner(self._name, self._jf._sig)
        self._nparams = len(self._jf._sig.parameters)

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
                return self._baseline(owner, fingerprint_roots(self._roots(owner)))
            changes = current.guard.changes()
            fresh = current.fingerprint.refresh()
            if fresh.digest == current.digest or not changes:
                return self._baseline(owner, fresh)
            if all(c.is_data for c in changes) and self._on_drift != "rebuild":
                return self._drift(owner, current, fresh, changes)
            return self._baseline(owner, fresh)

    def _baseline(self, owner: type | None, fp: Fingerprint, digest: str | None = None) -> _OwnerState:
        state = _OwnerState(fp, fp.guard(), digest or fp.digest)
        self._owners[owner] = state
        return state

    def _drift(self, owner: type | None, current: _OwnerState, fresh: Fingerprint, changes: tuple) -> _OwnerState:
        consumer = self._name + (f" (owner class {owner.__qualname__})" if owner is not None else "")
        change = changes[0]
        if self._on_drift == "raise":
            raise GlobalDriftError(change.module, change.name, change.old, change.new, consumer=consumer)
        log.warning(
            "%s: global %s.%s changed after the launcher was compiled (%s -> %s); running the code "
            "compiled with the old value because on_drift='warn'",
            consumer,
            change.module,
            change.name,
            change.old,
            change.new,
        )
        return self._baseline(owner, fresh, digest=current.digest)

    # --- miss -----------------------------------------------------------------------

    def _miss(
        self,
        owner: type | None,
        state: _OwnerState,
        bound_self: object,
        positional: tuple,
        key: tuple,
        compile_only: bool,
    ) -> tuple[CompiledFunction | None, bool]:
        """Trace + compile through FlyDSL; returns (CompiledFunction or None, already launched)."""
        with self._lock:  # FlyDSL keeps per-call state (_last_compiled) on the JitFunction
            entry = self._entries.get(key)
            if entry is not None and self._usable(entry, compile_only):
                self._hits += 1  # another thread built it while this one waited
                return entry.compiled, False
            previous = self._last.get(owner)
            reasons = explain.describe_miss(
                self._name,
                self._signer.names,
                previous.key if previous else None,
                key,
                previous.fingerprint if previous else None,
                state.fingerprint,
                owner,
            )
            if previous is not None or self._misses:
                explain.log_recompile(self._name, reasons)
            extra = tuple(fingerprint(fn).guard() for fn in self._signer.callables(positional))
            full = (bound_self, *positional) if bound_self is not None else positional
            compiled = self._jf._compile_or_execute(full, {}, execute=True, return_compiled=True)
            ir_key = self._jf._last_compiled[0]
            after = state.fingerprint.refresh()  # baseline what the finished trace left behind
            if after.digest != state.digest:
                state = self._baseline(owner, after)
                key = (state.digest, *key[1:])
            else:
                self._baseline(owner, after)
            pinned = bound_self if key[5] is not None and not hasattr(type(bound_self), "__cache_signature__") else None
            if pinned is not None:
                # Keyed by identity: what the trace read of the instance's own state (its
                # attributes, as they stand now the trace finished) must still hold on a hit.
                extra = (*extra, fingerprint(pinned).guard())
            entry = Entry(key, compiled, ir_key, state.fingerprint, extra, pinned)
            self._entries[key] = entry
            self._last[owner] = entry
            self._misses += 1
        launched = compiled is not None and compiled._call_state is not None
        return compiled, launched


def jit(func: Callable[..., Any] | None = None, *, on_drift: str = "raise") -> Any:
    """``@flyc.jit`` with a dependency-aware key: ``@jit``, ``@jit()``, ``@jit(on_drift=...)``."""
    if on_drift not in ON_DRIFT:
        raise ValueError(f"on_drift must be one of {ON_DRIFT}, got {on_drift!r}")

    def decorate(f: Callable[..., Any]) -> Launcher:
        if isinstance(f, Launcher):
            return f
        jf = f if isinstance(f, JitFunction) else JitFunction(f)
        return Launcher(jf, on_drift=on_drift)

    return decorate if func is None else decorate(func)
