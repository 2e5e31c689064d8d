"""Guards: the hot-path question "is everything a fingerprint saw still bound the same?"

Contract: built from a :class:`~flydeps.live.discover.Discovery`; holds strong references to
the expected objects (so identities cannot be recycled) and answers with identity checks
only: no digest, no snapshot, no user code. ``check()`` is what runs on every warm call:

* namespace entries (module globals, class attributes along an owner's MRO): values whose
  ``==`` cannot run user code compared to the expected values (identity first), every
  other value by identity, absent names must stay absent; three C-level passes over flat
  tables at first (nothing to compile when a new process starts a launcher), written out
  per namespace (``itemgetter`` groups) once they were re-read ``_TIER_UP`` times;
  on CPython >= 3.12 with dict watchers, one ``version()`` comparison replaces them all;
* function ``__code__``/``__defaults__``/``__kwdefaults__`` and the ``type()`` of the
  instances a build read (a ``__class__`` assignment is audited too): a process-wide
  generation bumped by the audit hook of :mod:`flydeps.watch.audit` decides whether they need to be
  re-read at all (a generation is remembered as validated only when every store the hook
  announced was visible before the re-read: the hook runs before CPython stores);
* closure cells and mutable containers within the snapshot bound: identity checks of
  their items (no watcher exists for them).

A container resized by another thread while ``check()`` reads it makes it answer False
(the consumer re-fingerprints), never raise.

``check()`` may answer False for a change that turns out not to matter (a reload that
only edited comments rebinds every function): consumers then recompute the fingerprint
and compare digests, and re-baseline with a new guard when they agree.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from operator import is_, itemgetter
from types import FunctionType, MethodType, ModuleType

from ..live.discover import Discovery
from ..store import codegen as _codegen
from ..values.bindings import MISSING, Binding, BindingKind, is_code
from ..values.containers import read_dict, read_instance_dict
from ..values.snapshot import MutableWatch, describe
from ..watch import audit as _audit
from ..watch import watchers as _watch

__all__ = ["Change", "ChangeKind", "Guard"]

# Values whose == is identity or a C-level comparison that never runs user code: grouped
# with ``!=`` (identity first), so a name rebound to an equal string passes. Numbers are left
# out (1 == True == 1.0 would hide a rebinding that changes the value's type): by identity.
_SAFE_EQ = (FunctionType, MethodType, ModuleType, type(len), str, bytes)


# ``type(value)`` is exactly one of ``_SAFE_EQ``, tested by id: ``isinstance`` would ask a
# hostile ``__class__``, a subclass may override ``__eq__``, and a set of the classes
# themselves would hash and compare them through their metaclass. The classes live as long
# as the tuple.
_SAFE_EQ_IDS = frozenset(map(id, _SAFE_EQ))


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
    """Identity checks over the live bindings of one fingerprint (see module docstring).

    ``guard.check()`` -> bool is the hot path: a function generated for this guard's
    bindings, so it runs only the checks that exist (no loops over empty tables, no
    flag tests, no attribute lookups on the guard)."""

    __slots__ = ("_discovered", "_bindings", "_mutables", "_state", "check", "_fast")

    check: Callable[[], bool]
    _bindings: tuple[Binding, ...]
    _fast: tuple[tuple[object, ...], tuple[object, ...], bool, tuple[dict, ...] | None]

    def __init__(self, discovery: Discovery) -> None:
        # Only the discovery's own records are kept here: what they expect was fixed by the
        # walk. The check is generated on first use (:meth:`_materialize`, reached through
        # ``__getattr__`` when the ``check`` slot is still empty), so a new process's first
        # call, which needs a key and not a guard, does not pay for it; a caller reading
        # ``guard.check`` gets the generated function itself, never a trampoline.
        self._discovered: Sequence[Binding] = discovery.bindings
        self._mutables: tuple[tuple[str, MutableWatch], ...] = discovery.mutables
        # [watch version, audit generation] as last seen valid; re-baselined by check()
        # Start from values no counter ever has: the first check() compares every binding
        # with what discovery saw, so a change between discovery and the watchers'
        # registration (here, or later when the check is generated) cannot slip through.
        self._state = [-1, -1]

    def __getattr__(self, name: str) -> object:
        # Only for attributes not set yet: these three before the first use.
        if name not in ("check", "_fast", "_bindings"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self._materialize()
        return object.__getattribute__(self, name)

    def _materialize(self) -> None:
        """Generate the check and the fast parts (once; under a lock: a guard is shared by
        the threads calling one launcher)."""
        with _materializing:
            try:
                object.__getattribute__(self, "check")
                return  # another thread did
            except AttributeError:
                pass
            _audit.install()
            self._bindings = _dedupe(self._discovered)
            kinds = _by_kind(self._bindings)
            plan = _tag_plan(kinds[BindingKind.DICT], self._mutables)
            check = _compile_check(kinds, self._mutables, self._state, plan)
            self._fast = _fast_parts(kinds, plan)
            self.check = check  # last: a thread reading ``check`` unlocked sees it only when complete

    def fast_parts(self) -> tuple[tuple[object, ...], tuple[object, ...], bool, tuple[dict, ...] | None]:
        """``(cells, expected, fast, nsdicts)`` for a C caller that skips :meth:`check`
        (flydeps.builds._fastcache).

        ``fast`` is true when, besides ``cell.cell_contents is expected`` for each pair, all
        that ``check()`` verifies is covered by two counters: a namespace version and the
        audit generation (``flydeps.watch.audit._GEN[0]`` is replaced on every function attribute
        change). The namespace version is the C watcher backend's ``version()`` on CPython
        >= 3.12 (``flydeps.watch._watchext``; ``nsdicts`` is None), or on 3.10/3.11 the largest PEP
        509 tag of the dicts in ``nsdicts`` (``flydeps.watch._dictver``). A caller that saw
        ``check()`` pass after reading both counters may skip it while both are unchanged and
        the cells hold. No mutable-value checks may exist (they have no counter)."""
        return self._fast

    # -- explanations (slow path) ----------------------------------------------------
    def changes(self) -> tuple[Change, ...]:
        """Every binding that no longer holds, and every mutable value changed in place."""
        out = [_describe_change(b) for b in self._bindings if not b.holds()]
        for nid, watch in self._mutables:
            if not _unchanged(watch):
                label = nid.rpartition(":")
                now = describe(watch.container)
                out.append(Change(nid, ChangeKind.VALUE, label[0], label[2], "<as baselined>", now, True))
        return tuple(out)

    def __len__(self) -> int:
        return len(self._bindings) + len(self._mutables)

    def __repr__(self) -> str:
        return f"<Guard {len(self._bindings)} bindings, {len(self._mutables)} mutable values>"


_materializing = threading.RLock()

_TagPlan = tuple[tuple[dict, ...] | None, tuple[MutableWatch, ...], tuple[MutableWatch, ...]]


def _by_kind(bindings: Sequence[Binding]) -> dict[BindingKind, list[Binding]]:
    """The bindings of each kind, in their order (one pass, shared by the builders below)."""
    kinds: dict[BindingKind, list[Binding]] = {kind: [] for kind in BindingKind}
    for b in bindings:
        # an ENTRY (sys.modules, a library namespace) is checked as a namespace entry is; an
        # instance's TYPE with the function attributes: both are re-read after an audited store
        kinds[_MERGED.get(b.kind, b.kind)].append(b)
    return kinds


_MERGED = {BindingKind.ENTRY: BindingKind.DICT, BindingKind.TYPE: BindingKind.ATTR}


def _compile_check(
    kinds: dict[BindingKind, list[Binding]],
    mutables: Sequence[tuple[str, MutableWatch]],
    state: list[int],
    plan: _TagPlan,
) -> Callable[[], bool]:
    """Generate the hot-path check for these bindings (:func:`_by_kind`; see :class:`Guard`);
    ``plan`` is :func:`_tag_plan` of their namespace bindings and ``mutables``."""
    namespaced, funcs, cells = kinds[BindingKind.DICT], kinds[BindingKind.ATTR], kinds[BindingKind.CELL]
    tagged, covered, rest = plan
    env: dict[str, object] = {
        "is_": is_,
        "version": _watch.version,
        "gen": _audit._GEN,
        "settled_stores": _audit.settled,
        "state": state,
        "functions": _function_check(funcs),
        "mutables": rest,
        "tag_mutables": covered,
    }
    lines = ["def check():", "    try:"]
    ns_lines: list[str] = []
    if namespaced:
        env["ns"] = _namespace_check(namespaced)
        ns_lines = ["        if not ns[0]():", "            return False"]
    if (ns_lines or covered) and tagged is None and _watch_all(namespaced, covered):
        # CPython >= 3.12: one watcher counter for the namespaces and the plain dicts watched
        # for in-place mutation (a class-level table, an instance's __dict__)
        lines += ["        v = version()", "        if v != state[0]:"]
        lines += ["    " + line for line in ns_lines]
        if covered:
            lines += ["            if not all([w.unchanged() for w in tag_mutables]):", "                return False"]
        lines += ["            state[0] = v"]
    elif (ns_lines or covered) and tagged is not None:
        # CPython 3.10/3.11: the largest PEP 509 tag of these dicts (namespaces, and dicts
        # watched for in-place mutation) moves on any change to them (flydeps.watch.watchers); read
        # it BEFORE the bindings, remember it only after they all held.
        env["tags_max"], env["nsdicts"] = _watch.tags_max, tagged
        lines += ["        v = tags_max(nsdicts)", "        if v != state[0]:"]
        lines += ["    " + line for line in ns_lines]
        if covered:
            lines += ["            if not all([w.unchanged() for w in tag_mutables]):", "                return False"]
        lines += ["            state[0] = v"]
    else:
        lines += ns_lines
    if funcs:
        if _audit.ENABLED:
            lines += [
                "        g = gen[0]",
                "        if g != state[1]:",
                "            settled = settled_stores()  # before the re-read: see flydeps.watch.audit",
                "            if not functions():",
                "                return False",
                "            if settled:",
                "                state[1] = g",
            ]
        else:
            lines += ["        if not functions():", "            return False"]
    terms = []
    for n, b in enumerate(cells):
        env[f"c{n}"], env[f"e{n}"] = b.container, b.expected
        terms.append(f"c{n}.cell_contents is e{n}")
    if rest:
        terms.append("all([w.unchanged() for w in mutables])")
    lines.append(f"        return {' and '.join(terms) or 'True'}")
    lines += [
        "    except (KeyError, ValueError):  # a name was deleted, a cell emptied",
        "        return False",
        "    except RuntimeError:  # a watched container resized by another thread while read",
        "        return False",
    ]
    namespace: dict[str, object] = {}
    exec(_codegen.code("\n".join(lines), "<flydeps guard>"), env, namespace)  # noqa: S102 - generated from ids only
    return namespace["check"]  # type: ignore[return-value]


def _fast_parts(
    kinds: dict[BindingKind, list[Binding]], plan: _TagPlan
) -> tuple[tuple[object, ...], tuple[object, ...], bool, tuple[dict, ...] | None]:
    """See :meth:`Guard.fast_parts`; call after :func:`_compile_check` (which watches)."""
    cells, namespaced, funcs = kinds[BindingKind.CELL], kinds[BindingKind.DICT], bool(kinds[BindingKind.ATTR])
    tagged, covered, rest = plan
    fast = (
        not rest
        and ((not namespaced and not covered) or (_watch.AVAILABLE and _watch.BACKEND == "ext") or tagged is not None)
        and (not funcs or (_audit.ENABLED and _audit.install()))
    )
    return tuple(b.container for b in cells), tuple(b.expected for b in cells), fast, tagged


def _tag_plan(namespaced: Sequence[Binding], mutables: Sequence[tuple[str, MutableWatch]]) -> _TagPlan:
    """``(nsdicts, covered, rest)``: where PEP 509 tags are read (CPython 3.10/3.11 with
    ``flydeps.watch._dictver``), ``nsdicts`` are the distinct namespace dicts plus the plain dicts
    watched for in-place mutation (``covered``: their items are re-read only when the largest
    tag moved); ``rest`` are the mutable watches checked on every call (lists, sets, dict
    subclasses, instance layouts). With the C dict watchers (CPython >= 3.12) ``nsdicts`` is
    None and ``covered`` the same plain dicts (:func:`_watch_all` watches them). Without
    either: ``(None, (), all mutable watches)``."""
    watches = tuple(w for _, w in mutables)
    if not _watch.TAGS:
        if _watch.AVAILABLE and _watch.BACKEND == "ext":  # instance dicts stay re-read (read_instance_dict)
            covered = tuple(w for w in watches if type(w.container) is dict and w.read is read_dict)
            return None, covered, tuple(w for w in watches if not (type(w.container) is dict and w.read is read_dict))
        return None, (), watches
    dicts = {id(b.container): b.container for b in namespaced}
    if not all(type(d) is dict for d in dicts.values()):
        return None, (), watches
    covered = tuple(w for w in watches if type(w.container) is dict and w.read in _TAGGED_READS)
    for w in covered:
        dicts.setdefault(id(w.container), w.container)
    rest = tuple(w for w in watches if not (type(w.container) is dict and w.read in _TAGGED_READS))
    return tuple(dicts.values()), covered, rest  # type: ignore[arg-type]


_TAGGED_READS = (read_dict, read_instance_dict)  # plain dicts whose PEP 509 tag moves with every store


# Re-reads of a guard's namespaces (a watched namespace was written, or no counter exists)
# before its unrolled check is compiled: a new process starts each launcher without the
# ~1.5 ms compile() of a 450-helper guard, and a process whose namespaces keep changing
# gets the fastest re-read after the first few.
_TIER_UP = 64


def _namespace_check(bindings: Sequence[Binding]) -> list[Callable[[], bool]]:
    """The namespace part of a guard, ``[check]`` (the generated ``check()`` calls
    ``ns[0]()``): first :func:`_data_check`, which costs nothing to build; after
    ``_TIER_UP`` calls, :func:`_unrolled_check` takes its place. Both answer the same: a
    name rebound (safely comparable values, see ``_SAFE_EQ``, by ``==`` with identity
    first; all others by identity), deleted (``KeyError``, which ``check()`` answers with
    False) or defined where it was absent is a change."""
    groups, absent = _group_namespaces(bindings)
    data = _data_check(groups, absent)
    holder: list[Callable[[], bool]] = []
    left = [_TIER_UP]

    def counting() -> bool:
        left[0] -= 1
        if left[0] <= 0 and holder[0] is counting:  # two threads may both compile: the same check
            holder[0] = _unrolled_check(groups, absent)
        return data()

    holder.append(counting)
    return holder


def _data_check(groups: Sequence[tuple[bool, dict, list[Binding]]], absent: Sequence[Binding]) -> Callable[[], bool]:
    """Three C-level passes over flat tables, whatever the number of names."""
    safe = [b for is_safe, _ns, items in groups if is_safe for b in items]
    same = [b for is_safe, _ns, items in groups if not is_safe for b in items]
    safe_ns, safe_keys = tuple(b.container for b in safe), tuple(b.key for b in safe)
    safe_expected = [b.expected for b in safe]
    same_ns, same_keys = tuple(b.container for b in same), tuple(b.key for b in same)
    same_expected = tuple(b.expected for b in same)
    absent_ns, absent_keys = tuple(b.container for b in absent), tuple(b.key for b in absent)
    getitem: Callable[[object, str], object] = dict.__getitem__  # type: ignore[assignment]
    contains: Callable[[object, str], bool] = dict.__contains__  # type: ignore[assignment]

    def data() -> bool:
        return (
            list(map(getitem, safe_ns, safe_keys)) == safe_expected
            and all(map(is_, map(getitem, same_ns, same_keys), same_expected))
            and not any(map(contains, absent_ns, absent_keys))
        )

    return data


def _unrolled_check(
    groups: Sequence[tuple[bool, dict, list[Binding]]], absent: Sequence[Binding]
) -> Callable[[], bool]:
    """The namespace checks written out: per namespace one ``itemgetter`` over the names of
    each kind when it has >= 4, single subscripts otherwise; safely comparable values with
    ``!=``, the others with ``is`` (measured fastest: 8 µs for the 549 names of a
    450-helper launcher, vs 14 µs for the flat passes)."""
    env: dict[str, object] = {"is_": is_}
    lines = ["def namespaces():"]
    n = 0
    for safe, namespace, items in groups:
        if len(items) >= 4:
            getter, expected = itemgetter(*[b.key for b in items]), tuple(b.expected for b in items)
            env[f"g{n}"], env[f"n{n}"], env[f"e{n}"] = getter, namespace, expected
            test = f"g{n}(n{n}) != e{n}" if safe else f"not all(map(is_, g{n}(n{n}), e{n}))"
            lines += [f"    if {test}:", "        return False"]
            n += 1
            continue
        for b in items:
            env[f"n{n}"], env[f"k{n}"], env[f"e{n}"] = namespace, b.key, b.expected
            lines += [f"    if n{n}[k{n}] {'!=' if safe else 'is not'} e{n}:", "        return False"]
            n += 1
    for b in absent:
        env[f"n{n}"], env[f"k{n}"] = b.container, b.key
        lines += [f"    if k{n} in n{n}:", "        return False"]
        n += 1
    lines.append("    return True")
    namespace_: dict[str, object] = {}
    exec(_codegen.code("\n".join(lines), "<flydeps guard namespaces>"), env, namespace_)  # noqa: S102 - ids only
    return namespace_["namespaces"]  # type: ignore[return-value]


def _function_check(bindings: Sequence[Binding]) -> Callable[[], bool]:
    """Function attributes by ``getattr`` (a function's own), instances' types by ``type()``
    (never a ``__class__`` property)."""
    attrs = [b for b in bindings if b.kind is not BindingKind.TYPE]
    objs = tuple(b.container for b in attrs)
    names = tuple(b.key for b in attrs)
    expected = tuple(b.expected for b in attrs)
    instances = tuple(b.container for b in bindings if b.kind is BindingKind.TYPE)
    types = tuple(b.expected for b in bindings if b.kind is BindingKind.TYPE)

    def functions() -> bool:
        return all(map(is_, map(getattr, objs, names), expected)) and all(map(is_, map(type, instances), types))

    return functions


def _dedupe(bindings: Sequence[Binding]) -> tuple[Binding, ...]:
    seen: dict[tuple[int, str], Binding] = {}
    for b in bindings:
        seen.setdefault((id(b.container), b.key), b)
    return tuple(seen.values())


def _group_namespaces(bindings: Sequence[Binding]) -> tuple[list[tuple[bool, dict, list[Binding]]], list[Binding]]:
    """Per namespace, ``(safe, namespace, bindings)``: its names bound to safely comparable
    values (``safe``: see ``_SAFE_EQ_IDS``), and the others; then the bindings of absent names.
    One pass (a new process builds the guard of hundreds of helpers)."""
    by_dict: dict[tuple[int, bool], tuple[bool, dict, list[Binding]]] = {}
    absent: list[Binding] = []
    safe_ids = _SAFE_EQ_IDS
    for b in bindings:
        expected = b.expected
        if expected is MISSING:
            absent.append(b)
            continue
        safe = id(type(expected)) in safe_ids
        key = (id(b.container), safe)
        found = by_dict.get(key)
        if found is None:
            found = by_dict[key] = (safe, b.container, [])  # type: ignore[assignment]
        found[2].append(b)  # type: ignore[index]
    return list(by_dict.values()), absent


def _watch_all(namespaced: Sequence[Binding], covered: Sequence[MutableWatch] = ()) -> bool:
    """Register a dict watcher for every namespace and every plain dict watched for in-place
    mutation; False when watchers are unavailable.

    Functions need no watcher: their attribute assignments are audited (:mod:`flydeps.watch.audit`)."""
    if not _watch.AVAILABLE:
        return False
    dicts = {id(b.container): b.container for b in namespaced}
    dicts.update((id(w.container), w.container) for w in covered)
    for namespace in dicts.values():
        _watch.watch_dict(namespace)  # type: ignore[arg-type]
    return _watch.AVAILABLE


def _unchanged(watch: MutableWatch) -> bool:
    try:
        return watch.unchanged()
    except RuntimeError:  # resized by another thread while read: it changed
        return False


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
