"""Function-attribute generation counter for interpreters without function watchers.

Contract: ``generation()`` changes whenever any function's ``__code__``,
``__defaults__`` or ``__kwdefaults__``, or any object's ``__class__``, is assigned anywhere
in the process (CPython raises the ``object.__setattr__`` audit event for those
assignments; a guard checks the type of the instances a build read by it). Guards on
CPython 3.10/3.11 compare it instead of re-reading every function's attributes per call.

The audit event fires *before* CPython stores the new value, and other audit hooks run
between ours and the store (one that releases the GIL lets other threads run there). So
the hook also records the store as pending (``_PENDING``: thread id -> (function, attribute,
value)), before it bumps the generation. A checker that saw a new generation may remember
it as validated only if :func:`settled` said, *before* it re-read the attributes, that every
pending store is visible; otherwise it answers from the attributes it read and re-reads
them on the next check. A pending record is dropped once its store is visible, or replaced
by the same thread's next assignment (its previous one has then completed or failed). An
assignment that fails after the event (``__code__`` with the wrong number of free
variables) stays pending until that thread assigns again: checks are then slower, never
wrong. The C hit path (``flydeps.builds._fastcache``) reads ``_PENDING``'s size before its check
for the same reason.

While builds run, the hook also notes every function whose ``__code__``, ``__defaults__``
or ``__kwdefaults__`` is assigned by a thread other than the build's own
(:func:`record_assignments`: each running build registers a set, :func:`stop_recording`
removes it): a build whose graph holds such a
function saw code that may have been swapped and put back while it ran (A-B-A,
``flydeps.builds.protocol``'s ``Verdict.RACED``). No cost when no build runs.

The same hook forwards the ``open``, ``os.listdir``, ``os.scandir`` and ``os.mkdir`` events to
:mod:`flydeps.observe.filereads` once that module asked for them (:func:`forward_file_events`: the
files a recorded build reads), so the process runs one hook of ours, not two.

The hook is installed lazily, once, on the first guard or recorded build (audit hooks
cannot be removed). Its cost is two set lookups per audit event elsewhere in the process.
Set ``FLYDEPS_AUDIT_HOOK=0`` to never install it: guards then re-read function attributes
on every check (slower, same answers), and files read by builds are not recorded.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import FunctionType

from .. import settings

__all__ = [
    "ENABLED",
    "forward_file_events",
    "generation",
    "install",
    "record_assignments",
    "settled",
    "stop_recording",
]

ENABLED = settings.flag("FLYDEPS_AUDIT_HOOK", True)
_GEN = [0]
_PENDING: dict[int, tuple[object, str, object]] = {}
_installed = False
_lock = threading.Lock()
_pending_lock = threading.RLock()  # RLock: a finalizer may assign __code__ while held
_WATCHED_ATTRS = frozenset({"__code__", "__defaults__", "__kwdefaults__", "__class__"})
_EVENTS = frozenset({"object.__setattr__", "object.__delattr__"})
_FILE_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "os.mkdir"})
_file_events: Callable[[str, tuple], None] | None = None  # flydeps.observe.filereads' receiver
_get_ident = threading.get_ident
# The sets of the running builds (record_assignments): ids of functions assigned meanwhile.
# Replaced, never mutated, so the hook iterates a stable tuple without a lock.
_RECORDERS: tuple[tuple[int, set[int]], ...] = ()  # (the build's thread, the set)


def _hook(event: str, args: tuple) -> None:
    if event in _EVENTS:
        if len(args) > 1 and args[1] in _WATCHED_ATTRS:
            if type(args[0]) is FunctionType or args[1] == "__class__":  # deleting __defaults__ stores None
                with _pending_lock:
                    _PENDING[_get_ident()] = (args[0], args[1], args[2] if len(args) > 2 else None)
                if _RECORDERS:
                    ident = _get_ident()
                    for thread, assigned in _RECORDERS:
                        if thread != ident:
                            assigned.add(id(args[0]))
            _GEN[0] += 1
    elif event in _FILE_EVENTS and _file_events is not None:
        _file_events(event, args)


def forward_file_events(receiver: Callable[[str, tuple], None]) -> bool:
    """Send the file events to ``receiver`` and install the hook (idempotent); False when
    disabled by ``FLYDEPS_AUDIT_HOOK=off``."""
    global _file_events
    if not ENABLED:
        return False
    _file_events = receiver
    return install()


def settled() -> bool:
    """True when every function attribute store announced by the hook is visible.

    Call it *before* re-reading the attributes a new generation may have changed."""
    if not _PENDING:
        return True
    with _pending_lock:
        for thread, record in list(_PENDING.items()):
            fn, attr, value = record
            if (type(fn) if attr == "__class__" else getattr(fn, attr)) is not value:
                return False
            del _PENDING[thread]
    return True


def record_assignments() -> set[int]:
    """A set that receives the id of every function (or object, for ``__class__``) whose
    watched attribute another thread than the caller's assigns from now until
    :func:`stop_recording`; never filled when the hook is disabled (``FLYDEPS_AUDIT_HOOK=0``)."""
    global _RECORDERS
    assigned: set[int] = set()
    if install():
        with _lock:
            _RECORDERS = (*_RECORDERS, (_get_ident(), assigned))
    return assigned


def stop_recording(assigned: set[int]) -> None:
    """Stop filling ``assigned`` (a set from :func:`record_assignments`); idempotent."""
    global _RECORDERS
    with _lock:
        _RECORDERS = tuple(r for r in _RECORDERS if r[1] is not assigned)


def install() -> bool:
    """Install the hook (idempotent). False when disabled by ``FLYDEPS_AUDIT_HOOK=off``."""
    global _installed
    if not ENABLED:
        return False
    with _lock:
        if not _installed:
            sys.addaudithook(_hook)
            _installed = True
    return True


def generation() -> int:
    """The current generation (bumped on every function attribute assignment)."""
    return _GEN[0]
