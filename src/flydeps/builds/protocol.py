"""The build protocol: snapshot before a build, compare after, adopt only the build's own writes.

Contract: one mechanism for every consumer that caches a build made from live code
(:func:`flydeps.cached_factory`, the ``flydsl_runtime`` launchers):

1. :func:`begin` (before the build runs) takes the fingerprint of the roots known before the
   build, the module-level bindings the reachable code may write (read from its bytecode,
   :func:`flydeps.builds.writes.write_targets`) and the digest of each of those values now;
2. the consumer runs the build (a factory call, a FlyDSL trace);
3. :func:`finish` records, process-wide, each written value's ``before -> after`` digests
   (:data:`flydeps.builds.writes.TRANSITIONS`): from now on that step is a managed build's own
   effect for every consumer in the process. Called when the build raised too: what it
   wrote before failing is its own effect all the same;
4. the consumer fingerprints what it keeps (for a factory: with its return value as a second
   root), and only then calls :func:`settle`, which judges the pre-build fingerprint against
   the same roots now. Same roots on both sides, so node ids compare one to one (a factory
   returning an object its code also reads gets other node ids in a two-root graph); and
   settling after the kept fingerprint was taken closes the window in which a change could
   slip between the verdict and the baseline.

:func:`judge` compares a baseline with a newer fingerprint node by node and returns a
:class:`Judgement`: ``SAME`` (nothing that matters changed), ``ADOPT`` (only data values
changed, each along steps recorded by managed builds), ``DATA`` (a data value changed that
no managed build explains) or ``CODE`` (code, a binding to code, or the structure changed).
After a build, anything but SAME/ADOPT means the state the build read changed while it ran:
the consumer returns the result to its caller (who started before the change) and does not
keep it, so every later call rebuilds. The same :func:`judge` decides when a guard fails on
a kept entry, and :mod:`flydeps.builds.drift` turns its verdict into an action.

Class attributes a build writes through library code (FlyDSL fills a struct class's layout
cache, ``__dsl_storage_layout_cache__``, the first time a trace allocates it) are the build's
own when the consumer reports them from the writing thread (:func:`note_write`, called by
``flydsl_runtime``'s hook on FlyDSL's writer while a build of that thread runs): after the
build, a class whose changed attributes are all such writes has its step recorded in
:data:`~flydeps.builds.writes.TRANSITIONS` and is adopted like a written global (its methods and
bases are still compared), so the trace is kept, not discarded and traced again.

Writes while the build ran (A-B-A): the judgement compares states, so a helper rebound by
another thread while the build ran and put back before it ended compares SAME although the
build may have read the other helper. On CPython 3.10/3.11 every dict write gives the dict
a fresh PEP 509 tag from one growing counter: :func:`begin` reads the counter (the tag of a
new dict), and :func:`conclude` finds the namespaces the fingerprint binds whose tag moved
past it. A namespace written while the build ran by anything but the build's own writes
(the namespaces its code stores names into, the classes whose attributes it sets, the
namespaces reported by :func:`note_write` and :func:`note_namespace_write`; an item store or
a mutating call writes a value, not the namespace that binds it) gives ``Verdict.RACED``
when nothing else changed: the result goes to its caller, nothing is kept, the next call
builds again.

A value back at a state before the writes of builds other than the ones kept under the
baseline (a memo another consumer's build filled, emptied by the user after an input of
that fill changed) gives ``Verdict.UNDONE``: not a user's change (no ``GlobalDriftError``),
but the build is re-made -- a launcher re-traces and keeps its entry when FlyDSL's IR key is
the same.

Residual limits: a write to a value (or namespace) the build itself writes, made by another
thread while the build runs, is indistinguishable from the build's own write and is adopted.
Dicts bound as data values (``TABLE`` of ``TABLE['k']``) have their tags read too, unless
the build writes them. On every version, functions of the build's graph whose ``__code__``
or ``__defaults__`` another thread assigned while the build ran (:mod:`flydeps.watch.audit`'s
hook, :func:`_audit.record_assignments`) give ``RACED``. Not detected: on CPython 3.12+ the
namespace and dict cases (dict watchers count writes process-wide, per-dict tags are not
read), and a closure cell written and put back by another thread (no event exists for cell
writes). Writes through
closures, ``self``/class attributes, ``setattr`` or C code are not attributed to the build
unless reported by :func:`note_write`: they count as somebody else's change (the build is
rebuilt or follows ``on_drift``).
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import FunctionType
from typing import TypeVar

from ..graph import DepGraph, Node, NodeKind
from ..keys.codeswap import code_swaps, merge_code_swaps
from ..keys.fingerprint import Fingerprint, NodeDiff, fingerprint_roots
from ..keys.guard import Guard
from ..values.bindings import BindingKind, class_dict
from ..watch import audit as _audit
from ..watch import watchers as _watch
from .writes import TRANSITIONS, WriteTarget, write_targets

__all__ = [
    "BuildStart",
    "Judgement",
    "RootsBaseline",
    "Verdict",
    "begin",
    "finish",
    "conclude",
    "judge",
    "note_namespace_write",
    "note_write",
    "settle",
    "stable",
    "start_states",
]

T = TypeVar("T")
_DATA_KINDS = frozenset({NodeKind.GLOBAL, NodeKind.OBJECT})
_RETRIES = 64


class Verdict(str, enum.Enum):
    SAME = "same"  # nothing that matters changed
    ADOPT = "adopt"  # only data changed, every change explained by managed builds
    DATA = "data"  # a data value changed that no managed build explains
    CODE = "code"  # code, a binding to code or the dependency structure changed
    RACED = "raced"  # a namespace it read was written while the build ran, not by the build
    # only data changed, some of it back to a state before other builds' writes (a memo
    # emptied): what they computed may come from inputs changed since; re-made, no drift
    UNDONE = "undone"


@dataclass(frozen=True, slots=True)
class Judgement:
    """The verdict plus the differences that were not adopted, newest state as ``new``."""

    verdict: Verdict
    diffs: tuple[NodeDiff, ...] = ()
    adopted: tuple[str, ...] = ()

    def reasons(self) -> str:
        return "; ".join(str(d) for d in self.diffs) or "the dependency structure changed"


@dataclass(frozen=True, slots=True)
class BuildStart:
    """What :func:`begin` saw before the build: the fingerprint and the written values' digests."""

    fingerprint: Fingerprint
    writes: tuple[WriteTarget, ...]
    states: tuple[str | None, ...]
    guard: Guard | None = None  # the fingerprint's guard, when the consumer keeps one
    # id(namespace) -> (namespace, attribute names) the build reported writing (note_write,
    # note_namespace_write: no names)
    own: dict[int, tuple[dict, set[str]]] = field(default_factory=dict)
    clock: int | None = None  # the PEP 509 counter when the build began (3.10/3.11), else None
    namespaces: tuple[tuple[dict, str], ...] = ()  # the namespaces the fingerprint binds, labelled
    # ids of the functions other threads assigned __code__/__defaults__ of while it ran (_audit)
    assigned: set[int] | None = None


