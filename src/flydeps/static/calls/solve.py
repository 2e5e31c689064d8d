"""The call graph: flow facts of a project's modules -> who calls what.

Contract: :func:`build_call_graph` solves the flow facts (:mod:`flydeps.static.calls.facts`)
over the requested modules, and over every project module a value reaches (loaded on
demand through the :class:`~flydeps.static.symbols.Index`), to a fixed point. It is
flow-insensitive, in the style of PyCG's assignment graph:

* parameters receive the arguments of every call site (positional, keyword, defaults,
  literal ``*args``; the rest of a call's positional and keyword arguments go to the
  ``*args``/``**kwargs`` containers), call results receive return values;
* an attribute assigned anywhere through an instance (``self.x = ...``) is read back
  through any instance of that class or of a subclass, class attributes along the C3
  MRO (:meth:`Index.mro`), ``super()`` from the class after the defining one;
* container literals keep their elements by constant key (``table["relu"]``, ``ops[0]``);
* implicit calls are calls too: a class called runs its ``__init__``, an instance called
  its ``__call__``, a decorator is called with the function it decorates, ``with`` calls
  ``__enter__``/``__exit__``, iteration ``__iter__``/``__next__``, a property read its getter.

Library code is a leaf (``external`` callee named by the import path, builtins
``builtins.len``); what no fact explains (computed ``getattr``, ``eval``) has no edge. The
result is read-only; it never changes the dependency graph nor any digest.

The solver composes two parts: a :class:`~flydeps.static.calls.state.FlowState` (the
abstract store and the work list) and a :class:`~flydeps.static.calls.semantics.CallSemantics`
over it (how each fact changes the store). This module drives the work list to a fixed
point, seeds the ``self`` of methods no call reached, and turns the settled store into the
:class:`~flydeps.static.calls.result.CallGraph`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from types import MappingProxyType

from ..symbols import Index, Target
from .result import Callee, CallGraph, slot_name
from .semantics import CallSemantics
from .state import FactsSource, FlowState, Value

__all__ = ["build_call_graph"]


def build_call_graph(index: Index, modules: Sequence[str], facts_of: FactsSource) -> CallGraph:
    """The call graph of ``modules`` and of every project module their values reach."""
    solver = _Solver(index, facts_of)
    for name in modules:
        solver.state.need(name)
    solver.solve()
    return solver.result()


class _Solver:
    """A flow state, the semantics over it, the fixed point and the result."""

    def __init__(self, index: Index, facts_of: FactsSource) -> None:
        self.index = index
        self.state = FlowState(facts_of)
        self.semantics = CallSemantics(index, self.state)

    def solve(self) -> None:
        """Settle the flow; then give ``self`` (``cls``) of every method that no call
        reached an instance of its class or of any analysed subclass (as PyCG gives all
        methods their own class: the calls of a class nothing instantiates still resolve)
        and settle again. Seeding only those keeps a base method run by subclass instances
        dispatching on the subclasses alone."""
        state = self.state
        state.settle(self.semantics.apply)
        while True:
            empty = [(slot, value) for slot, value in state.seeds if not state.slots.get(slot)]
            if not empty:
                return
            subclasses = self.subclasses()
            for slot, (kind, module, qual) in empty:  # the class or any analysed subclass
                state.add(slot, {(kind, m, q) for m, q in [(module, qual), *subclasses.get((module, qual), ())]})
            state.settle(self.semantics.apply)

    def subclasses(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """Every analysed class under each class of its MRO."""
        out: defaultdict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        for module, facts in list(self.state.modules.items()):
            for qual, kind, _ in facts.scopes:
                if kind == "class":
                    for base in self.index.mro(Target("class", module=module, qualname=qual))[1:]:
                        if base.kind == "class":
                            out[(base.module, base.qualname)].append((module, qual))
        return out

    def result(self) -> CallGraph:
        state = self.state
        codes = [(m, s, k) for m, facts in state.modules.items() for s, k, _ in facts.scopes if k != "class"]
        assigned: defaultdict[tuple[str, str], dict[str, set[Value]]] = defaultdict(dict)
        for slot, values in state.slots.items():
            if slot[0] == "iattr":
                assigned[(slot[1], slot[2])][slot[3]] = values
        attributes: dict[tuple[str, str, str], frozenset[Callee]] = {}
        subclasses = self.subclasses()
        classes = [(m, s) for m, facts in state.modules.items() for s, k, _ in facts.scopes if k == "class"]
        for module, qual in classes:
            # ``self`` in a method of the class is an instance of it or of a subclass: what
            # ``self.x`` holds was assigned in any of their classes (bases included).
            for sub in [(module, qual), *subclasses.get((module, qual), ())]:
                for klass in self.index.mro(Target("class", module=sub[0], qualname=sub[1])):
                    for name, values in assigned.get((klass.module, klass.qualname), {}).items():
                        callees = frozenset(c for v in values for c in _callees_of(v))
                        if callees:
                            key = (module, qual, name)
                            attributes[key] = attributes.get(key, frozenset()) | callees
        calls = {k: frozenset(v) for k, v in state.calls.items()}
        saturated = tuple(sorted({slot_name(slot) for slot in state.saturated}))
        return CallGraph(tuple(codes), MappingProxyType(calls), MappingProxyType(attributes), saturated)


def _callees_of(value: Value) -> Iterable[Callee]:
    if value[0] in ("fn", "meth"):
        yield ("code", value[1], value[2])
    elif value[0] == "ext":
        yield ("external", value[1])
    elif value[0] in ("inst", "cls"):
        yield ("instance" if value[0] == "inst" else "class", value[1], value[2])
