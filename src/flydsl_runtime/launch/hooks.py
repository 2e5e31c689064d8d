"""Teach flydeps discovery about FlyDSL's objects; active as soon as flydsl_runtime is imported.

Contract
--------
* Unwrappers: discovery sees through ``JitFunction`` (to ``.func``) and ``KernelFunction`` (to
  ``._func``), so a ``cached_factory`` or a launcher's fingerprint reaches the kernels' helpers
  (our :class:`~flydsl_runtime.launch.jit.Launcher`, seen through to its ``JitFunction``, is
  registered by :mod:`.jit` itself: this module imports nothing of ``launch/``). Each also
  yields, as *settings* (``=`` labels, digested into a ``<kernel>#settings`` code node, see
  :func:`flydeps.register_unwrapper`), what of the object itself reaches the IR (read in FlyDSL 0.5's
  ``kernel_function.py`` / ``jit_function.py``): a kernel's ``name=`` and
  ``known_block_size=`` decorator arguments and its function's ``__name__`` (the
  ``gpu.func`` symbol when no name is given), a launcher function's ``__name__`` (the host
  ``func.func`` symbol). A decorator argument edited and reloaded is then a new digest. The
  launcher's compile hints are keyed by the launcher itself, not here.
* Trace env reads: ``JitFunction._trace`` runs inside :func:`flydeps.observe.environ.recording`;
  the reads of the last trace of the thread are taken by :func:`take_trace_env_reads`
  (the launcher's :class:`~flydsl_runtime.launch.jit.Entry` does, when it is made right after the
  trace). The backends' ``detect_target`` and ``compile_backend_name`` run
  :func:`~flydeps.observe.environ.paused`: their result, the resolved target, is keyed by the
  launcher (:mod:`flydsl_runtime.trace.target`), so ``ARCH=gfx942`` and detection of gfx942 still
  share entries, while the same variables read by anything else during the trace (a
  kernel's ``os.environ.get``) are recorded. FlyDSL's ``get_rocm_arch()`` (what ``s_waitcnt``
  and buffer ops encode for; it ignores ``ARCH``) is a derived read
  (:func:`flydeps.observe.environ.derive`, :data:`ROCM_ARCH`): a trace depends on the arch it
  answered, not on ``FLYDSL_GPU_ARCH``, ``HSA_OVERRIDE_GFX_VERSION`` or the ``PATH`` its
  hardware detection runs ``rocm_agent_enumerator`` through, so a row holds on every
  machine where it answers the same. It is replaced in ``flydsl.runtime.device`` (which
  modules importing it later take) and in every ``flydsl`` module that imported it before.
  ``torch.cuda.get_device_properties`` read while tracing is a derived read too, of what the
  device answers (:mod:`flydsl_runtime.trace.devprops`), and so is each of torch's state queries in
  :mod:`flydsl_runtime.trace.statequery`'s table (default dtype, determinism, TF32 and cuDNN switches).
* AST rewrites: FlyDSL's ``ASTRewriter.transform`` re-parses a decorated function and replaces
  its ``__code__`` in place (or returns a rebuilt function). The patched ``transform`` reports
  each rewrite with ``flydeps.note_code_rewrite(func, original_code)`` so the function digests
  as the source the user wrote, and installing the rewrite is not mistaken for a user change.
  The rewrite also stores FlyDSL's helper names into the function's module: reported to the
  builds running on the thread (:func:`flydeps.builds.protocol.note_namespace_write`), so a factory
  that decorates kernels is not taken for an A-B-A race on its own module.
  Every wrapper here only observes: it calls FlyDSL's own function and returns its result.
* Class caches: FlyDSL fills a struct class's layout cache (``__dsl_storage_layout_cache__``,
  in ``flydsl.expr.struct._storage_layout``) the first time a trace sizes or allocates it: a
  per-build ``@fx.struct SharedStorage`` (softmax, layernorm, rmsnorm, flash attention) gains
  an attribute during its launcher's first trace. The wrapped ``_storage_layout`` reports a
  write it made from its own thread with :func:`flydeps.builds.protocol.note_write`, so the build
  protocol adopts it as the trace's own write instead of discarding the trace.

:func:`ensure_hooks` is idempotent; it never changes what FlyDSL compiles.
"""

from __future__ import annotations

import functools
import importlib
import sys
import threading
from collections.abc import Callable, Iterable
from types import FunctionType
from typing import Any, cast

from flydsl.compiler import backends, jit_function
from flydsl.compiler.ast_rewriter import ASTRewriter
from flydsl.compiler.jit_function import JitFunction
from flydsl.compiler.kernel_function import KernelFunction

