"""Values: live objects read without running user code, and snapshots of data.

Contract: nothing here calls a user's ``__eq__``, ``__hash__``, ``__getattr__`` or
property; containers are copied at the C level (:mod:`.containers`), objects are named
and classified from their type and real namespace (:mod:`.objects`), data values become
stable, exact snapshots with a digest (:mod:`.snapshot`), and :mod:`.bindings` is the
record of a live fact a fingerprint depends on (a namespace slot, an attribute, a cell)
with the identity or snapshot to hold it to. Used by runtime discovery, guards and the
build protocol; the static front-end uses :mod:`.snapshot` so that a literal's digest is
the runtime value's.
"""