def stable(fn: Callable[..., T], *args: object) -> T:
    """``fn(*args)``, retried while another thread resizes a container it iterates.

    Structural reads of user data (discovery, snapshots) can meet ``RuntimeError: dictionary
    changed size during iteration``; the read is simply repeated, never surfaced."""
    for _ in range(_RETRIES - 1):
        try:
            return fn(*args)
        except RuntimeError as exc:
            if "during iteration" not in str(exc):
                raise
    return fn(*args)


def begin(fp: Fingerprint) -> BuildStart:
    """Start a build whose reads are described by ``fp`` (validated just before by its guard).
    The caller must call :func:`finish` on the same thread, whatever the build does."""
    functions = _functions(fp)
    writes = write_targets(functions)
    return _started(BuildStart(fp, writes, tuple(w.state() for w in writes), namespaces=_namespaces(fp)))


_THREAD = threading.local()  # .builds: the BuildStarts running on this thread, innermost last


def _started(start: BuildStart) -> BuildStart:
    """``start`` with the PEP 509 clock read now, pushed on this thread's running builds."""
    clock = _watch.tags_max(({},)) if _watch.TAGS and start.namespaces else None  # a new dict's tag
    assigned = _audit.record_assignments()
    start = BuildStart(
        start.fingerprint, start.writes, start.states, start.guard, start.own, clock, start.namespaces, assigned
    )
    builds = getattr(_THREAD, "builds", None)
    if builds is None:
        builds = _THREAD.builds = []
    builds.append(start)
    return start


def note_write(cls: type, name: str) -> None:
    """The builds running on this thread wrote attribute ``name`` of class ``cls`` (a
    library's cache filled while tracing): their own effect, adopted after the build when
    it is all that changed of the class. A no-op when no build runs on this thread."""
    builds = getattr(_THREAD, "builds", None)
    if not builds:
        return
    namespace = class_dict(cls)
    if type(namespace) is not dict:
        return
    for start in builds:
        start.own.setdefault(id(namespace), (namespace, set()))[1].add(name)


