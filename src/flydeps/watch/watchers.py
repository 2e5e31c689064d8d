"""O(1) "has anything watched changed?" for guards, on CPython >= 3.12 watchers.

Contract
--------
``version()`` returns a process-wide counter. If two calls return the same value, none of
the objects registered with ``watch_dict``/``watch_type``/``watch_function`` was modified in
between. A changed value means "something watched may have changed": re-check the slow way
(identity checks), then remember the new value. Spurious bumps are allowed (e.g. a watched
class whose base class was modified, a value re-set to an equal but distinct object); missed
ones are not.

* ``watch_dict(d)``: any later mutation of ``d`` (``d[k] = v`` with a different object, ``del``,
  ``pop``, ``popitem``, ``clear``, ``update``, ``|=``, ``setattr`` on a module whose ``__dict__``
  is ``d``, ``importlib.reload`` of that module) bumps ``version()``. Re-setting the very same
  object, and the dict's deallocation, do not.
* ``watch_type(t)``: later attribute set/delete on ``t`` (through ``t``'s own dict), and any
  type modification CPython reports for ``t`` (``__bases__`` assignment, attribute changes
  on a base class, which invalidate subclasses) bump ``version()``. Watch every class of an
  MRO whose entries matter; class attributes reached only through a base are covered when the
  base is watched too.
* ``watch_function(f)``: later assignment of ``f.__code__``, ``f.__defaults__`` or
  ``f.__kwdefaults__`` bumps ``version()``. Only when ``FUNCTIONS`` is true; otherwise it is a
  no-op and the caller keeps its per-function identity check. Closure cells
  (``cell_contents``) and ``f.__dict__`` are never watched: CPython has no watcher for them.
* Watching is idempotent, costs O(1) per object, and keeps no strong reference: watching does
  not keep an object alive and a dead watched object leaves nothing behind.

Module attributes
-----------------
``AVAILABLE``: True when watchers are active (CPython >= 3.12 and a backend loaded).
``FUNCTIONS``: True when ``watch_function`` really watches (the C extension backend).
``BACKEND``: ``"ext"`` (``flydeps.watch._watchext``), ``"ctypes"`` or ``"none"``.

Backends, chosen once at import (``FLYDEPS_WATCH`` = ``auto`` (default) | ``ext`` |
``ctypes`` | ``off``; any other value raises :class:`flydeps.settings.SettingError`):

* ``ext`` (default when the optional C extension was built): callbacks are C code that only
  increment a counter, so they are safe on every path CPython calls them on, including with
  an exception pending and on deallocation; ``version`` is the C function itself.
* ``ctypes`` (opt-in only): dict and type watchers whose callbacks are Python functions.
  CPython may call a dict watcher while an exception is pending (e.g. a watched dict freed
  while ``len(make_dict(), 1)`` raises); a ctypes callback then replaces the user's exception
  with a ``SystemError``; a Python callback can also let another thread run between the
  counter bump and the store it announces; Python 3.13 crashes if a callback runs during
  finalization (an ``atexit`` hook unregisters them). That is why ``auto`` never picks it.
  Functions are not watched (function watchers fire for every function created anywhere).
* ``none`` (CPython < 3.12, other implementations, ``off``, or no extension): ``AVAILABLE`` is
  False, the ``watch_*`` functions are no-ops and ``version()`` returns 0.

PEP 509 tags (CPython 3.10/3.11)
--------------------------------
There are no watchers before 3.12, but every dict carries a version tag (PEP 509) that each
modification replaces with a fresh value of one process-wide, only-growing counter.
``TAGS`` is True when the optional C extension ``flydeps.watch._dictver`` was built for this
interpreter; then ``tags_max(dicts)`` (one C call) returns the largest tag of a tuple of
dicts, which changes exactly when one of them was modified (re-setting the same object is not
a modification). A guard stores it and re-reads its namespace bindings only when it moved:
one integer compare per call, whatever the number of bindings. ``FLYDEPS_WATCH=off``
disables it too.

Watcher ids are scarce (8 per kind and interpreter, some taken by CPython itself): each kind
is registered once per process, lazily, on its first ``watch_*`` call. If a slot cannot be
had, a warning is logged on the ``flydeps`` logger, ``AVAILABLE`` becomes False and from then
on every ``version()`` call returns a new value, so a caller that read ``AVAILABLE`` earlier
still re-checks every time and stays correct.

Cost (benchmarks/bench_watch.py, CPython 3.12/3.13 on this project's machines): ``version()``
is one C call, 17-23 ns (an ``lru_cache`` hit is ~70 ns); a store into a watched dict costs
+6-8 ns (+220-250 ns with ctypes); creating/freeing functions with the function watcher
active is unchanged within noise, whether 1 or 10,000 functions are watched.
"""

