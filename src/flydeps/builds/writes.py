"""What a build's own code may write, and the data states managed builds left behind.

Contract: two pieces the build protocol (:mod:`flydeps.builds.protocol`) needs.

* :func:`write_targets` reads the bytecode of the functions a discovery found (never runs
  user code) and returns the module-level bindings their code may write: ``STORE_GLOBAL``
  / ``DELETE_GLOBAL``, item stores/deletes on a loaded global (``REG[k] = v``), mutating
  method calls on a loaded global (``REG.append``, ``MEMO.setdefault``, ...), attribute
  stores on a loaded global (``CFG.x = 1``; on a module: that module's global ``x``).
  The same for a function's closure cells (``nonlocal`` stores, ``memo[k] = v`` on a free
  variable). ``WriteTarget.rebinds`` says whether the binding itself may be rebound (its
  namespace written: ``STORE_GLOBAL``, a module attribute store, a ``nonlocal`` store)
  rather than only the value it holds mutated: the build protocol's A-B-A check counts a
  namespace as the build's own only for the former. It over-approximates within a
  statement (an item store next to two loaded globals counts for both); it does not see
  writes through ``self``/class attributes, ``setattr``/``globals()`` or C code.
* :data:`TRANSITIONS` records, process-wide, each ``(digest before, digest after)`` of a
  written value across a managed build (a ``cached_factory`` call, a launcher trace).
  :meth:`Transitions.explains` answers "is going from this state to that one the work of
  managed builds only?" by following recorded steps, so a user's own change in between
  breaks the chain and is not adopted.

Digests are :func:`flydeps.values.snapshot.snapshot` digests, the digest discovery gives the data
node of a global (``module:NAME``).
"""

from __future__ import annotations

import dis
import threading
import weakref
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from types import CodeType, FunctionType, ModuleType
from typing import Any

from ..values.snapshot import snapshot

__all__ = ["TRANSITIONS", "Transitions", "WriteTarget", "state_of", "write_targets"]

# Methods of stdlib containers that mutate them in place.
_MUTATORS = frozenset(
    {
        "append",
        "appendleft",
        "extend",
        "extendleft",
        "insert",
        "pop",
        "popleft",
        "popitem",
        "remove",
        "clear",
        "update",
        "setdefault",
        "add",
        "discard",
        "sort",
        "reverse",
        "rotate",
        "move_to_end",
        "difference_update",
        "intersection_update",
        "symmetric_difference_update",
        "__setitem__",
        "__delitem__",
        "__iadd__",
        "__ior__",
    }
)
_ITEM_WRITES = frozenset({"STORE_SUBSCR", "DELETE_SUBSCR"})
_ATTR_WRITES = frozenset({"STORE_ATTR", "DELETE_ATTR"})
_GLOBAL_WRITES = frozenset({"STORE_GLOBAL", "DELETE_GLOBAL"})
_CELL_WRITES = frozenset({"STORE_DEREF", "DELETE_DEREF"})
_SINGLE_LOADS = frozenset({"LOAD_FAST", "LOAD_CONST", "LOAD_SMALL_INT", "LOAD_DEREF", "LOAD_GLOBAL", "LOAD_NAME"})
_CELL_LOADS = frozenset({"LOAD_DEREF", "LOAD_CLASSDEREF", "LOAD_FROM_DICT_OR_DEREF"})
_ATTR_LOADS = frozenset({"LOAD_ATTR", "LOAD_METHOD"})
# Instructions that end the expression a loaded global can be the subject of.
_BOUNDARIES = ("STORE_FAST", "STORE_NAME", "STORE_DEREF", "POP_", "RETURN_", "JUMP_")
_MISSING = object()
_FUNCTION_MODULE = FunctionType.__dict__["__module__"]
_OPS: "weakref.WeakKeyDictionary[CodeType, tuple[tuple[str, Any], ...]]" = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True, eq=False)
class WriteTarget:
    """``container[name]`` (a namespace dict) or ``container.cell_contents`` (a closure
    cell) may be written by the build; ``label`` names it for people."""

    label: str
    container: object
    name: str
    rebinds: bool = False  # the binding itself may be rebound, not only its value mutated

    def state(self) -> str | None:
        """The snapshot digest of what the binding holds now (None when unbound)."""
        if type(self.container) is dict:
            return state_of(self.container.get(self.name, _MISSING))
        try:
            return state_of(self.container.cell_contents)  # type: ignore[attr-defined]
        except ValueError:  # an empty cell
            return None


def state_of(value: object) -> str | None:
    if value is _MISSING:
        return None
    for _ in range(64):  # another thread may resize the container while it is read
        try:
            return snapshot(value).digest
        except RuntimeError:
            continue
    return None  # pragma: no cover - unknown: never matches a recorded state


def write_targets(functions: Iterable[FunctionType]) -> tuple[WriteTarget, ...]:
    """The module-level bindings the code of ``functions`` (and code nested in it) may write."""
    found: dict[tuple[int, str], WriteTarget] = {}
    for fn in functions:
        globals_ = fn.__globals__
        if type(globals_) is not dict:
            continue
        code = fn.__code__
        cells: dict[str, object] = dict(zip(code.co_freevars, fn.__closure__ or ()))
        for nested in _codes(code):
            for container, name, rebinds in _scan(nested, globals_, cells if nested is code else {}):
                known = found.get((id(container), name))
                if known is not None and (known.rebinds or not rebinds):
                    continue
                if type(container) is dict:
                    label = f"{container.get('__name__', '?')}:{name}"
                else:  # the node id discovery gives a closure's content (see live/discover.py)
                    label = f"{_module_name(fn)}:{fn.__qualname__}#closure.{name}"
                found[(id(container), name)] = WriteTarget(label, container, name, rebinds)
    return tuple(found.values())


