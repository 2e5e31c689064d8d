"""flydsl_runtime: FlyDSL's JIT with an exact, dependency-aware in-process key.

Data flow, one subpackage per side (docs/design.md, "Layout"): ``trace`` (the parts of a
key: argument signatures, target, code-gen environment; derived reads of library state;
recompile reasons) + flydeps' guarded fingerprint -> ``launch`` (the launcher: the warm
decision, the miss path as named steps, FlyDSL hooks, verify mode) over ``persist`` (the
persistent index, FlyDSL's disk cache, strict AOT mode); ``aot`` builds shippable
directories. ``flyc`` is the facade (``import flydsl_runtime.flyc as flyc``); ``install()``
patches ``flydsl.compiler`` in place. The public API is what this module exports. See
docs/runtime.md.
"""

from __future__ import annotations

from ._install import install, installed, uninstall
from .launch.jit import CacheInfo, Entry, Launcher, jit
from .launch.verify import StaleArtifactError
from .trace.argsig import ArgumentSignatureError

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