from __future__ import annotations

import logging
import platform
import sys
import types
from collections.abc import Callable
from typing import Any

from .. import settings

__all__ = [
    "AVAILABLE",
    "BACKEND",
    "FUNCTIONS",
    "TAGS",
    "tags_max",
    "version",
    "watch_dict",
    "watch_function",
    "watch_type",
]

logger = logging.getLogger("flydeps")

_ENV = "FLYDEPS_WATCH"
_MODES = ("auto", "ext", "ctypes", "off")

AVAILABLE: bool = False
FUNCTIONS: bool = False
BACKEND: str = "none"
TAGS: bool = False


def _noop(obj: object) -> None:
    """Watch nothing (no watcher backend on this interpreter)."""


def _zero() -> int:
    """No backend: nothing is ever reported as modified."""
    return 0


def _no_tags(dicts: tuple[dict[Any, Any], ...]) -> int:
    """No PEP 509 reader: never used (``TAGS`` is False)."""
    raise RuntimeError("flydeps.watch.watchers.tags_max needs the _dictver extension (TAGS is False)")


version: Callable[[], int] = _zero
tags_max: Callable[[tuple[dict[Any, Any], ...]], int] = _no_tags
watch_dict: Callable[[dict[Any, Any]], None] = _noop
watch_type: Callable[[type], None] = _noop
watch_function: Callable[[types.FunctionType], None] = _noop


def _degrade(kind: str, exc: BaseException, set_broken: Callable[[], None]) -> None:
    """A watcher could not be registered/applied: make ``version()`` change on every call."""
    global AVAILABLE, FUNCTIONS
    if AVAILABLE:
        logger.warning(
            "flydeps: cannot use the CPython %s watcher (%s: %s); guards fall back to full checks on every call",
            kind,
            type(exc).__name__,
            exc,
        )
    AVAILABLE = False
    FUNCTIONS = False
    set_broken()


# --------------------------------------------------------------------------- ext backend


def _install_ext(ext: Any) -> None:
    global AVAILABLE, FUNCTIONS, BACKEND, version, watch_dict, watch_type, watch_function

    def watch_dict_ext(d: dict[Any, Any]) -> None:
        """Watch ``d``: its later mutations bump ``version()``."""
        try:
            ext.watch_dict(d)
        except TypeError:
            raise
        except (RuntimeError, ValueError, MemoryError) as exc:  # no free watcher id, out of memory
            _degrade("dict", exc, ext._set_broken)

    def watch_type_ext(t: type) -> None:
        """Watch ``t``: later attribute/bases changes bump ``version()``."""
        try:
            ext.watch_type(t)
        except TypeError:
            raise
        except (RuntimeError, ValueError, MemoryError) as exc:
            _degrade("type", exc, ext._set_broken)

    def watch_function_ext(f: types.FunctionType) -> None:
        """Watch ``f``: later ``__code__``/``__defaults__``/``__kwdefaults__`` changes bump ``version()``."""
        try:
            ext.watch_function(f)
        except TypeError:
            raise
        except (RuntimeError, ValueError, MemoryError) as exc:
            _degrade("function", exc, ext._set_broken)

    version = ext.version
    watch_dict, watch_type, watch_function = watch_dict_ext, watch_type_ext, watch_function_ext
    AVAILABLE, FUNCTIONS, BACKEND = True, True, "ext"


# ------------------------------------------------------------------------ ctypes backend