def note_namespace_write(namespace: dict) -> None:
    """The builds running on this thread wrote names into ``namespace`` through library code
    (FlyDSL's AST rewriter installs its helper names into a decorated function's module):
    their own effect, so that namespace's move is no A-B-A sign. A no-op outside a build."""
    builds = getattr(_THREAD, "builds", None)
    if not builds or type(namespace) is not dict:
        return
    for start in builds:
        start.own.setdefault(id(namespace), (namespace, set()))


def _namespaces(fp: Fingerprint) -> tuple[tuple[dict, str], ...]:
    """The dicts whose bindings ``fp`` holds (module and class namespaces), each labelled
    (its module name, or the binding's label without the name), and the dicts bound as data
    values (``TABLE`` of ``TABLE['scale']``, labelled by their binding); empty without PEP 509
    tags. An object's own attributes (a FlyDSL kernel's ``_name``) are left out: the library
    object rewrites its other attributes on every trace."""
    discovery = fp._discovery
    if discovery is None or not _watch.TAGS:
        return ()
    nodes = fp.graph.nodes
    found: dict[int, tuple[dict, str]] = {}
    for b in discovery.bindings:
        if (
            b.kind is BindingKind.DICT
            and type(b.container) is dict
            and id(b.container) not in found
            and (b.node not in nodes or nodes[b.node].kind is not NodeKind.OBJECT)
        ):
            name = b.container.get("__name__")
            label = name if type(name) is str else (b.label.rpartition(".")[0] or b.node)
            found[id(b.container)] = (b.container, label)
        value = b.expected
        if type(value) is dict and not b.code and b.kind in (BindingKind.DICT, BindingKind.CELL):
            found.setdefault(id(value), (value, b.label))
    return tuple(found.values())


class RootsBaseline:
    """:func:`begin` for builds of fixed roots (a factory function): the fingerprint and the
    write targets are reused while the fingerprint's guard holds, so a miss with nothing
    changed costs identity checks plus one snapshot per written value, not a discovery."""

    __slots__ = ("_last", "roots")

    def __init__(self, roots: Sequence[tuple[object, type | None, str]]) -> None:
        self.roots = tuple(roots)
        self._last: tuple[Fingerprint, Guard, tuple[WriteTarget, ...]] | None = None

    def begin(self) -> BuildStart:
        last = self._last
        if last is None or not last[1].check():
            fp = stable(fingerprint_roots, self.roots)
            last = self._last = (fp, fp.guard(), write_targets(_functions(fp)))
        fp, guard, writes = last
        return _started(BuildStart(fp, writes, tuple(w.state() for w in writes), guard, namespaces=_namespaces(fp)))


def finish(start: BuildStart) -> None:
    """Record every written value's ``before -> after`` step as a managed build's effect, and
    end the build on this thread (later :func:`note_write` calls are not its own)."""
    builds = getattr(_THREAD, "builds", None) or []
    for i in range(len(builds) - 1, -1, -1):  # by identity (a BuildStart compares by value)
        if builds[i] is start:
            del builds[i]
            break
    if start.assigned is not None:
        _audit.stop_recording(start.assigned)
    for target, before in zip(start.writes, start.states):
        TRANSITIONS.record(target.label, before, target.state())


def settle(start: BuildStart) -> Judgement:
    """After the build (and after the consumer fingerprinted what it keeps): did what the build
    read change while it ran? Identity checks when the start's guard still holds, else
    :func:`judge` of the start fingerprint against a refresh of the same roots; ``RACED``
    when nothing changed but a namespace it read was written meanwhile by others
    (:func:`conclude`)."""
    if start.guard is not None and start.guard.check():
        return _raced(start) or Judgement(Verdict.SAME)
    return conclude(start, stable(start.fingerprint.refresh))


def conclude(start: BuildStart, after: Fingerprint, *, starts: Mapping[str, frozenset] | None = None) -> Judgement:
    """The verdict on a finished build: ``after`` is the same roots fingerprinted now.

    The build's reported class writes are recorded as managed steps (:func:`note_write`),
    then :func:`judge` compares ``start``'s fingerprint with ``after``; where that finds
    nothing (SAME/ADOPT), ``RACED`` when a namespace the build read was written while it ran
    by anything but its own writes (a change that is still there is named by ``judge``)."""
    _record_own_classes(start, after)
    judgement = judge(start.fingerprint, after, starts=starts)
    if judgement.verdict is Verdict.SAME or judgement.verdict is Verdict.ADOPT:
        return _raced(start) or judgement
    return judgement


