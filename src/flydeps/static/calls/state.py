"""The call-graph solver's abstract store: slots, values, loaded modules and the work list.

Contract: :class:`FlowState` is the data the solver (:mod:`flydeps.static.calls.solve`)
drives to a fixed point; it knows no rule of the flow. It holds the flow facts
(:mod:`flydeps.static.calls.facts`) of the modules loaded so far (on demand, through a
:data:`FactsSource`, :meth:`FlowState.need`), their signatures, the values each slot holds
(:meth:`FlowState.add`, :meth:`FlowState.slot`), the call edges found, and the work list
with its dependencies: which slots each fact read, so that a fact is applied again only
when one of them grows (:meth:`FlowState.settle`, which applies each fact with the rule it
is given), and which slots each expression read, so that its values are computed again
only when some slot changed (:meth:`FlowState.recall`, :meth:`FlowState.start_reads`,
:meth:`FlowState.remember`). It is bounded (:data:`MAX_VALUES` per slot,
:data:`MAX_ROUNDS` applications per fact on average), so library-sized class hierarchies
end in seconds, possibly missing calls: each slot whose bound dropped values is recorded in
:attr:`FlowState.saturated` (reported as a diagnostic naming the slot, see
:func:`flydeps.static.calls.result.bound_diagnostics`).
"""

from __future__ import annotations

import logging
from collections import defaultdict, deque
from collections.abc import Callable, Iterable

from .facts import FlowFacts
from .result import Callee

__all__ = ["MAX_ROUNDS", "MAX_VALUES", "ApplyFact", "FactsSource", "FlowState", "Signature", "Value"]

log = logging.getLogger("flydeps.static")

Value = tuple  # see ``FlowState``: ("fn", m, q), ("cls", m, q), ("inst", m, q), ...

# Work-list budget: how many times, on average, each fact may be applied before the
# solver gives up (small programs settle in two or three).
MAX_ROUNDS = 200
# Values one slot keeps. A ``self`` reached through hundreds of subclasses would otherwise
# make every attribute read a product of classes x methods (measured: FlyDSL's 134,000
# lines grew past 20 GB); beyond this a slot stops growing and its readers may miss calls.
MAX_VALUES = 64

#: The flow facts of a project module by its dotted name; None when it has none.
FactsSource = Callable[[str], "FlowFacts | None"]
#: How a fact changes the state: ``(module, kind, text, operands)`` of one fact.
ApplyFact = Callable[[str, str, str, tuple[int, ...]], None]


class Signature:
    """A function's parameters and flags, from its ``sig`` fact."""

    __slots__ = ("flags", "positional", "names", "vararg", "kwarg")

    def __init__(self, flags: str, params: str) -> None:
        self.flags = frozenset(flags.split(",")) - {""}
        parts = [p.split(":", 1) for p in params.split(",") if p]
        self.positional = [n for k, n in parts if k == "p"]
        self.names = {n for k, n in parts if k in ("p", "k")}
        self.vararg = next((n for k, n in parts if k == "*"), "")
        self.kwarg = next((n for k, n in parts if k == "**"), "")