from flydeps import note_code_rewrite, register_unwrapper
from flydeps.builds import protocol as build
from flydeps.observe.environ import EMPTY, EnvReads, derive, paused, recording

from ..trace import devprops, statequery  # noqa: F401  (devprops adds its query to the table at import)

__all__ = ["ROCM_ARCH", "at_trace_end", "ensure_hooks", "take_trace_env_reads"]

# The derived read of FlyDSL's get_rocm_arch() (see the module docstring).
ROCM_ARCH = "=get_rocm_arch()"

_installed = False
_last_trace = threading.local()


def _name_of(func: object) -> object:
    return func.__name__ if isinstance(func, FunctionType) else None


# "=" labels are settings of the wrapper (see flydeps.register_unwrapper): digested into the
# kernel's or launcher's own node, so editing one is a code change, not data drift.


def _unwrap_jit(obj: JitFunction) -> Iterable[tuple[str, object]]:
    return (("func", obj.func), ("=symbol", _name_of(obj.func)))


def _unwrap_kernel(obj: KernelFunction) -> Iterable[tuple[str, object]]:
    func = obj._func
    block = getattr(obj, "_known_block_size", None)
    # "=." settings are the kernel object's own attributes: discovery also guards their
    # bindings, so `kernel._name = ...` after decoration is seen like an edited decorator.
    return (
        ("func", func),
        ("=._name", getattr(obj, "_name", None)),
        ("=._known_block_size", tuple(block) if block is not None else None),
        ("=symbol", _name_of(func)),
    )


def take_trace_env_reads() -> EnvReads:
    """The environment reads of the last FlyDSL trace this thread ran (then forgotten)."""
    reads = getattr(_last_trace, "reads", EMPTY)
    _last_trace.reads = EMPTY
    return reads


def at_trace_end(callback: Callable[[], None] | None) -> None:
    """Run ``callback`` when the next FlyDSL trace of this thread returns (before FlyDSL
    lowers and compiles it: no user code runs after that point of the call), once; None
    forgets it. What a launcher's miss records as the state its trace ended in is taken
    there, so another thread's change during the compile is a change after the trace."""
    _last_trace.at_end = callback


