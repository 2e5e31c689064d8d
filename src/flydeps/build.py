"""The build protocol: snapshot before a build, compare after, adopt only the build's own writes.

Contract: one mechanism for every consumer that caches a build made from live code
(:func:`flydeps.cached_factory`, the ``flydsl_runtime`` launchers):

1. :func:`begin` (before the build runs) takes the fingerprint of the roots known before the
   build, the module-level bindings the reachable code may write (read from its bytecode,
   :func:`flydeps._writes.write_targets`) and the digest of each of those values now;
2. the consumer runs the build (a factory call, a FlyDSL trace);
3. :func:`finish` records, process-wide, each written value's ``before -> after`` digests
   (:data:`flydeps._writes.TRANSITIONS`): from now on that step is a managed build's own
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
a kept entry, and :mod:`flydeps.drift` turns its verdict into an action.

Residual limit: a write to a value the build itself writes, made by another thread while the
build runs, is indistinguishable from the build's own write and is adopted. Writes through
closures, ``self``/class attributes, ``setattr`` or C code are not attributed to the build:
they count as somebody else's change (the build is rebuilt or follows ``on_drift``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import FunctionType
from typing import TypeVar

from ._bindings import BindingKind
from ._codeswap import code_swaps, merge_code_swaps
from ._writes import TRANSITIONS, WriteTarget, write_targets
from .fingerprint import Fingerprint, NodeDiff, fingerprint_roots
from .graph import DepGraph, NodeKind
from .guard import Guard

__all__ = [
    "BuildStart",
    "Judgement",
    "RootsBaseline",
    "Verdict",
    "begin",
    "finish",
    "judge",
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
    """Start a build whose reads are described by ``fp`` (validated just before by its guard)."""
    functions = _functions(fp)
    writes = write_targets(functions)
    return BuildStart(fp, writes, tuple(w.state() for w in writes))


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
        return BuildStart(fp, writes, tuple(w.state() for w in writes), guard)


def finish(start: BuildStart) -> None:
    """Record every written value's ``before -> after`` step as a managed build's effect."""
    for target, before in zip(start.writes, start.states):
        TRANSITIONS.record(target.label, before, target.state())


def settle(start: BuildStart) -> Judgement:
    """After the build (and after the consumer fingerprinted what it keeps): did what the build
    read change while it ran? Identity checks when the start's guard still holds, else
    :func:`judge` of the start fingerprint against a refresh of the same roots."""
    if start.guard is not None and start.guard.check():
        return Judgement(Verdict.SAME)
    return judge(start.fingerprint, stable(start.fingerprint.refresh))


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
    memo a reload emptied, a registry reset to its import-time contents). Likewise a value
    back at a state from which recorded managed-build steps lead to the baseline: undoing the
    builds' own writes is no more a user change than making them was (issue 7.7's rule, in
    reverse)."""
    if new.digest == old.digest:
        return Judgement(Verdict.SAME)
    before, after = old.graph.nodes, new.graph.nodes
    starts = starts or {}
    adopted = {
        nid
        for nid, node in before.items()
        if node.kind in _DATA_KINDS
        and nid in after
        and after[nid].digest != node.digest
        and (
            TRANSITIONS.explains(nid, node.digest, after[nid].digest)  # managed builds wrote it since
            or after[nid].digest in starts.get(nid, ())  # back to where a kept build started
            or TRANSITIONS.explains(nid, after[nid].digest, node.digest)  # back along managed writes
        )
    }
    reach = _reachable(old.graph, adopted)
    diffs = _rebound(old, new, reach - adopted)
    for nid in sorted(reach):
        node = before[nid]
        if nid not in after:
            diffs.append(NodeDiff(nid, node.kind, "removed", node.detail))
        elif after[nid].digest != node.digest and nid not in adopted:
            diffs.append(NodeDiff(nid, node.kind, "changed", node.detail, after[nid].detail))
    diffs = merge_code_swaps(diffs, code_swaps(old, new))  # a __code__ swap is a code change
    kept = tuple(sorted(adopted))
    if not diffs:
        return Judgement(Verdict.ADOPT if kept else Verdict.CODE, (), kept)
    data = all(d.kind is NodeKind.GLOBAL and d.status == "changed" for d in diffs)
    return Judgement(Verdict.DATA if data else Verdict.CODE, tuple(diffs), kept)


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
