"""The call graph: flow facts of a project's modules -> who calls what.

Contract: :func:`build_call_graph` solves the flow facts of :mod:`flydeps.static.callgraph`
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

The solver is a work list: a fact is applied again only when a slot that it read grows.
It is bounded (:data:`MAX_VALUES` per slot, :data:`MAX_ROUNDS` applications per fact on
average), so library-sized class hierarchies end in seconds, possibly missing calls.
"""

from __future__ import annotations

import ast
import logging
from collections import defaultdict, deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from .callgraph import MODULE, FlowFacts
from .summary import ImportBinding
from .symbols import Index, Target

__all__ = ["CallGraph", "Callee", "build_call_graph", "pycg_callee", "pycg_code"]

log = logging.getLogger("flydeps.static")

#: A callee: ``("code", module, scope)`` (a function, method or lambda of the project) or
#: ``("external", dotted)`` (library code, ``builtins.len``); what an instance attribute
#: holds may also be ``("instance", module, class)`` or ``("class", module, class)``.
Callee = tuple[str, ...]
Value = tuple  # see ``_Solver``: ("fn", m, q), ("cls", m, q), ("inst", m, q), ...

# Work-list budget: how many times, on average, each fact may be applied before the
# solver gives up (small programs settle in two or three).
MAX_ROUNDS = 200
# Values one slot keeps. A ``self`` reached through hundreds of subclasses would otherwise
# make every attribute read a product of classes x methods (measured: FlyDSL's 134,000
# lines grew past 20 GB); beyond this a slot stops growing and its readers may miss calls.
MAX_VALUES = 64
# Builtins that call a protocol method of their first argument.
_PROTOCOL = {"builtins.iter": "__iter__", "builtins.next": "__next__", "builtins.len": "__len__"}
_CONTAINER_METHODS = frozenset(
    {"append", "add", "insert", "extend", "update", "setdefault", "get", "pop", "copy", "values"}
)


@dataclass(frozen=True)
class CallGraph:
    """Who calls what, per code of the analysed modules.

    ``codes`` are ``(module, scope, kind)`` for every code (``scope`` '' and kind
    ``module`` for a module's import-time code); ``calls`` maps ``(module, scope)`` to its
    callees; ``attributes`` maps ``(module, class, name)`` to the code, instances and
    classes that ``self.name`` may hold in a method of the class (assigned through an
    instance of it, of a base or of a subclass: ``self.act = self.relu``, ``self.helper =
    Helper()``)."""

    codes: tuple[tuple[str, str, str], ...]
    calls: Mapping[tuple[str, str], frozenset[Callee]]
    attributes: Mapping[tuple[str, str, str], frozenset[Callee]]

    def pycg(self) -> dict[str, list[str]]:
        """PyCG's interchange format: ``{"caller": ["callee", ...]}``, sorted."""
        out: dict[str, set[str]] = {pycg_code(m, s): set() for m, s, _ in self.codes}
        for (module, scope), callees in self.calls.items():
            out.setdefault(pycg_code(module, scope), set()).update(pycg_callee(c) for c in callees)
        return {k: sorted(v) for k, v in sorted(out.items())}


def pycg_code(module: str, scope: str) -> str:
    """``pkg.mod`` for module code, ``pkg.mod.outer.inner`` for a nested function."""
    if not scope:
        return module
    qual = scope.replace(".<locals>.", ".")
    return f"{module}." + ".".join(part.partition("#")[0] for part in qual.split("."))


def pycg_callee(callee: Callee) -> str:
    """The PyCG name of a callee (``instance of pkg.mod.Cls`` for an attribute's instance)."""
    if callee[0] in ("code", "class"):
        return pycg_code(callee[1], callee[2])
    if callee[0] == "instance":
        return "instance of " + pycg_code(callee[1], callee[2])
    dotted = callee[1]
    return "<builtin>." + dotted[len("builtins.") :] if dotted.startswith("builtins.") else dotted


FactsSource = Callable[[str], "FlowFacts | None"]


def build_call_graph(index: Index, modules: Sequence[str], facts_of: FactsSource) -> CallGraph:
    """The call graph of ``modules`` and of every project module their values reach."""
    solver = _Solver(index, facts_of)
    for name in modules:
        solver.need(name)
    solver.solve()
    return solver.result()


