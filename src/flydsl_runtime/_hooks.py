"""Teach flydeps discovery about FlyDSL's objects; active as soon as flydsl_runtime is imported.

Contract
--------
* Unwrappers: discovery sees through ``JitFunction`` (to ``.func``), ``KernelFunction`` (to
  ``._func``) and our :class:`~flydsl_runtime.jit.Launcher` (to its ``JitFunction``), so a
  ``cached_factory`` or a launcher's fingerprint reaches the kernels' helpers.
* AST rewrites: FlyDSL's ``ASTRewriter.transform`` re-parses a decorated function and replaces
  its ``__code__`` in place (or returns a rebuilt function). The patched ``transform`` reports
  each rewrite with ``flydeps.note_code_rewrite(func, original_code)`` so the function digests
  as the source the user wrote, and installing the rewrite is not mistaken for a user change.
  The wrapper only observes: it calls FlyDSL's own transform and returns its result.

:func:`ensure_hooks` is idempotent; it never changes what FlyDSL compiles.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from types import FunctionType

from flydsl.compiler.ast_rewriter import ASTRewriter
from flydsl.compiler.jit_function import JitFunction
from flydsl.compiler.kernel_function import KernelFunction

from flydeps import note_code_rewrite, register_unwrapper

__all__ = ["ensure_hooks"]

_installed = False


def _unwrap_jit(obj: JitFunction) -> Iterable[tuple[str, object]]:
    return (("func", obj.func),)


def _unwrap_kernel(obj: KernelFunction) -> Iterable[tuple[str, object]]:
    return (("func", obj._func),)


def _noting(transform: Callable[[object], object]) -> Callable[[object], object]:
    @functools.wraps(transform)
    def transform_and_note(f: object) -> object:
        original = f.__code__ if isinstance(f, FunctionType) else None
        result = transform(f)
        if original is not None and isinstance(result, FunctionType) and result.__code__ is not original:
            note_code_rewrite(result, original)
        return result

    transform_and_note.__flydeps_original__ = transform  # type: ignore[attr-defined]
    return transform_and_note


def ensure_hooks() -> None:
    """Register the unwrappers and wrap ``ASTRewriter.transform`` (once per process)."""
    global _installed
    if _installed:
        return
    from .jit import Launcher

    register_unwrapper(JitFunction, _unwrap_jit)
    register_unwrapper(KernelFunction, _unwrap_kernel)
    register_unwrapper(Launcher, Launcher.unwrap)
    current = ASTRewriter.__dict__["transform"].__func__
    if not hasattr(current, "__flydeps_original__"):
        bound_transform = current.__get__(ASTRewriter, type(ASTRewriter))
        ASTRewriter.transform = staticmethod(_noting(bound_transform))  # type: ignore[method-assign]
    _installed = True
