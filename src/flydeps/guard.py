"""Guards: the hot-path question "is everything a fingerprint saw still bound the same?"

Contract: built from a :class:`~flydeps.discover.Discovery`; holds strong references to
the expected objects (so identities cannot be recycled) and answers with identity checks
only: no digest, no snapshot, no user code. ``check()`` is what runs on every warm call:

* namespace entries (module globals, class attributes along an owner's MRO): one
  C-level ``itemgetter`` per namespace compared to the expected tuple, identity first;
  on CPython >= 3.12 with dict watchers, one ``version()`` comparison replaces them all;
* function ``__code__``/``__defaults__``/``__kwdefaults__``: a process-wide generation
  bumped by the audit hook of :mod:`flydeps._audit` decides whether they need to be
  re-read at all;
* closure cells and mutable containers within the snapshot bound: identity checks of
  their items (no watcher exists for them).

``check()`` may answer False for a change that turns out not to matter (a reload that
only edited comments rebinds every function): consumers then recompute the fingerprint
and compare digests, and re-baseline with a new guard when they agree.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, is_, itemgetter
from types import FunctionType, MethodType, ModuleType

from . import _audit, _watch
from ._bindings import MISSING, Binding, BindingKind, is_code
from ._values import MutableWatch, describe
from .discover import Discovery

__all__ = ["Change", "ChangeKind", "Guard"]

_cell_contents = attrgetter("cell_contents")
_dict_get = dict.get
# Values whose == is identity or a C-level comparison that never runs user code.
# Numbers are left out: 1 == True == 1.0 would hide a rebinding that changes the value's type.
_SAFE_EQ = (FunctionType, MethodType, ModuleType, type(len), str, bytes)


class ChangeKind(str, enum.Enum):
    CODE = "code"  # a function's code, defaults or a name bound to code changed
    VALUE = "value"  # a data value was rebound or mutated in place
    BINDING = "binding"  # a name appeared or disappeared


@dataclass(frozen=True, slots=True)
class Change:
    """One binding that no longer holds. ``old``/``new`` are short, safe descriptions."""

    node: str
    kind: ChangeKind
    module: str
    name: str
    old: str
    new: str
    is_data: bool

    def __str__(self) -> str:
        what = "global" if self.is_data else "helper"
        if self.kind is ChangeKind.VALUE and self.old == self.new:
            return f"{what} {self.module}.{self.name} was mutated in place (read by {self.node})"
        return f"{what} {self.module}.{self.name} changed: {self.old} -> {self.new} (read by {self.node})"


class Guard:
    """Identity checks over the live bindings of one fingerprint (see module docstring)."""

    __slots__ = ("_bindings", "_mutables", "_groups", "_gets", "_cells", "_funcs", "_gen", "_watched", "_version")

    def __init__(self, discovery: Discovery) -> None:
        self._bindings: tuple[Binding, ...] = _dedupe(discovery.bindings)
        self._mutables: tuple[tuple[str, MutableWatch], ...] = discovery.mutables
        namespaced = [b for b in self._bindings if b.kind is BindingKind.DICT]
        self._groups = _group_namespaces(namespaced)
        slow = [b for b in namespaced if b.expected is MISSING or not isinstance(b.expected, _SAFE_EQ)]
        self._gets = (
            tuple(b.container for b in slow),
            tuple(b.key for b in slow),
            tuple(b.expected for b in slow),
        )
        cells = [b for b in self._bindings if b.kind is BindingKind.CELL]
        self._cells = (tuple(b.container for b in cells), tuple(b.expected for b in cells))
        funcs = [b for b in self._bindings if b.kind is BindingKind.ATTR]
        self._funcs = (tuple(b.container for b in funcs), tuple(b.key for b in funcs), tuple(b.expected for b in funcs))
        self._watched = _watch_all(namespaced)
        _audit.install()
        self._gen = _audit.generation()
        self._version = _watch.version()

    # -- the hot path ------------------------------------------------------------------
    def check(self) -> bool:
        """True when every binding still holds (identity checks; see module docstring)."""
        try:
            version = _watch.version()
            if version != self._version or not self._watched:
                if not self._check_namespaces():
                    return False
                self._version = version
            generation = _audit.generation()
            if generation != self._gen or not _audit.ENABLED:
                objs, names, expected = self._funcs
                if not all(map(is_, map(getattr, objs, names), expected)):
                    return False
                self._gen = generation
            cells, expected = self._cells
            if cells and not all(map(is_, map(_cell_contents, cells), expected)):
                return False
        except (KeyError, ValueError):  # a name was deleted, a cell emptied
            return False
        for _, watch in self._mutables:
            if not watch.unchanged():
                return False
        return True

    def _check_namespaces(self) -> bool:
        for getter, namespace, expected in self._groups:
            if getter(namespace) != expected:
                return False
        containers, keys, expected = self._gets
        return not containers or all(map(is_, map(_dict_get, containers, keys, repeat(MISSING)), expected))

    # -- explanations (slow path) ----------------------------------------------------
    def changes(self) -> tuple[Change, ...]:
        """Every binding that no longer holds, and every mutable value changed in place."""
        out = [_describe_change(b) for b in self._bindings if not b.holds()]
        for nid, watch in self._mutables:
            if not watch.unchanged():
                label = nid.rpartition(":")
                out.append(Change(nid, ChangeKind.VALUE, label[0], label[2], "", "", True))
        return tuple(out)

    def __len__(self) -> int:
        return len(self._bindings) + len(self._mutables)

    def __repr__(self) -> str:
        return f"<Guard {len(self._bindings)} bindings, {len(self._mutables)} mutable values>"


def _dedupe(bindings: Sequence[Binding]) -> tuple[Binding, ...]:
    seen: dict[tuple[int, str], Binding] = {}
    for b in bindings:
        seen.setdefault((id(b.container), b.key), b)
    return tuple(seen.values())


def _group_namespaces(bindings: Sequence[Binding]) -> tuple[tuple[itemgetter, dict, object], ...]:
    """One ``itemgetter`` per namespace over its names bound to safely comparable values."""
    by_dict: dict[int, tuple[dict, list[Binding]]] = {}
    for b in bindings:
        if b.expected is not MISSING and isinstance(b.expected, _SAFE_EQ):
            by_dict.setdefault(id(b.container), (b.container, []))[1].append(b)  # type: ignore[arg-type]
    groups = []
    for namespace, items in by_dict.values():
        keys = [b.key for b in items]
        expected = tuple(b.expected for b in items)
        groups.append((itemgetter(*keys), namespace, expected if len(keys) > 1 else expected[0]))
    return tuple(groups)


def _watch_all(namespaced: Sequence[Binding]) -> bool:
    """Register a dict watcher for every namespace; False when watchers are unavailable.

    Functions need no watcher: their attribute assignments are audited (:mod:`._audit`)."""
    if not _watch.AVAILABLE:
        return False
    for namespace in {id(b.container): b.container for b in namespaced}.values():
        _watch.watch_dict(namespace)  # type: ignore[arg-type]
    return _watch.AVAILABLE


def _describe_change(b: Binding) -> Change:
    new = b.current()
    code = b.code or is_code(new)
    if b.expected is MISSING or new is MISSING:
        kind = ChangeKind.BINDING
    else:
        kind = ChangeKind.CODE if code else ChangeKind.VALUE
    module, _, name = b.label.rpartition(".")
    old_text = "<missing>" if b.expected is MISSING else describe(b.expected)
    new_text = "<missing>" if new is MISSING else describe(new)
    return Change(b.node, kind, module, name, old_text, new_text, not code)
