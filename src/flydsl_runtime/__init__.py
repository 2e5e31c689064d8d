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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._install import install, installed, uninstall
    from .launch.jit import CacheInfo, Entry, Launcher, jit
    from .launch.verify import StaleArtifactError
    from .trace.argsig import ArgumentSignatureError

# The public API by the module defining it, imported on first use (PEP 562): a subpackage
# that needs neither FlyDSL nor torch (``persist``, as ``flydeps aot list`` uses it) is
# imported without them.
_LAZY = {
    "install": "._install",
    "installed": "._install",
    "uninstall": "._install",
    "CacheInfo": ".launch.jit",
    "Entry": ".launch.jit",
    "Launcher": ".launch.jit",
    "jit": ".launch.jit",
    "StaleArtifactError": ".launch.verify",
    "ArgumentSignatureError": ".trace.argsig",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    # The facade first, whichever name is asked: importing it installs the hooks every
    # launcher relies on (FlyDSL's trace recorded, torch's state queries observed), as
    # importing this package did when it imported its API eagerly.
    importlib.import_module(".flyc", __name__)
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value
    return value


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