def _raced(start: BuildStart) -> Judgement | None:
    """``RACED`` naming the functions of the build's graph whose ``__code__``/``__defaults__``
    another thread assigned while it ran (:mod:`flydeps.watch.audit`), or the namespaces written
    since :func:`begin` other than the build's own (PEP 509 tags past the start's clock);
    None when there are none."""
    if start.assigned:
        swapped = [f for f in _functions(start.fingerprint) if id(f) in start.assigned]
        if swapped:
            status = "had __code__ or __defaults__ assigned by another thread while the build ran"
            diffs = tuple(
                NodeDiff(f"function {f.__module__}.{f.__qualname__}", NodeKind.FUNCTION, status) for f in swapped
            )
            return Judgement(Verdict.RACED, diffs)
    if start.clock is None:
        return None
    tags_max, clock = _watch.tags_max, start.clock
    written = [(ns, label) for ns, label in start.namespaces if tags_max((ns,)) > clock]
    if not written:
        return None
    own = {id(ns) for ns, _names in start.own.values()}
    for target in start.writes:
        if target.rebinds:  # STORE_GLOBAL, a module attribute store: the namespace itself
            own.add(id(target.container))
        value = target.container.get(target.name) if type(target.container) is dict else None
        if value is None and type(target.container) is not dict:
            value = getattr(target.container, "cell_contents", None)
        if isinstance(value, type):  # ``Cls.x = v``: the class's namespace
            own.add(id(class_dict(value)))
        elif type(value) is dict:  # ``MEMO[k] = v``: the dict value itself
            own.add(id(value))
    foreign = [label for ns, label in written if id(ns) not in own]
    if not foreign:
        return None
    status = "was written while the build ran (a rebinding another thread may have put back)"
    return Judgement(Verdict.RACED, tuple(NodeDiff(f"namespace {label}", NodeKind.MODULE, status) for label in foreign))


def _record_own_classes(start: BuildStart, after: Fingerprint) -> None:
    """A class whose data attributes changed during the build only by the build's reported
    writes (:func:`note_write`): record its ``before -> after`` digests as a managed step."""
    if not start.own:
        return
    old_nodes, new_nodes = start.fingerprint.graph.nodes, after.graph.nodes
    for namespace, names in start.own.values():
        nid = _class_node(start.fingerprint, namespace)
        if nid is None or nid not in new_nodes or old_nodes[nid].digest == new_nodes[nid].digest:
            continue
        before, now = _attributes(start.fingerprint, namespace), _attributes(after, namespace)
        changed = {k for k in before.keys() | now.keys() if before.get(k, _ABSENT) is not now.get(k, _ABSENT)}
        if changed <= names:
            TRANSITIONS.record(nid, old_nodes[nid].digest, new_nodes[nid].digest)


_ABSENT = object()


def _class_node(fp: Fingerprint, namespace: dict) -> str | None:
    """The id of the class node whose namespace is ``namespace`` in ``fp``."""
    nodes = fp.graph.nodes
    for b in fp._discovery.bindings if fp._discovery is not None else ():
        if b.container is namespace and b.node in nodes and nodes[b.node].kind is NodeKind.CLASS:
            return b.node
    return None


def _attributes(fp: Fingerprint, namespace: dict) -> dict[str, object]:
    """What ``fp`` saw bound in ``namespace``: name -> object."""
    bindings = fp._discovery.bindings if fp._discovery is not None else ()
    return {b.key: b.expected for b in bindings if b.kind is BindingKind.DICT and b.container is namespace}


def start_states(start: BuildStart, into: Mapping[str, frozenset] | None = None) -> dict[str, frozenset]:
    """``label -> states`` a kept build started from, for each value it may write, merged
    into ``into`` (the starts of earlier builds kept under the same baseline)."""
    merged = dict(into or {})
    for target, before in zip(start.writes, start.states):
        merged[target.label] = merged.get(target.label, frozenset()) | {before}
    return merged


