"""C-level reads of builtin containers: copies that never run user code and survive concurrency.

Contract: every reader copies a container's items through the builtin base type's own
method (``dict.items(d)``, ``list.copy(l)``, ``set.copy(s)``, ``deque.__iter__(d)``,
``array.array.tobytes(a)``, ...), so a subclass's ``items``/``__iter__``/``copy`` overrides
never run; the copy runs no Python code, so another thread can resize the container
meanwhile only through a garbage collection running finalizers, and :func:`stable` retries
the read then instead of surfacing ``RuntimeError``. :class:`MutableWatch` keeps one copy and
compares a later one by identity only (bytes by equality): the guard's in-place check.
"""

from __future__ import annotations

import array
import collections
import itertools
import operator
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .bindings import is_a

__all__ = [
    "MutableWatch",
    "base_len",
    "read_array",
    "read_bytearray",
    "read_defaultdict",
    "read_deque",
    "read_dict",
    "read_instance_dict",
    "read_list",
    "read_memoryview",
    "read_odict",
    "read_set",
    "sequence_items",
    "stable",
]

_RETRIES = 1000
_ODICT_ITER = collections.OrderedDict.__iter__


def read_dict(d: Any) -> tuple:
    return tuple(itertools.chain.from_iterable(dict.items(d)))


def read_instance_dict(d: Any) -> tuple:
    """:func:`read_dict` of an instance's ``__dict__``, told apart by identity: on CPython
    3.13 a store into an object's inline values does not notify a dict watcher of its
    materialized ``__dict__``, so only PEP 509 tags (3.10/3.11) may stand for re-reading it."""
    return tuple(itertools.chain.from_iterable(dict.items(d)))


def read_odict(d: Any) -> tuple:
    """Keys in the OrderedDict's own order, each with its value from the dict table (no hashing).

    Every copy is one C call (no bytecode runs, so no other thread can run in between); the
    order is read before and after the items, and a read that straddled a mutation raises
    ``RuntimeError`` for :func:`stable` to retry, so the result is always a state that existed."""
    order = list(_ODICT_ITER(d))
    items = list(dict.items(d))
    if len(items) != len(order) or not all(map(operator.is_, order, _ODICT_ITER(d))):
        raise RuntimeError("OrderedDict mutated during iteration")
    values = {id(k): v for k, v in items}
    if len(values) != len(order) or not all(id(k) in values for k in order):
        raise RuntimeError("OrderedDict mutated during iteration")
    return tuple(itertools.chain.from_iterable((k, values[id(k)]) for k in order))


def read_defaultdict(d: Any) -> tuple:
    return (collections.defaultdict.__dict__["default_factory"].__get__(d), *read_dict(d))


def read_list(seq: Any) -> list:
    return list.copy(seq)


def read_set(s: Any) -> tuple:
    return tuple(set.copy(s))  # identity only: hashing the elements would run user code


def read_bytearray(b: Any) -> bytes:
    return bytes(bytearray.__getitem__(b, slice(None)))


def read_deque(d: Any) -> list:
    return list(collections.deque.__iter__(d))


def read_array(a: Any) -> bytes:
    return array.array.tobytes(a)


def read_memoryview(m: Any) -> bytes:
    return memoryview.tobytes(m)


def stable(read: Callable[[Any], Any], value: Any) -> Any:
    """``read(value)``, retried while another thread resizes ``value`` (never surfaced)."""
    for _ in range(_RETRIES):
        try:
            return read(value)
        except RuntimeError:
            continue
    return read(value)  # pragma: no cover - a thousand concurrent resizes in a row


_SIZED = (dict, list, tuple, set, frozenset, collections.deque)


_LEN_BY_ID = {id(t): t.__len__ for t in _SIZED}


def base_len(value: Any) -> int:
    """``len(value)`` through the builtin base type's own ``__len__`` (0 for other types)."""
    exact = _LEN_BY_ID.get(id(type(value)))
    if exact is not None:
        return exact(value)  # type: ignore[no-any-return]
    for base in _SIZED:
        if is_a(value, base):
            return base.__len__(value)  # type: ignore[no-any-return]
    return 0


def sequence_items(value: Any) -> list:
    """The elements of a tuple, list, set, frozenset or deque (or a subclass), copied at C level."""
    if is_a(value, (tuple, frozenset)):
        return list(tuple.__getitem__(value, slice(None)) if is_a(value, tuple) else frozenset.copy(value))
    if is_a(value, list):
        return stable(read_list, value)
    if is_a(value, set):
        return list(stable(read_set, value))
    if is_a(value, collections.deque):
        return stable(read_deque, value)
    return []


@dataclass(frozen=True, slots=True)
class MutableWatch:
    """A mutable container seen by a snapshot and its items then (identities or bytes).

    ``read`` copies the container's current items at C level. :meth:`unchanged` compares
    by identity only (bytes by equality), never hashing or comparing user objects; a set
    whose iteration order changed without a change of content reads as changed, which costs
    a digest recomputation, never a wrong answer. A read that meets a concurrent resize
    answers "changed"."""

    container: Any
    items: Any
    read: Callable[[Any], Any] = read_dict

    def unchanged(self) -> bool:
        try:
            now = self.read(self.container)
        except RuntimeError:
            return False
        old = self.items
        if type(old) is bytes:
            return now == old  # type: ignore[no-any-return]
        return len(now) == len(old) and all(map(operator.is_, now, old))
