"""Keys: fingerprints over a dependency graph and the guards that keep them valid.

Contract: :mod:`.fingerprint` turns a :class:`~flydeps.graph.DepGraph` (from live objects
or from files) into Merkle digests, one per node and one for the roots, and explains the
difference between two of them in words (:mod:`.codeswap`: a ``__code__`` swap is a code
change, not a rebound name). :mod:`.guard` answers on the hot path whether every binding
a fingerprint saw still holds: identity checks and one watcher counter read when nothing
changed, the changed bindings named when something did. Public entries:
``flydeps.fingerprint``, ``flydeps.Fingerprint``, ``flydeps.Guard``.
"""