def judge(old: Fingerprint, new: Fingerprint, *, starts: Mapping[str, frozenset] | None = None) -> Judgement:
    """Compare baseline ``old`` with ``new`` of the same roots (see the module docstring).

    ``starts`` (:func:`start_states`): a value a kept build wrote that now holds a state one of
    those builds started from is adopted too: a build starting now reads what they read (a
    memo a reload emptied, a registry reset to its import-time contents), and what it read
    to fill them is guarded by its own reads. A value back at another state from which
    recorded managed-build steps lead to the baseline (a memo another build filled, emptied)
    is no user change either, but what those builds wrote was computed from inputs this
    build never read, which may have changed since: ``UNDONE`` when nothing else changed,
    so the consumer re-makes the build (a launcher re-traces and keeps its entry when the
    IR is the same), never raises."""
    if new.digest == old.digest:
        return Judgement(Verdict.SAME)
    before, after = old.graph.nodes, new.graph.nodes
    starts = starts or {}
    classes = _adopted_classes(before, after)  # their members and bases still count
    changed = {nid for nid, node in before.items() if nid in after and after[nid].digest != node.digest}
    adopted = {
        nid
        for nid in changed
        if before[nid].kind in _DATA_KINDS
        and (
            TRANSITIONS.explains(nid, before[nid].digest, after[nid].digest)  # managed builds wrote it since
            or after[nid].digest in starts.get(nid, ())  # back to where a kept build started
        )
    }
    undone = {  # back along managed writes this build did not start from
        nid
        for nid in changed - adopted
        if before[nid].kind in _DATA_KINDS and TRANSITIONS.explains(nid, after[nid].digest, before[nid].digest)
    }
    reach = _reachable(old.graph, adopted | undone)
    diffs = _rebound(old, new, reach - adopted - undone)
    for nid in sorted(reach - undone):
        node = before[nid]
        if nid not in after:
            diffs.append(NodeDiff(nid, node.kind, "removed", node.detail))
        elif after[nid].digest != node.digest and nid not in adopted and nid not in classes:
            diffs.append(NodeDiff(nid, node.kind, "changed", node.detail, after[nid].detail))
    diffs = merge_code_swaps(diffs, code_swaps(old._discovery, new._discovery))  # a __code__ swap is a code change
    kept = tuple(sorted(adopted | classes))
    if not diffs and undone:
        status = "back to a state before other builds' writes"
        back = tuple(NodeDiff(n, before[n].kind, status, before[n].detail, after[n].detail) for n in sorted(undone))
        return Judgement(Verdict.UNDONE, back, kept)
    if not diffs:
        return Judgement(Verdict.ADOPT if kept else Verdict.CODE, (), kept)
    data = all(d.kind is NodeKind.GLOBAL and d.status == "changed" for d in diffs)
    return Judgement(Verdict.DATA if data else Verdict.CODE, tuple(diffs), kept)


def _adopted_classes(before: Mapping[str, Node], after: Mapping[str, Node]) -> set[str]:
    """Classes whose data attributes moved only along steps managed builds recorded
    (:func:`note_write`, :func:`_record_own_classes`), forward or back."""
    return {
        nid
        for nid, node in before.items()
        if node.kind is NodeKind.CLASS
        and nid in after
        and after[nid].digest != node.digest
        and (
            TRANSITIONS.explains(nid, node.digest, after[nid].digest)
            or TRANSITIONS.explains(nid, after[nid].digest, node.digest)
        )
    }


def _functions(fp: Fingerprint) -> list[FunctionType]:
    discovery = fp._discovery
    if discovery is None:
        return []
    seen: dict[int, FunctionType] = {}
    for b in discovery.bindings:
        if b.kind is BindingKind.ATTR and type(b.container) is FunctionType:
            seen.setdefault(id(b.container), b.container)
    return list(seen.values())


def _reachable(graph: DepGraph, stop: set[str]) -> set[str]:
    """Nodes reachable from the roots without going through a node of ``stop``."""
    seen = set(graph.roots)
    todo = list(graph.roots)
    while todo:
        nid = todo.pop()
        if nid in stop:
            continue
        for e in graph.successors(nid):
            if e.dst not in seen:
                seen.add(e.dst)
                todo.append(e.dst)
    return seen


def _rebound(old: Fingerprint, new: Fingerprint, reach: set[str]) -> list[NodeDiff]:
    """Names read by a reached node that now resolve to another node with other contents.

    A name resolving to another node whose transitive digest equals the old target's reads
    exactly what the old one did (same code, values and structure below it): after a partial
    reload, ``accumulate`` reads the reloaded ``load`` (node ``load#2``, because the importer
    still holds the old one) while an unedited reload left it identical."""
    before = {(e.src, e.kind, e.label): e.dst for e in old.graph.edges if e.src in reach}
    old_digests, new_digests = old.node_digests, new.node_digests
    out = []
    for e in new.graph.edges:
        was = before.get((e.src, e.kind, e.label))
        if was is not None and was != e.dst and old_digests.get(was) != new_digests.get(e.dst):
            out.append(NodeDiff(f"{e.label} (read by {e.src})", new.graph.nodes[e.dst].kind, "rebound", was, e.dst))
    return out
