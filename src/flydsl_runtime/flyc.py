"""The one-line migration: ``import flydsl_runtime.flyc as flyc``.

Contract
--------
Everything public in ``flydsl.compiler`` is re-exported unchanged (``CompiledFunction``,
``GPUTarget``, ``JitArgumentRegistry``, ``from_dlpack``, ``from_torch_tensor``,
``from_c_void_p``, ``get_backend``, ...), except:

* ``jit`` -- :func:`flydsl_runtime.launch.jit.jit`: a launcher whose warm call is keyed by its
  dependencies instead of a trace (``@flyc.jit``, ``@flyc.jit()``, ``@flyc.jit(on_drift=...)``);
* ``compile`` -- ``flyc.compile(launcher, *args)`` and ``flyc.compile[hints](launcher, ...)``
  as in FlyDSL, reusing the launcher's entry when its key hits; plain FlyDSL ``JitFunction``
  objects go to FlyDSL's own ``compile``;
* ``kernel`` -- FlyDSL's, re-exported (its AST rewrite is noted for flydeps on import);
* ``cached_factory`` -- flydeps' ``lru_cache`` drop-in; it sees through FlyDSL kernels and
  launchers to the helpers they call.
"""

from __future__ import annotations

import functools
from typing import Any

import flydsl.compiler as _flydsl_compiler
from flydsl.compiler import *  # noqa: F401,F403  (the public FlyDSL API, re-exported)
from flydsl.compiler.jit_function import CompileCallable as _FlydslCompile

from flydeps import cached_factory  # noqa: F401  (re-exported: see __all__)

from .launch.hooks import ensure_hooks
from .launch.jit import Launcher, jit  # noqa: F401  (jit is re-exported: see __all__)

__all__ = sorted({*_flydsl_compiler.__all__, "cached_factory", "compile", "jit", "kernel"})

ensure_hooks()
_flydsl_compile = _FlydslCompile()


def _as_launcher(func: object) -> tuple[Launcher | None, object]:
    """``(launcher, bound self)`` for a launcher or a launcher bound to an instance."""
    if isinstance(func, Launcher):
        return func, None
    if isinstance(func, functools.partial) and not func.keywords and len(func.args) == 1:
        method = func.func
        owner = getattr(method, "__self__", None)
        if isinstance(owner, Launcher) and getattr(method, "__func__", None) is Launcher._bound_call:
            return owner, func.args[0]
    return None, None


class Compile:
    """``flyc.compile``: subscriptable with compile hints, like FlyDSL's ``CompileCallable``."""

    def __init__(self, hints: dict | None = None) -> None:
        self._hints = hints

    def __getitem__(self, hints: dict) -> Compile:
        if not isinstance(hints, dict):
            raise TypeError(f"flyc.compile[...] expects a dict of compile hints, got {type(hints).__name__}")
        return Compile(hints)

    def __call__(self, func: Any, *args: Any, **kwargs: Any) -> Any:
        launcher, bound_self = _as_launcher(func)
        if launcher is None:
            flydsl_compile = _flydsl_compile[self._hints] if self._hints else _flydsl_compile
            return flydsl_compile(func, *args, **kwargs)
        if self._hints:
            launcher.compile_hints = {**launcher.compile_hints, **self._hints}
        if not args and not kwargs:
            return func
        return launcher.compile(bound_self, args, kwargs)


compile = Compile()  # noqa: A001  (FlyDSL's name)
kernel = _flydsl_compiler.kernel