class _CtypesBackend:
    """Dict and type watchers through ``ctypes.pythonapi`` (opt-in; see the module docstring)."""

    _DICT_DEALLOCATED = 5  # PyDict_EVENT_DEALLOCATED in 3.12 and 3.13

    def __init__(self) -> None:
        import ctypes

        self._ctypes = ctypes
        api = ctypes.pythonapi
        self._api = api
        self.counter = 0
        self.broken = False
        self.rearm = False
        self.dict_wid = -1
        self.type_wid = -1
        self._types: dict[int, Any] = {}  # id -> weakref, re-armed after a type event
        dict_proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        type_proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)
        # Kept alive for the life of the process: CPython keeps calling them.
        self._dict_cb = dict_proto(self._on_dict)
        self._type_cb = type_proto(self._on_type)
        for name, argtypes in (
            ("PyDict_AddWatcher", [ctypes.c_void_p]),
            ("PyType_AddWatcher", [ctypes.c_void_p]),
            ("PyDict_Watch", [ctypes.c_int, ctypes.py_object]),
            ("PyType_Watch", [ctypes.c_int, ctypes.py_object]),
            ("PyUnstable_Type_AssignVersionTag", [ctypes.py_object]),
            ("PyDict_ClearWatcher", [ctypes.c_int]),
            ("PyType_ClearWatcher", [ctypes.c_int]),
        ):
            fn = getattr(api, name)
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int

        import atexit

        # Python callbacks must not run while the interpreter tears modules down (3.13 crashes).
        atexit.register(self.close)

    def close(self) -> None:
        """Unregister both watchers (at exit); ``version()`` then changes on every call."""
        self.broken = True
        if self.dict_wid >= 0:
            self._api.PyDict_ClearWatcher(self.dict_wid)
            self.dict_wid = -1
        if self.type_wid >= 0:
            self._api.PyType_ClearWatcher(self.type_wid)
            self.type_wid = -1

    # Callbacks get raw addresses (c_void_p): a dying dict is never turned into an object.
    def _on_dict(self, event: int, d: int | None, key: int | None, value: int | None) -> int:
        if event != self._DICT_DEALLOCATED:
            self.counter += 1
        return 0

    def _on_type(self, t: int | None) -> int:
        self.counter += 1
        self.rearm = True
        return 0

    def version(self) -> int:
        if self.rearm:
            self._rearm_types()
        if self.broken:
            self.counter += 1
        return self.counter

    def set_broken(self) -> None:
        self.broken = True
        self.counter += 1

    def _rearm_types(self) -> None:
        self.rearm = False
        for key, ref in list(self._types.items()):
            t = ref()
            if t is None:
                del self._types[key]
            else:
                self._api.PyUnstable_Type_AssignVersionTag(t)

    def _ensure_dict(self) -> None:
        if self.dict_wid < 0:
            self.dict_wid = self._api.PyDict_AddWatcher(self._ctypes.cast(self._dict_cb, self._ctypes.c_void_p))

    def watch_dict(self, d: dict[Any, Any]) -> None:
        if not isinstance(d, dict):
            raise TypeError(f"watch_dict() needs a dict, not {type(d).__name__}")
        if self.broken:  # degraded or closed: version() already changes on every call
            return
        try:
            self._ensure_dict()
            self._api.PyDict_Watch(self.dict_wid, d)
        except Exception as exc:  # noqa: BLE001 - any ctypes failure: degrade, never raise
            _degrade("dict", exc, self.set_broken)

    def watch_type(self, t: type) -> None:
        import gc
        import weakref

        if not isinstance(t, type):
            raise TypeError(f"watch_type() needs a type, not {type(t).__name__}")
        if self.broken:
            return
        try:
            if self.type_wid < 0:
                self.type_wid = self._api.PyType_AddWatcher(self._ctypes.cast(self._type_cb, self._ctypes.c_void_p))
            self._ensure_dict()
            # The real dict behind the mappingproxy (heap types: the type's tp_dict).
            for ref in gc.get_referents(t.__dict__):
                if type(ref) is dict:
                    self._api.PyDict_Watch(self.dict_wid, ref)
            self._api.PyType_Watch(self.type_wid, t)
            self._api.PyUnstable_Type_AssignVersionTag(t)
        except Exception as exc:  # noqa: BLE001 - any ctypes failure: degrade, never raise
            _degrade("type", exc, self.set_broken)
            return
        old = self._types.get(id(t))
        if old is None or old() is not t:
            try:
                self._types[id(t)] = weakref.ref(t)
            except TypeError:  # no weakref support: watched, just not re-armed
                pass


def _install_ctypes() -> None:
    global AVAILABLE, FUNCTIONS, BACKEND, version, watch_dict, watch_type, watch_function
    backend = _CtypesBackend()
    version, watch_dict, watch_type = backend.version, backend.watch_dict, backend.watch_type
    watch_function = _noop
    AVAILABLE, FUNCTIONS, BACKEND = True, False, "ctypes"


# ------------------------------------------------------------------------------ selection


def _select_tags() -> None:
    global TAGS, tags_max
    try:
        from . import _dictver  # type: ignore[attr-defined]
    except ImportError as exc:
        logger.debug("flydeps: dict version tag extension not available (%s); guards re-read bindings", exc)
        return
    tags_max, TAGS = _dictver.tags_max, True


def _select() -> None:
    mode = settings.choice(_ENV, "auto", _MODES)
    if mode == "off" or platform.python_implementation() != "CPython":
        return
    if sys.version_info < (3, 12):
        _select_tags()
        return
    if mode in ("auto", "ext"):
        try:
            from . import _watchext  # type: ignore[attr-defined]
        except ImportError as exc:
            log = logger.warning if mode == "ext" else logger.debug
            log("flydeps: watcher extension not available (%s); guards use identity checks", exc)
            return
        _install_ext(_watchext)
        return
    try:
        _install_ctypes()
    except Exception as exc:  # noqa: BLE001 - pythonapi symbols missing on an unusual build
        logger.warning("flydeps: ctypes watcher backend unavailable (%s: %s)", type(exc).__name__, exc)


_select()