class _Signature:
    __slots__ = ("flags", "positional", "names", "vararg", "kwarg")

    def __init__(self, flags: str, params: str) -> None:
        self.flags = frozenset(flags.split(",")) - {""}
        parts = [p.split(":", 1) for p in params.split(",") if p]
        self.positional = [n for k, n in parts if k == "p"]
        self.names = {n for k, n in parts if k in ("p", "k")}
        self.vararg = next((n for k, n in parts if k == "*"), "")
        self.kwarg = next((n for k, n in parts if k == "**"), "")


class _Solver:
    """Slots, values and the fixed point.

    Values are tuples: ``("fn", m, q)`` a function or lambda, ``("cls", m, q)`` a class,
    ``("inst", m, q)`` an instance, ``("meth", m, q, self)`` a bound method, ``("mod", m)``
    a project module, ``("ext", dotted)`` library code, ``("cont", m, id)`` a container,
    ``("cmeth", m, id, name)`` a container's method, ``("gen", m, q)`` a generator,
    ``("super", m, class, self)`` a ``super()`` object."""

    def __init__(self, index: Index, facts_of: FactsSource) -> None:
        self.index, self.facts_of = index, facts_of
        self.modules: dict[str, FlowFacts] = {}
        self.missing: set[str] = set()
        self.slots: defaultdict[tuple, set[Value]] = defaultdict(set)
        self.keys: defaultdict[tuple[str, str], set[str]] = defaultdict(set)
        self.sigs: dict[tuple[str, str], _Signature] = {}
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

    # -- modules and slots ---------------------------------------------------------------
    def need(self, name: str) -> None:
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
            if kind == "sig":
                qual, flags, params = text.split("\0")
                sig = self.sigs[(name, qual)] = _Signature(flags, params)
                if sig.vararg:
                    self.add(("v", name, qual, sig.vararg), {("cont", name, "*" + qual)})
                if sig.kwarg:
                    self.add(("v", name, qual, sig.kwarg), {("cont", name, "**" + qual)})
                if "method" in sig.flags and sig.positional and "staticmethod" not in sig.flags:
                    owner = qual.rpartition(".")[0]
                    kind = "cls" if "classmethod" in sig.flags else "inst"
                    self.seeds.append((("v", name, qual, sig.positional[0]), (kind, name, owner)))

    def add(self, slot: tuple, values: Iterable[Value]) -> None:
        held = self.slots[slot]
        before = len(held)
        if before >= MAX_VALUES:  # saturated: library-sized hierarchies would grow without end
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
        if self.reading:
            self.reading[-1].add(key)
        found = self.slots.get(key)
        return found if found is not None else set()

    def container_keys(self, owner: str, cid: str) -> set[str]:
        if self.reading:
            self.reading[-1].add(("keys", owner, cid))
        found = self.keys.get((owner, cid))
        return found if found is not None else set()

    # -- the fixed point -----------------------------------------------------------------
    def solve(self) -> None:
        """Settle the flow; then give ``self`` (``cls``) of every method that no call
        reached an instance of its class or of any analysed subclass (as PyCG gives all
        methods their own class: the calls of a class nothing instantiates still resolve)
        and settle again. Seeding only those keeps a base method run by subclass instances
        dispatching on the subclasses alone."""
        self.settle()
        while True:
            empty = [(slot, value) for slot, value in self.seeds if not self.slots.get(slot)]
            if not empty:
                return
            subclasses = self.subclasses()
            for slot, (kind, module, qual) in empty:  # the class or any analysed subclass
                self.add(slot, {(kind, m, q) for m, q in [(module, qual), *subclasses.get((module, qual), ())]})
            self.settle()

    def subclasses(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """Every analysed class under each class of its MRO."""
        out: defaultdict[tuple[str, str], list[tuple[str, str]]] = defaultdict(list)
        for module, facts in list(self.modules.items()):
            for qual, kind, _ in facts.scopes:
                if kind == "class":
                    for base in self.index.mro(Target("class", module=module, qualname=qual))[1:]:
                        if base.kind == "class":
                            out[(base.module, base.qualname)].append((module, qual))
        return out

    def settle(self) -> None:
        """Apply facts from the work list until no slot grows (or the step budget ends)."""
        budget = MAX_ROUNDS * max(1, len(self.queue))
        while self.queue and budget:
            budget -= 1
            fact = self.queue.popleft()
            self.queued.discard(fact)
            module, number = fact
            kind, text, operands = self.modules[module].facts[number]
            self.reading.append(set())
            getattr(self, "_f_" + kind)(module, text, operands)
            for slot in self.reading.pop():
                self.readers[slot].add(fact)
        if self.queue:
            log.debug("call graph: step budget spent before a fixed point; edges may be missing")

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
        return CallGraph(tuple(codes), MappingProxyType(calls), MappingProxyType(attributes))

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

    # -- calls -----------------------------------------------------------------------
    def invoke(
        self, caller: tuple[str, str], value: Value, module: str, kinds: list[str], args: tuple[int, ...]
    ) -> None:
        """A call of ``value`` from ``caller`` with arguments ``args`` (expressions of ``module``)."""
        kind = value[0]
        if kind in ("fn", "meth"):
            self.calls[caller].add(("code", value[1], value[2]))
            self.bind(value, module, kinds, args)
        elif kind == "cls":
            instance = ("inst", value[1], value[2])
            for init in self.member((value[1], value[2]), "__init__", instance, caller):
                if init[0] in ("fn", "meth"):
                    self.invoke(caller, init, module, kinds, args)
        elif kind == "inst":
            for call in self.member((value[1], value[2]), "__call__", value, caller):
                if call[0] in ("fn", "meth"):
                    self.invoke(caller, call, module, kinds, args)
        elif kind == "ext":
            self.calls[caller].add(("external", value[1]))
            protocol = _PROTOCOL.get(value[1])
            if protocol and args and args[0] >= 0:  # ``next(it)`` runs ``it.__next__()``
                for base in self.eval(module, args[0]):
                    for bound in self.method_of(base, protocol, caller):
                        self.invoke(caller, bound, module, [], ())
        elif kind == "cmeth":
            self.container_call(value, module, kinds, args)

    def bind(self, value: Value, module: str, kinds: list[str], args: tuple[int, ...]) -> None:
        """Arguments -> parameters of the function or bound method ``value``."""
        target, qual = value[1], value[2]
        sig = self.sigs.get((target, qual))
        if sig is None:
            return
        positional = sig.positional
        if value[0] == "meth" and positional and "staticmethod" not in sig.flags:
            self.add(("v", target, qual, positional[0]), {value[3]})
            positional = positional[1:]
        i = 0
        for kind, arg in zip(kinds, args, strict=False):
            values = self.eval(module, arg) if arg >= 0 else frozenset()
            if kind == "p":
                if i < len(positional):
                    self.add(("v", target, qual, positional[i]), values)
                elif sig.vararg:
                    self.add(("e", target, "*" + qual, "?"), values)
                i += 1
            elif kind == "*":
                items = {e for c in values for e in self.elements(c, "")}
                for name in positional[i:]:
                    self.add(("v", target, qual, name), items)
                if sig.vararg:
                    self.add(("e", target, "*" + qual, "?"), items)
            elif kind.startswith("k:"):
                name = kind[2:]
                if name in sig.names:
                    self.add(("v", target, qual, name), values)
                elif sig.kwarg:
                    self.add(("e", target, "**" + qual, repr(name)), values)
            elif kind == "**":
                self.bind_mapping(target, qual, sig, values)

    def bind_mapping(self, target: str, qual: str, sig: _Signature, values: Iterable[Value]) -> None:
        for container in values:
            if container[0] != "cont":
                continue
            for key in list(self.container_keys(container[1], container[2])):
                name = _key_name(key)
                items = self.slot("e", container[1], container[2], key)
                if name in sig.names:
                    self.add(("v", target, qual, name), items)
                elif sig.kwarg:
                    self.add(("e", target, "**" + qual, key), items)

    def container_call(self, value: Value, module: str, kinds: list[str], args: tuple[int, ...]) -> None:
        _, owner, cid, name = value
        given = [self.eval(module, a) if a >= 0 else frozenset() for a in args]
        if name in ("append", "add") and given:
            self.add(("e", owner, cid, "?"), given[-1])
        elif name == "insert" and len(given) > 1:
            self.add(("e", owner, cid, "?"), given[1])
        elif name in ("extend", "update") and given:
            self.add(("e", owner, cid, "?"), {e for c in given[0] for e in self.elements(c, "")})
        elif name == "setdefault" and len(given) > 1:
            self.add(("e", owner, cid, "?"), given[1])

    def result_of(self, value: Value, module: str, kinds: list[str], args: tuple[int, ...]) -> set[Value]:
        """What calling ``value`` returns."""
        kind = value[0]
        if kind in ("fn", "meth"):
            sig = self.sigs.get((value[1], value[2]))
            if sig is not None and "gen" in sig.flags:
                return {("gen", value[1], value[2])}
            return set(self.slot("r", value[1], value[2]))
        if kind == "cls":
            return {("inst", value[1], value[2])}
        if kind == "inst":
            out: set[Value] = set()
            for call in self.member((value[1], value[2]), "__call__", value, None):
                out |= self.result_of(call, module, kinds, args)
            return out
        if kind == "ext" and value[1] == "functools.partial" and args and args[0] >= 0:
            return set(self.eval(module, args[0]))
        if kind == "ext" and value[1] in ("builtins.iter", "builtins.next") and args and args[0] >= 0:
            out = set()
            for base in self.eval(module, args[0]):
                if value[1] == "builtins.iter":
                    out |= {base} if base[0] in ("cont", "gen") else set()
                    for bound in self.method_of(base, "__iter__", None):
                        out |= self.result_of(bound, module, [], ())
                else:
                    out |= self.elements(base, "")
                    for bound in self.method_of(base, "__next__", None):
                        out |= self.result_of(bound, module, [], ())
            return out
        if kind == "cmeth":
            if value[3] in ("copy", "values"):
                return {("cont", value[1], value[2])}
            if value[3] in ("get", "pop", "setdefault"):
                key = self.modules[module].exprs[args[0]][1] if args and args[0] >= 0 else ""
                return self.elements(("cont", value[1], value[2]), key)
        return set()

    # -- attributes --------------------------------------------------------------------
    def member(
        self,
        cls: tuple[str, str],
        name: str,
        self_value: Value | None,
        caller: tuple[str, str] | None,
        after: str | None = None,
    ) -> set[Value]:
        """``name`` looked up on class ``cls`` (through ``self_value`` when not None)."""
        mro = self.index.mro(Target("class", module=cls[0], qualname=cls[1]))
        if after is not None:
            keys = [(t.module, t.qualname) for t in mro]
            mro = mro[keys.index((cls[0], after)) + 1 :] if (cls[0], after) in keys else ()
        out: set[Value] = set()
        for klass in mro:
            if klass.kind == "class":
                self.need(klass.module)
                if self_value is not None and self_value[0] == "inst":
                    out |= self.slot("iattr", klass.module, klass.qualname, name)
                loaded = self.index.module(klass.module)
                held = self.slot("v", klass.module, "c:" + klass.qualname, name)
                if held or (loaded is not None and name in loaded.class_body(klass.qualname)):
                    through = ("cls", cls[0], cls[1])
                    for value in held:
                        out |= self.bound(value, self_value, through, caller)
                    return out
            elif klass.kind in ("external", "builtin") and klass.dotted != "builtins.object":
                out.add(("ext", f"{klass.dotted}.{name}"))
                return out
        return out

    def bound(
        self, value: Value, self_value: Value | None, through: Value, caller: tuple[str, str] | None
    ) -> set[Value]:
        """A class attribute read through an instance (bound) or the class."""
        if value[0] != "fn":
            return {value}
        sig = self.sigs.get((value[1], value[2]))
        flags = sig.flags if sig is not None else frozenset()
        if "staticmethod" in flags:
            return {value}
        if "classmethod" in flags:
            owner = ("cls", self_value[1], self_value[2]) if self_value and self_value[0] == "inst" else through
            return {("meth", value[1], value[2], owner)}
        if self_value is None:
            return {value}
        method = ("meth", value[1], value[2], self_value)
        if "property" in flags and caller is not None:
            self.calls[caller].add(("code", value[1], value[2]))
            self.bind(method, caller[0], [], ())
            return self.result_of(method, caller[0], [], ())
        return {method}

    def method_of(self, base: Value, name: str, caller: tuple[str, str] | None) -> set[Value]:
        if base[0] == "inst":
            return self.member((base[1], base[2]), name, base, caller)
        return set()

    def attribute(self, base: Value, name: str, caller: tuple[str, str]) -> set[Value]:
        kind = base[0]
        if kind == "mod":
            return self.module_attribute(base[1], name)
        if kind == "ext":
            return {("ext", f"{base[1]}.{name}")}
        if kind == "cls":
            return self.member((base[1], base[2]), name, None, caller)
        if kind == "inst":
            return self.member((base[1], base[2]), name, base, caller)
        if kind == "super":
            self_value = base[3]
            cls = (self_value[1], self_value[2])
            owner = self_value if self_value[0] == "inst" else None
            if cls[0] != base[1]:  # the instance's class lives elsewhere: find the defining class on its MRO
                return self.member_after(cls, (base[1], base[2]), name, owner, caller)
            return self.member(cls, name, owner, caller, after=base[2])
        if kind == "cont" and name in _CONTAINER_METHODS:
            return {("cmeth", base[1], base[2], name)}
        return set()

    def member_after(
        self, cls: tuple[str, str], defining: tuple[str, str], name: str, owner: Value | None, caller: tuple[str, str]
    ) -> set[Value]:
        mro = self.index.mro(Target("class", module=cls[0], qualname=cls[1]))
        keys = [(t.module, t.qualname) for t in mro]
        if defining not in keys:
            return set()
        for klass in mro[keys.index(defining) + 1 :]:
            if klass.kind == "class":
                found = self.member((klass.module, klass.qualname), name, owner, caller)
                if found:
                    return found
            elif klass.kind in ("external", "builtin") and klass.dotted != "builtins.object":
                return {("ext", f"{klass.dotted}.{name}")}
        return set()

    # -- names -------------------------------------------------------------------------
    def global_values(self, module: str, name: str) -> set[Value]:
        loaded = self.index.module(module)
        binding = loaded.scope.get(name) if loaded is not None else None
        out = set(self.slot("v", module, MODULE, name))
        if binding is None or isinstance(binding, ImportBinding):
            target = self.index.global_name(module, name)
            out |= self.target_values(target) | _missing_import(binding, target)
        return out

    def module_attribute(self, module: str, name: str) -> set[Value]:
        self.need(module)
        found = self.index.attr(Target("module", module=module), name)
        out = set(self.slot("v", module, MODULE, name))
        if found is not None:
            out |= self.target_values(found)
        return out

    def target_values(self, target: Target) -> set[Value]:
        if target.fallback is not None:  # ``try: from lib import f`` / ``except ImportError: def f``
            fallback = self.index.fallback_target(*target.fallback)
            if fallback is not None:
                return self._target_values(target) | self._target_values(fallback)
        return self._target_values(target)

    def _target_values(self, target: Target) -> set[Value]:
        kind = target.kind
        if kind in ("def", "class", "value"):
            self.need(target.module)
            if "." not in target.qualname:
                held = self.slot("v", target.module, MODULE, target.qualname)
                if held or kind == "value":
                    return set(held)
            if kind == "value":
                return set()
            return {("fn" if kind == "def" else "cls", target.module, target.qualname)}
        if kind == "module":
            self.need(target.module)
            return {("mod", target.module)}
        if kind in ("external", "builtin"):
            return {("ext", target.dotted)}
        return set()

    # -- expressions -------------------------------------------------------------------
    def eval(self, module: str, number: int) -> frozenset[Value]:
        key = (module, number)
        found = self.memo.get(key)
        if found is not None and found[0] == self.epoch:
            if self.reading:
                self.reading[-1].update(found[2])
            return found[1]
        op, text, operands = self.modules[module].exprs[number]
        self.reading.append(set())
        epoch = self.epoch
        values = frozenset(getattr(self, "_e_" + op)(module, number, text, operands))
        reads = frozenset(self.reading.pop())
        if self.reading:
            self.reading[-1].update(reads)
        self.memo[key] = (epoch, values, reads)
        return values

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

    def elements(self, container: Value, key: str) -> set[Value]:
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
        return self.target_values(target) | _missing_import(binding, target)


def _key_name(key: str) -> str:
    try:
        value = ast.literal_eval(key)
    except (ValueError, SyntaxError):
        return ""
    return value if isinstance(value, str) else ""


def _missing_import(binding: object, target: Target) -> set[Value]:
    """A module neither in the project nor installed is still library code by its import
    path (``import mk; mk.run()`` calls ``mk.run``): the dependency graph reports it."""
    if not isinstance(binding, ImportBinding) or binding.level or target.kind != "unresolved":
        return set()
    dotted = f"{binding.module}.{binding.name}" if binding.name else binding.bound_module
    return {("ext", dotted)}
