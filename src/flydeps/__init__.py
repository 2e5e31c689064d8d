"""flydeps: exact, nearly free cache keys for compile factories and JITs.

Data flow: ``discover`` (live objects -> DepGraph) -> digests (``_bytecode``,
``_values``) -> ``fingerprint`` (Merkle) -> ``guard`` (hot-path identity checks) ->
consumers (``cached_factory``, the FlyDSL runtime, the ``flydeps`` CLI).
"""

from __future__ import annotations

import logging

from .discover import discover, note_code_rewrite, register_unwrapper
from .errors import DiscoveryError, FlydepsError, GlobalDriftError
from .factory import cached_factory
from .fingerprint import Fingerprint, NodeDiff, fingerprint, transitive_digests
from .graph import DepGraph, Edge, EdgeKind, Location, Node, NodeKind
from .guard import Change, ChangeKind, Guard

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
    "cached_factory",
    "discover",
    "fingerprint",
    "note_code_rewrite",
    "register_unwrapper",
    "transitive_digests",
]

__version__ = "0.1.0"

logging.getLogger("flydeps").addHandler(logging.NullHandler())
