"""flydeps: exact, nearly free cache keys for compile factories and JITs.

Data flow, one subpackage per stage (docs/design.md, "Layout"): ``live`` (discovery: live
objects -> DepGraph, reading code with ``code`` and values with ``values``, the reads
bytecode cannot predict with ``observe``) -> ``keys`` (Merkle fingerprints; guards, on the
``watch`` counters) -> ``builds`` (the build protocol and ``cached_factory``); ``static`` is
the same graph from files, ``migrate`` the codemod, ``cli`` the command line. The public
API is what this module exports (``__all__``); the subpackages are internal.
"""

from __future__ import annotations

import logging

from .errors import DiscoveryError, FlydepsError, GlobalDriftError
from .settings import SettingError

try:
    from .builds.factory import cached_factory
    from .graph import DepGraph, Edge, EdgeKind, Location, Node, NodeKind
    from .keys.fingerprint import Fingerprint, NodeDiff, fingerprint, transitive_digests
    from .keys.guard import Change, ChangeKind, Guard
    from .live.discover import discover, note_code_rewrite, register_unwrapper
except SettingError as _bad:
    # A FLYDEPS_* variable read at import (FLYDEPS_SNAPSHOT_LIMIT, FLYDEPS_WATCH, ...) holds a bad
    # value. ``flydeps`` stays importable so that the CLI (``flydeps.cli``) can report it in one
    # line and exit 2; using any public name raises the error.
    _BAD_SETTING: SettingError = _bad

    def _raise_bad_setting(name: str) -> object:
        if name in __all__:
            raise _BAD_SETTING.with_traceback(None)
        raise AttributeError(f"module 'flydeps' has no attribute {name!r}")

    globals()["__getattr__"] = _raise_bad_setting

__all__ = [
    "Change",
    "ChangeKind",
    "DepGraph",
    "DiscoveryError",
    "Edge",
    "EdgeKind",
    "Fingerprint",
    "FlydepsError",
    "GlobalDriftError",
    "Guard",
    "Location",
    "Node",
    "NodeDiff",
    "NodeKind",
    "SettingError",
    "cached_factory",
    "discover",
    "fingerprint",
    "note_code_rewrite",
    "register_unwrapper",
    "transitive_digests",
]

__version__ = "0.1.0"
# The rules by which a key covers a build (discovery, digests, recorded inputs such as the
# files a trace reads): bumped with every change to them, so a persistent row made under
# other rules never serves, even at the same __version__ (a row made before a fix would
# otherwise keep serving what the fix now covers). 1: every row before it (no number).
# 3: state reached through instances, library callables, imports and library data (issue 35).
KEY_FORMAT = 3

logging.getLogger("flydeps").addHandler(logging.NullHandler())
