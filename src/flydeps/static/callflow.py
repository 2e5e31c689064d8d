"""The call graph: flow facts of a project's modules -> who calls what.

Contract: :func:`build_call_graph` solves the flow facts (:mod:`flydeps.static.callfacts`)
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

The solver is a work list over :class:`~flydeps.static.callstate.FlowState` (slots, the
fixed point and its bounds) with the rules of :mod:`flydeps.static.callsemantics` (calls,
attributes, names); this module applies each fact kind and evaluates each expression
kind, and turns the settled slots into the :class:`~flydeps.static.callresult.CallGraph`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from types import MappingProxyType

from .callfacts import MODULE
from .callresult import Callee, CallGraph, slot_name
from .callsemantics import CallSemantics, missing_import
from .callstate import FactsSource, Value
from .summary import ImportBinding
from .symbols import Index, Target

__all__ = ["build_call_graph"]


def build_call_graph(index: Index, modules: Sequence[str], facts_of: FactsSource) -> CallGraph:
    """The call graph of ``modules`` and of every project module their values reach."""
    solver = _Solver(index, facts_of)
    for name in modules:
        solver.need(name)
    solver.solve()
    return solver.result()


class _Solver(CallSemantics):
    """The fact and expression kinds over the solver's state, and the result."""

    def result(self) -> CallGraph:
        codes = [(m, s, k) for m, facts in self.modules.items() for s, k, _ in facts.scopes if k != "class"]
        assigned: defaultdict[tuple[str, str], dict[str, set[Value]]] = defaultdict(dict)
        for slot, values in self.slots.items():
            if slot[0] == "iattr":
                assigned[(slot[1], slot[2])][slot[3]] = values
        attributes: dict[tuple[str, str, str], frozenset[Callee]] = {}
        subclasses = self.subclasses()
        classes = [(m, s) for m, facts in self.modules.items() for s, k, _ in facts.scopes if k == "class"]
        for module, qual in classes:
            # ``self`` in a method of the class is an instance of it or of a subclass: what
            # ``self.x`` holds was assigned in any of their classes (bases included).
            for sub in [(module, qual), *subclasses.get((module, qual), ())]:
                for klass in self.index.mro(Target("class", module=sub[0], qualname=sub[1])):
                    for name, values in assigned.get((klass.module, klass.qualname), {}).items():
                        callees = frozenset(c for v in values for c in self.callees_of(v))
                        if callees:
                            key = (module, qual, name)
                            attributes[key] = attributes.get(key, frozenset()) | callees
        calls = {k: frozenset(v) for k, v in self.calls.items()}
        saturated = tuple(sorted({slot_name(slot) for slot in self.saturated}))
        return CallGraph(tuple(codes), MappingProxyType(calls), MappingProxyType(attributes), saturated)

    def callees_of(self, value: Value) -> Iterable[Callee]:
        if value[0] in ("fn", "meth"):
            yield ("code", value[1], value[2])
        elif value[0] == "ext":
            yield ("external", value[1])
        elif value[0] in ("inst", "cls"):
            yield ("instance" if value[0] == "inst" else "class", value[1], value[2])

    # -- facts -----------------------------------------------------------------------
    def _f_assign(self, module: str, text: str, operands: tuple[int, ...]) -> None:
        values = self.eval(module, operands[0])
        if values:
            kind, *rest = text.split("\0")
            self.add((kind, module, *rest), values)

    def _f_use(self, module: str, text: str, operands: tuple[int, ...]) -> None:
        self.eval(module, operands[0])

    def _f_setattr(self, module: str, attr: str, operands: tuple[int, ...]) -> None:
        values = self.eval(module, operands[1])
        if not values:
            return
        for base in self.eval(module, operands[0]):
            if base[0] == "inst":
                self.add(("iattr", base[1], base[2], attr), values)
            elif base[0] == "cls":
                self.add(("v", base[1], "c:" + base[2], attr), values)
            elif base[0] == "mod":
                self.add(("v", base[1], MODULE, attr), values)

    def _f_setitem(self, module: str, key: str, operands: tuple[int, ...]) -> None:
        values = self.eval(module, operands[1])
        if values:
            for base in self.eval(module, operands[0]):
                if base[0] == "cont":
                    self.add(("e", base[1], base[2], key or "?"), values)

    def _f_call(self, module: str, text: str, operands: tuple[int, ...]) -> None:
        caller, _, spec = text.partition("\0")
        kinds = spec.split(",") if spec else []
        for value in self.eval(module, operands[0]):
            self.invoke((module, caller), value, module, kinds, operands[1:])

    def _f_construct(self, module: str, caller: str, operands: tuple[int, ...]) -> None:
        for value in self.eval(module, operands[0]):
            if value[0] == "cls":
                self.invoke((module, caller), value, module, [], ())

    def _f_mcall(self, module: str, text: str, operands: tuple[int, ...]) -> None:
        caller, _, method = text.partition("\0")
        for base in self.eval(module, operands[0]):
            for bound in self.method_of(base, method, (module, caller)):
                self.invoke((module, caller), bound, module, [], ())
                if method in ("__iter__", "__aiter__"):
                    step = "__next__" if method == "__iter__" else "__anext__"
                    for it in self.result_of(bound, module, [], ()):
                        for nxt in self.method_of(it, step, (module, caller)):
                            self.invoke((module, caller), nxt, module, [], ())

    # -- expressions -------------------------------------------------------------------
    def _e_var(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        scope, _, name = text.partition("\0")
        return self.slot("v", module, scope, name)

    def _e_glob(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        return self.global_values(module, text)

    def _e_attr(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        name, _, caller = text.partition("\0")
        out: set[Value] = set()
        for base in self.eval(module, operands[0]):
            out |= self.attribute(base, name, (module, caller))
        return out

    def _e_call(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        kinds = text.split(",") if text else []
        out: set[Value] = set()
        for value in self.eval(module, operands[0]):
            out |= self.result_of(value, module, kinds, operands[1:])
        return out

    def _e_mcall(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        out: set[Value] = set()
        for base in self.eval(module, operands[0]):
            for bound in self.method_of(base, text, None):
                out |= self.result_of(bound, module, [], ())
        return out

    def _e_sub(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        out: set[Value] = set()
        for base in self.eval(module, operands[0]):
            out |= self.elements(base, text)
        return out

    def _e_cont(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        return {("cont", module, str(number))}

    def _e_fn(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        return {("fn", module, text)}

    def _e_cls(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        return {("cls", module, text)}

    def _e_super(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        if not operands:
            return set()
        return {("super", module, text, s) for s in self.eval(module, operands[0]) if s[0] in ("inst", "cls")}

    def _e_union(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        out: set[Value] = set()
        for operand in operands:
            out |= self.eval(module, operand)
        return out

    def _e_iter(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        out: set[Value] = set()
        for base in self.eval(module, operands[0]):
            if base[0] in ("cont", "gen"):
                out |= self.elements(base, "")
            for it in self.method_of(base, "__iter__", None):
                for produced in self.result_of(it, module, [], ()):
                    if produced[0] == "gen":
                        out |= self.elements(produced, "")
                    for step in self.method_of(produced, "__next__", None):
                        out |= self.result_of(step, module, [], ())
        return out

    def _e_deco(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        decorators = self.eval(module, operands[0])
        wrapped = self.eval(module, operands[1])
        out: set[Value] = set()
        for decorator in decorators:
            if decorator[0] in ("fn", "meth", "cls", "inst"):
                out |= self.result_of(decorator, module, ["p"], (operands[1],))
            else:  # a library decorator (functools.wraps, lru_cache): the function stays reachable
                out |= wrapped
        return out if decorators else set(wrapped)

    def _e_inst(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        out: set[Value] = set()
        for value in self.eval(module, operands[0]):
            if value[0] == "cls":
                out.add(("inst", value[1], value[2]))
            elif value[0] == "cont":
                out |= {("inst", v[1], v[2]) for v in self.elements(value, "") if v[0] == "cls"}
        return out

    def _e_imp(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        level, source, name, bound = text.split("\0")
        loaded = self.index.module(module)
        if loaded is None:
            return set()
        binding = ImportBinding(0, source, name, int(level), bound)
        target = self.index.import_target(loaded, binding)
        return self.target_values(target) | missing_import(binding, target)