def _recording_trace(trace: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(trace)
    def trace_and_record(self: JitFunction, *args: Any, **kwargs: Any) -> Any:
        _last_trace.reads = EMPTY
        depth = getattr(_last_trace, "depth", 0)
        _last_trace.depth = depth + 1
        try:
            with recording() as rec:
                result = trace(self, *args, **kwargs)
        finally:
            _last_trace.depth = depth
        _last_trace.reads = rec.reads()
        at_end = getattr(_last_trace, "at_end", None) if depth == 0 else None  # the outermost trace's end
        if at_end is not None:
            _last_trace.at_end = None
            at_end()
        return result

    trace_and_record.__flydeps_original__ = trace  # type: ignore[attr-defined]
    return trace_and_record


def _pausing(fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def unrecorded(*args: Any, **kwargs: Any) -> Any:
        with paused():
            return fn(*args, **kwargs)

    unrecorded.__flydeps_original__ = fn  # type: ignore[attr-defined]
    return unrecorded


def _pause_target_resolution() -> None:
    """FlyDSL resolves the target in ``<Backend>.detect_target()`` (a staticmethod) after
    ``compile_backend_name()``; both are looked up at call time, so wrapping them here is seen
    by every caller."""
    if not hasattr(backends.compile_backend_name, "__flydeps_original__"):
        backends.compile_backend_name = _pausing(backends.compile_backend_name)  # type: ignore[assignment]
    for cls in set(backends._registry.values()):
        detect = cls.__dict__.get("detect_target")
        if isinstance(detect, staticmethod) and not hasattr(detect.__func__, "__flydeps_original__"):
            cls.detect_target = staticmethod(_pausing(detect.__func__))  # type: ignore[method-assign]


def _noting(transform: Callable[[object], object]) -> Callable[[object], object]:
    @functools.wraps(transform)
    def transform_and_note(f: object) -> object:
        original = f.__code__ if isinstance(f, FunctionType) else None
        result = transform(f)
        if isinstance(f, FunctionType):  # it installs its helper names into f's module
            build.note_namespace_write(f.__globals__)
        if original is not None and isinstance(result, FunctionType) and result.__code__ is not original:
            note_code_rewrite(result, original)
        return result

    transform_and_note.__flydeps_original__ = transform  # type: ignore[attr-defined]
    return transform_and_note


def _remembering_toolchain_key(compute: Callable[[], str]) -> Callable[[], str]:
    """FlyDSL's ``_flydsl_key`` (its toolchain key, hashed from every compiler source, native
    library and device bitcode file once per process) answered from the index's memo by
    file metadata (:func:`flydsl_runtime.persist.index.toolchain_key`) while the index is enabled:
    the same key, without the hash, for a first call that traces."""

    @functools.wraps(compute)
    def remembered_flydsl_key() -> str:
        from ..persist import index

        return index.toolchain_key() if index.enabled() else compute()

    remembered_flydsl_key.__flydeps_original__ = compute  # type: ignore[attr-defined]
    return remembered_flydsl_key


def _keyed_rocm_arch(original: Callable[[], str]) -> Callable[[], str]:
    """FlyDSL's ``get_rocm_arch``, its answer a derived read of the trace that asks it."""
    read = derive(ROCM_ARCH, original, "FlyDSL's get_rocm_arch()")

    @functools.wraps(original)
    def get_rocm_arch() -> str:
        return cast(str, read())

    get_rocm_arch.__flydeps_original__ = original  # type: ignore[attr-defined]
    return get_rocm_arch


def _key_rocm_arch_by_result() -> None:
    from flydsl.runtime import device

    original = device.get_rocm_arch
    if hasattr(original, "__flydeps_original__"):
        return
    keyed = _keyed_rocm_arch(original)
    for name, module in list(sys.modules.items()):
        if name.startswith("flydsl."):  # its namespace read directly: a module's __getattr__ never runs
            namespace = getattr(module, "__dict__", None)
            if type(namespace) is dict and namespace.get("get_rocm_arch") is original:
                namespace["get_rocm_arch"] = keyed


_LAYOUT_CACHE = "__dsl_storage_layout_cache__"


def _noting_layout_cache(layout: Callable[[type], Any]) -> Callable[[type], Any]:
    """FlyDSL's ``_storage_layout(schema)``, reporting the cache attribute it sets on
    ``schema`` to the builds running on this thread (:func:`flydeps.builds.protocol.note_write`)."""

    @functools.wraps(layout)
    def storage_layout(schema: type) -> Any:
        namespace = getattr(schema, "__dict__", None)
        had = namespace is not None and _LAYOUT_CACHE in namespace
        result = layout(schema)
        if not had and isinstance(schema, type):
            build.note_write(schema, _LAYOUT_CACHE)
        return result

    storage_layout.__flydeps_original__ = layout  # type: ignore[attr-defined]
    return storage_layout


def _note_layout_caches() -> None:
    """Wrap ``flydsl.expr.struct._storage_layout`` (looked up at call time by its callers)."""
    struct = importlib.import_module("flydsl.expr.struct")  # flydsl.expr.struct is the decorator

    current = getattr(struct, "_storage_layout", None)
    if isinstance(current, FunctionType) and not hasattr(current, "__flydeps_original__"):
        struct._storage_layout = _noting_layout_cache(current)  # type: ignore[attr-defined]


def ensure_hooks() -> None:
    """Register the unwrappers of FlyDSL's types, wrap ``ASTRewriter.transform``,
    ``JitFunction._trace``, target resolution, ``get_rocm_arch``,
    ``torch.cuda.get_device_properties`` (:mod:`flydsl_runtime.trace.devprops`) with the other
    state queries (:mod:`flydsl_runtime.trace.statequery`) and the toolchain key (once per
    process)."""
    global _installed
    if _installed:
        return
    register_unwrapper(JitFunction, _unwrap_jit)
    register_unwrapper(KernelFunction, _unwrap_kernel)
    current = ASTRewriter.__dict__["transform"].__func__
    if not hasattr(current, "__flydeps_original__"):
        bound_transform = current.__get__(ASTRewriter, type(ASTRewriter))
        ASTRewriter.transform = staticmethod(_noting(bound_transform))  # type: ignore[method-assign]
    if not hasattr(JitFunction._trace, "__flydeps_original__"):
        JitFunction._trace = _recording_trace(JitFunction._trace)  # type: ignore[method-assign]
    _pause_target_resolution()
    _key_rocm_arch_by_result()
    _note_layout_caches()
    statequery.install()  # the state-query table, torch.cuda.get_device_properties (devprops) with it
    if not hasattr(jit_function._flydsl_key, "__flydeps_original__"):
        jit_function._flydsl_key = _remembering_toolchain_key(jit_function._flydsl_key)  # type: ignore[assignment]
    _installed = True
