"""flydsl_runtime: FlyDSL's JIT with an exact, dependency-aware in-process key.

Data flow (one module per stage):
``argsig`` (argument cache signatures) + ``target`` (resolved GPU target, device id) +
``envkey`` (live code-gen environment) + flydeps' guarded fingerprint -> ``jit`` (the key,
the lookup, FlyDSL's trace/compile on a miss) -> ``explain`` (recompile reasons) and
``verify`` (``FLYDEPS_VERIFY=1`` re-trace on hits). ``flyc`` is the facade
(``import flydsl_runtime.flyc as flyc``); ``install()`` patches ``flydsl.compiler`` in place.
See docs/runtime.md.
"""

from __future__ import annotations

from ._install import install, installed, uninstall
from .argsig import ArgumentSignatureError
from .jit import CacheInfo, Entry, Launcher, jit
from .verify import StaleArtifactError

__all__ = [
    "ArgumentSignatureError",
    "CacheInfo",
    "Entry",
    "Launcher",
    "StaleArtifactError",
    "install",
    "installed",
    "jit",
    "uninstall",
]