def _module_name(fn: FunctionType) -> str:
    """``fn.__module__`` read through the function type's own member (no user code runs)."""
    module = _FUNCTION_MODULE.__get__(fn)
    return module if type(module) is str else "?"


def _codes(code: CodeType) -> Iterator[CodeType]:
    stack = [code]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(c for c in current.co_consts if type(c) is CodeType)


def _scan(code: CodeType, globals_: dict, cells: dict[str, object]) -> Iterator[tuple[object, str, bool]]:
    """(namespace or cell, name, rebinds) written by ``code``: a state machine over
    loads/stores; ``rebinds``: the binding itself is stored (else only its value mutated).

    ``cells``: the function's closure cells by free variable name (its own code only)."""
    recent: list[tuple[int, tuple[object, str]]] = []  # (index, binding) loaded in this expression
    subject: tuple[object, str] | None = None  # the last one loaded, followed through module attrs
    last = ""
    for i, (op, arg) in enumerate(_ops(code)):
        prev, last = last, op
        if op in _GLOBAL_WRITES:
            yield globals_, arg, True
        elif op in _CELL_WRITES and arg in cells:
            yield cells[arg], arg, True
        elif op == "LOAD_GLOBAL" or (op in _CELL_LOADS and arg in cells):
            subject = (globals_, arg) if op == "LOAD_GLOBAL" else (cells[arg], arg)
            recent.append((i, subject))
        elif op in _ATTR_LOADS and subject is not None:
            if arg in _MUTATORS:
                yield (*subject, False)
                subject = None
                continue
            module_dict = _module_dict(_value(subject))
            if module_dict is not None:
                subject = (module_dict, arg)  # mod.REG: the binding is REG in mod
            recent.append((i, subject))  # CFG.items[k] = v writes CFG
        elif op in _ATTR_WRITES and subject is not None:
            module_dict = _module_dict(_value(subject))
            yield (module_dict, arg, True) if module_dict is not None else (*subject, False)
            subject = None
        elif op in _ITEM_WRITES:
            yield from ((*subject, False) for subject in _item_write_subjects(recent, i, prev))
            recent, subject = [], None
        elif op.startswith(_BOUNDARIES):
            recent, subject = [], None
        elif op not in _ATTR_LOADS:
            subject = None


def _ops(code: CodeType) -> tuple[tuple[str, Any], ...]:
    """``(opname, argval)`` of each instruction, memoized per code object (misses rescan)."""
    ops = _OPS.get(code)
    if ops is None:
        ops = _OPS[code] = tuple((ins.opname, ins.argval) for ins in dis.get_instructions(code))
    return ops


def _item_write_subjects(
    recent: list[tuple[int, tuple[object, str]]], i: int, prev: str
) -> Iterator[tuple[object, str]]:
    """The container of ``container[key] = value``: loaded just before a one-instruction key;
    with a longer key expression, every binding loaded in the statement (over-approximated)."""
    if prev in _SINGLE_LOADS:
        exact = [subject for at, subject in recent if at == i - 2]
        if exact:
            yield from exact
            return
    yield from (subject for _at, subject in recent)


_MODULE_DICT: Any = vars(ModuleType)["__dict__"]  # the member descriptor, safe on any module


def _module_dict(value: object) -> dict | None:
    """A module's namespace, read without running code of a module subclass."""
    if not issubclass(type(value), ModuleType):  # type(): never the object's __class__
        return None
    namespace = _MODULE_DICT.__get__(value, ModuleType)
    return namespace if type(namespace) is dict else None


def _value(subject: tuple[object, str]) -> object:
    container, name = subject
    if type(container) is dict:
        return container.get(name, _MISSING)
    try:
        return container.cell_contents  # type: ignore[attr-defined]
    except ValueError:
        return _MISSING


class Transitions:
    """Recorded ``(before, after)`` digests of values written by managed builds, per binding.

    ``subject`` names the binding (``module:name``, the node id a fingerprint gives a module
    global): two globals that happen to hold equal values never explain each other's
    changes. Bounded (oldest steps are forgotten beyond ``limit``); thread-safe."""

    def __init__(self, limit: int = 4096) -> None:
        self._steps: dict[tuple[str, str | None, str | None], None] = {}
        self._lock = threading.Lock()
        self._limit = limit

    def record(self, subject: str, before: str | None, after: str | None) -> None:
        if before == after or after is None:
            return
        step = (subject, before, after)
        with self._lock:
            self._steps.pop(step, None)
            self._steps[step] = None
            while len(self._steps) > self._limit:
                del self._steps[next(iter(self._steps))]

    def explains(self, subject: str, before: str, after: str) -> bool:
        """True when steps recorded for ``subject`` lead from ``before`` to ``after``."""
        with self._lock:
            steps = [(a, b) for who, a, b in self._steps if who == subject]
        nexts: dict[str | None, list[str | None]] = {}
        for a, b in steps:
            nexts.setdefault(a, []).append(b)
        seen: set[str | None] = {before}
        todo: list[str | None] = [before]
        while todo:
            for b in nexts.get(todo.pop(), ()):
                if b == after:
                    return True
                if b not in seen:
                    seen.add(b)
                    todo.append(b)
        return False

    def clear(self) -> None:
        with self._lock:
            self._steps.clear()


#: The process-wide record shared by every consumer (issue 7.7: a write made by any managed
#: build is that build's own effect, for every consumer in the process).
TRANSITIONS = Transitions()