class FlowState:
    """Slots, values, loaded modules and the work list.

    Values are tuples: ``("fn", m, q)`` a function or lambda, ``("cls", m, q)`` a class,
    ``("inst", m, q)`` an instance, ``("meth", m, q, self)`` a bound method, ``("mod", m)``
    a project module, ``("ext", dotted)`` library code, ``("cont", m, id)`` a container,
    ``("cmeth", m, id, name)`` a container's method, ``("gen", m, q)`` a generator,
    ``("super", m, class, self)`` a ``super()`` object."""

    def __init__(self, facts_of: FactsSource) -> None:
        self.facts_of = facts_of
        self.modules: dict[str, FlowFacts] = {}
        self.missing: set[str] = set()
        self.slots: defaultdict[tuple, set[Value]] = defaultdict(set)
        self.keys: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
        self.sigs: dict[tuple[str, str], Signature] = {}
        # The call edges found: (module, scope) of the caller -> callees.
        self.calls: defaultdict[tuple[str, str], set[Callee]] = defaultdict(set)
        # Expression values with the slots they read, valid while ``epoch`` (the count of
        # slot changes) is the same.
        self.memo: dict[tuple[str, int], tuple[int, frozenset[Value], frozenset[tuple]]] = {}
        self.epoch = 0
        # The work list: facts to (re)apply; a fact is applied again when a slot it read grows.
        self.queue: deque[tuple[str, int]] = deque()
        self.queued: set[tuple[str, int]] = set()
        self.readers: defaultdict[tuple, set[tuple[str, int]]] = defaultdict(set)
        self.reading: list[set[tuple]] = []
        # (``self`` slot of a method, an instance of its class): given to the methods that
        # no call reaches with an instance, once the flow has settled (see ``solve``).
        self.seeds: list[tuple[tuple, Value]] = []
        # Slots that reached MAX_VALUES and refused a value: calls through them may be missed.
        self.saturated: set[tuple] = set()

    # -- modules and slots ---------------------------------------------------------------
    def need(self, name: str) -> None:
        """Load module ``name``'s facts (once): queue them, read its signatures."""
        if name in self.modules or name in self.missing:
            return
        facts = self.facts_of(name)
        if facts is None:
            self.missing.add(name)
            return
        self.modules[name] = facts
        for number, (kind, _, _) in enumerate(facts.facts):
            if kind != "sig":
                self.enqueue((name, number))
        for kind, text, _ in facts.facts:
            if kind == "assign" and text.startswith("e\0"):  # a display's constant keys, known
                _, cid, key = text.split("\0")  # up front: ``d["a"]`` never reads other keys while
                self.keys[(name, cid)].add(key)  # its own are still to be stored
            if kind == "sig":
                qual, flags, params = text.split("\0")
                sig = self.sigs[(name, qual)] = Signature(flags, params)
                if sig.vararg:
                    self.add(("v", name, qual, sig.vararg), {("cont", name, "*" + qual)})
                if sig.kwarg:
                    self.add(("v", name, qual, sig.kwarg), {("cont", name, "**" + qual)})
                if "method" in sig.flags and sig.positional and "staticmethod" not in sig.flags:
                    owner = qual.rpartition(".")[0]
                    kind = "cls" if "classmethod" in sig.flags else "inst"
                    self.seeds.append((("v", name, qual, sig.positional[0]), (kind, name, owner)))

    def add(self, slot: tuple, values: Iterable[Value]) -> None:
        """``values`` flow into ``slot``: the facts that read it are queued if it grew."""
        held = self.slots[slot]
        before = len(held)
        if before >= MAX_VALUES:  # saturated: library-sized hierarchies would grow without end
            if slot not in self.saturated and not held.issuperset(values):
                self.saturated.add(slot)
                log.info("call graph: slot %r reached its bound of %d values", slot, MAX_VALUES)
            return
        held.update(values)
        if len(held) != before:
            self.epoch += 1
            self.wake(slot)
            if slot[0] == "e" and slot[3] not in self.keys[(slot[1], slot[2])]:
                self.keys[(slot[1], slot[2])].add(slot[3])
                self.wake(("keys", slot[1], slot[2]))

    def wake(self, slot: tuple) -> None:
        for fact in self.readers.get(slot, ()):
            self.enqueue(fact)

    def enqueue(self, fact: tuple[str, int]) -> None:
        if fact not in self.queued:
            self.queued.add(fact)
            self.queue.append(fact)

    def slot(self, *key: str) -> set[Value]:
        """What slot ``key`` holds (recorded as read by the fact or expression at work)."""
        if self.reading:
            self.reading[-1].add(key)
        found = self.slots.get(key)
        return found if found is not None else set()

    def container_keys(self, owner: str, cid: str) -> set[str]:
        if self.reading:
            self.reading[-1].add(("keys", owner, cid))
        found = self.keys.get((owner, cid))
        return found if found is not None else set()

    def elements(self, container: Value, key: str) -> set[Value]:
        """The elements of a container (at constant ``key`` when given) or a generator's yields."""
        if container[0] == "gen":
            return set(self.slot("y", container[1], container[2]))
        if container[0] != "cont":
            return set()
        owner, cid = container[1], container[2]
        keys = self.container_keys(owner, cid)
        if key and key in keys:
            return self.slot("e", owner, cid, key) | self.slot("e", owner, cid, "?")
        out: set[Value] = set()
        for k in keys:
            out |= self.slot("e", owner, cid, k)
        return out

    # -- the work list -------------------------------------------------------------------
    def settle(self, apply: ApplyFact) -> None:
        """Apply facts from the work list with ``apply`` until no slot grows (or the step
        budget ends); each fact is queued again when a slot it read grows."""
        budget = MAX_ROUNDS * max(1, len(self.queue))
        while self.queue and budget:
            budget -= 1
            fact = self.queue.popleft()
            self.queued.discard(fact)
            module, number = fact
            kind, text, operands = self.modules[module].facts[number]
            self.reading.append(set())
            apply(module, kind, text, operands)
            for slot in self.reading.pop():
                self.readers[slot].add(fact)
        if self.queue:
            log.debug("call graph: step budget spent before a fixed point; edges may be missing")

    def recall(self, module: str, number: int) -> frozenset[Value] | None:
        """The values of expression ``number`` of ``module`` if no slot changed since they
        were computed (the slots they read count as read again), else None."""
        found = self.memo.get((module, number))
        if found is not None and found[0] == self.epoch:
            if self.reading:
                self.reading[-1].update(found[2])
            return found[1]
        return None

    def start_reads(self) -> int:
        """Start recording the slots an expression being computed reads; the epoch now."""
        self.reading.append(set())
        return self.epoch

    def remember(self, module: str, number: int, epoch: int, values: Iterable[Value]) -> frozenset[Value]:
        """End the reads :meth:`start_reads` began (they count for the reader outside too)
        and keep ``values`` for expression ``number`` of ``module`` as of ``epoch``."""
        computed = frozenset(values)
        reads = frozenset(self.reading.pop())
        if self.reading:
            self.reading[-1].update(reads)
        self.memo[(module, number)] = (epoch, computed, reads)
        return computed
