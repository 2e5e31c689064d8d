"""The call-graph solver's semantics: how each fact changes the state, what each expression holds.

Contract: :class:`CallSemantics` holds the rules of the flow and no data of its own: given
the symbol tables (:class:`~flydeps.static.symbols.Index`) and the abstract store
(:class:`~flydeps.static.calls.state.FlowState`), :meth:`CallSemantics.apply` applies one
fact (:mod:`flydeps.static.calls.facts`) to the store and :meth:`CallSemantics.eval` gives
the values of one expression, reading slots only through the store (so that the work list
knows what each fact read). The rules: a call binds arguments to parameters (positional,
keyword, defaults, literal ``*args``; the rest to the ``*args``/``**kwargs`` containers)
and returns the callee's return values; a class called runs ``__init__``, an instance
called ``__call__``; attributes are looked up along the C3 MRO (:meth:`Index.mro`),
through instances (``self.x = ...`` anywhere) and ``super()``; module-level names go
through the symbol tables (:mod:`flydeps.static.symbols`). Library code is a leaf
(``("ext", dotted)``). A fact kind ``k`` is applied by ``_f_k``, an expression op ``o``
evaluated by ``_e_o``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from ..summary import ImportBinding
from ..symbols import Index, Target
from .facts import MODULE
from .state import FlowState, Signature, Value

__all__ = ["CallSemantics", "missing_import"]

# Builtins that call a protocol method of their first argument.
_PROTOCOL = {"builtins.iter": "__iter__", "builtins.next": "__next__", "builtins.len": "__len__"}
# Library functions that call a callable they are given, by position or keyword: the
# caller's scope calls it (``map(f, xs)``, ``sorted(xs, key=f)``), as a profiler sees it.
_CALLS_ARGUMENT: dict[str, int | str] = {
    "builtins.map": 0,
    "builtins.filter": 0,
    "functools.reduce": 0,
    "builtins.sorted": "key",
    "builtins.min": "key",
    "builtins.max": "key",
}
_CONTAINER_METHODS = frozenset(
    {"append", "add", "insert", "extend", "update", "setdefault", "get", "pop", "copy", "values"}
)


class CallSemantics:
    """The fact and expression kinds, calls, attribute lookups and names, over ``state``."""

    def __init__(self, index: Index, state: FlowState) -> None:
        self.index, self.state = index, state

    def apply(self, module: str, kind: str, text: str, operands: tuple[int, ...]) -> None:
        """Apply one fact of ``module`` to the state (an :data:`~flydeps.static.calls.state.ApplyFact`)."""
        getattr(self, "_f_" + kind)(module, text, operands)

    def eval(self, module: str, number: int) -> frozenset[Value]:
        """The values of expression ``number`` of ``module`` (computed again only when a
        slot changed since; the slots read count for the fact or expression at work)."""
        state = self.state
        found = state.recall(module, number)
        if found is not None:
            return found
        op, text, operands = state.modules[module].exprs[number]
        epoch = state.start_reads()
        return state.remember(module, number, epoch, getattr(self, "_e_" + op)(module, number, text, operands))

    # -- facts -----------------------------------------------------------------------
    def _f_assign(self, module: str, text: str, operands: tuple[int, ...]) -> None:
        values = self.eval(module, operands[0])
        if values:
            kind, *rest = text.split("\0")
            self.state.add((kind, module, *rest), values)

    def _f_use(self, module: str, text: str, operands: tuple[int, ...]) -> None:
        self.eval(module, operands[0])

    def _f_setattr(self, module: str, attr: str, operands: tuple[int, ...]) -> None:
        values = self.eval(module, operands[1])
        if not values:
            return
        for base in self.eval(module, operands[0]):
            if base[0] == "inst":
                self.state.add(("iattr", base[1], base[2], attr), values)
            elif base[0] == "cls":
                self.state.add(("v", base[1], "c:" + base[2], attr), values)
            elif base[0] == "mod":
                self.state.add(("v", base[1], MODULE, attr), values)

    def _f_setitem(self, module: str, key: str, operands: tuple[int, ...]) -> None:
        values = self.eval(module, operands[1])
        if values:
            for base in self.eval(module, operands[0]):
                if base[0] == "cont":
                    self.state.add(("e", base[1], base[2], key or "?"), values)

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
        return self.state.slot("v", module, scope, name)

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
            out |= self.state.elements(base, text)
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
                out |= self.state.elements(base, "")
            for it in self.method_of(base, "__iter__", None):
                for produced in self.result_of(it, module, [], ()):
                    if produced[0] == "gen":
                        out |= self.state.elements(produced, "")
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
                out |= {("inst", v[1], v[2]) for v in self.state.elements(value, "") if v[0] == "cls"}
        return out

    def _e_imp(self, module: str, number: int, text: str, operands: tuple[int, ...]) -> set[Value]:
        level, source, name, bound = text.split("\0")
        loaded = self.index.module(module)
        if loaded is None:
            return set()
        binding = ImportBinding(0, source, name, int(level), bound)
        target = self.index.import_target(loaded, binding)
        return self.target_values(target) | missing_import(binding, target)

    # -- calls -----------------------------------------------------------------------
    def invoke(
        self, caller: tuple[str, str], value: Value, module: str, kinds: list[str], args: tuple[int, ...]
    ) -> None:
        """A call of ``value`` from ``caller`` with arguments ``args`` (expressions of ``module``)."""
        kind = value[0]
        if kind in ("fn", "meth"):
            self.state.calls[caller].add(("code", value[1], value[2]))
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
            self.state.calls[caller].add(("external", value[1]))
            protocol = _PROTOCOL.get(value[1])
            if protocol and args and args[0] >= 0:  # ``next(it)`` runs ``it.__next__()``
                for base in self.eval(module, args[0]):
                    for bound in self.method_of(base, protocol, caller):
                        self.invoke(caller, bound, module, [], ())
            self.call_argument(caller, value[1], module, kinds, args)
        elif kind == "cmeth":
            self.container_call(value, module, kinds, args)

    def call_argument(
        self, caller: tuple[str, str], dotted: str, module: str, kinds: list[str], args: tuple[int, ...]
    ) -> None:
        """``map(f, xs)``, ``sorted(xs, key=f)``: the library calls ``f`` for ``caller``."""
        where = _CALLS_ARGUMENT.get(dotted)
        if where is None:
            return
        if isinstance(where, int):
            positional = [a for k, a in zip(kinds, args, strict=False) if k == "p"]
            arg = positional[where] if len(positional) > where else -1
        else:
            arg = next((a for k, a in zip(kinds, args, strict=False) if k == f"k:{where}"), -1)
        if arg >= 0:
            for callee in self.eval(module, arg):
                if callee[0] != "ext":  # a library callable's own calls are not named
                    self.invoke(caller, callee, module, [], ())

    def bind(self, value: Value, module: str, kinds: list[str], args: tuple[int, ...]) -> None:
        """Arguments -> parameters of the function or bound method ``value``."""
        target, qual = value[1], value[2]
        sig = self.state.sigs.get((target, qual))
        if sig is None:
            return
        positional = sig.positional
        if value[0] == "meth" and positional and "staticmethod" not in sig.flags:
            self.state.add(("v", target, qual, positional[0]), {value[3]})
            positional = positional[1:]
        i = 0
        for kind, arg in zip(kinds, args, strict=False):
            values = self.eval(module, arg) if arg >= 0 else frozenset()
            if kind == "p":
                if i < len(positional):
                    self.state.add(("v", target, qual, positional[i]), values)
                elif sig.vararg:
                    self.state.add(("e", target, "*" + qual, "?"), values)
                i += 1
            elif kind == "*":
                items = {e for c in values for e in self.state.elements(c, "")}
                for name in positional[i:]:
                    self.state.add(("v", target, qual, name), items)
                if sig.vararg:
                    self.state.add(("e", target, "*" + qual, "?"), items)
            elif kind.startswith("k:"):
                name = kind[2:]
                if name in sig.names:
                    self.state.add(("v", target, qual, name), values)
                elif sig.kwarg:
                    self.state.add(("e", target, "**" + qual, repr(name)), values)
            elif kind == "**":
                self.bind_mapping(target, qual, sig, values)

    def bind_mapping(self, target: str, qual: str, sig: Signature, values: Iterable[Value]) -> None:
        for container in values:
            if container[0] != "cont":
                continue
            for key in list(self.state.container_keys(container[1], container[2])):
                name = _key_name(key)
                items = self.state.slot("e", container[1], container[2], key)
                if name in sig.names:
                    self.state.add(("v", target, qual, name), items)
                elif sig.kwarg:
                    self.state.add(("e", target, "**" + qual, key), items)

    def container_call(self, value: Value, module: str, kinds: list[str], args: tuple[int, ...]) -> None:
        _, owner, cid, name = value
        given = [self.eval(module, a) if a >= 0 else frozenset() for a in args]
        if name in ("append", "add") and given:
            self.state.add(("e", owner, cid, "?"), given[-1])
        elif name == "insert" and len(given) > 1:
            self.state.add(("e", owner, cid, "?"), given[1])
        elif name in ("extend", "update") and given:
            self.state.add(("e", owner, cid, "?"), {e for c in given[0] for e in self.state.elements(c, "")})
        elif name == "setdefault" and len(given) > 1:
            self.state.add(("e", owner, cid, "?"), given[1])

    def result_of(self, value: Value, module: str, kinds: list[str], args: tuple[int, ...]) -> set[Value]:
        """What calling ``value`` returns."""
        kind = value[0]
        if kind in ("fn", "meth"):
            sig = self.state.sigs.get((value[1], value[2]))
            if sig is not None and "gen" in sig.flags:
                return {("gen", value[1], value[2])}
            return set(self.state.slot("r", value[1], value[2]))
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
                    out |= self.state.elements(base, "")
                    for bound in self.method_of(base, "__next__", None):
                        out |= self.result_of(bound, module, [], ())
            return out
        if kind == "cmeth":
            if value[3] in ("copy", "values"):
                return {("cont", value[1], value[2])}
            if value[3] in ("get", "pop", "setdefault"):
                key = self.state.modules[module].exprs[args[0]][1] if args and args[0] >= 0 else ""
                return self.state.elements(("cont", value[1], value[2]), key)
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
                self.state.need(klass.module)
                if self_value is not None and self_value[0] == "inst":
                    out |= self.state.slot("iattr", klass.module, klass.qualname, name)
                loaded = self.index.module(klass.module)
                held = self.state.slot("v", klass.module, "c:" + klass.qualname, name)
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
        sig = self.state.sigs.get((value[1], value[2]))
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
            self.state.calls[caller].add(("code", value[1], value[2]))
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
        out = set(self.state.slot("v", module, MODULE, name))
        if binding is None or isinstance(binding, ImportBinding):
            target = self.index.global_name(module, name)
            out |= self.target_values(target) | missing_import(binding, target)
        return out

    def module_attribute(self, module: str, name: str) -> set[Value]:
        self.state.need(module)
        found = self.index.attr(Target("module", module=module), name)
        out = set(self.state.slot("v", module, MODULE, name))
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
            self.state.need(target.module)
            if "." not in target.qualname:
                held = self.state.slot("v", target.module, MODULE, target.qualname)
                if held or kind == "value":
                    return set(held)
            if kind == "value":
                return set()
            return {("fn" if kind == "def" else "cls", target.module, target.qualname)}
        if kind == "module":
            self.state.need(target.module)
            return {("mod", target.module)}
        if kind in ("external", "builtin"):
            return {("ext", target.dotted)}
        return set()


def _key_name(key: str) -> str:
    try:
        value = ast.literal_eval(key)
    except (ValueError, SyntaxError):
        return ""
    return value if isinstance(value, str) else ""


def missing_import(binding: object, target: Target) -> set[Value]:
    """A module neither in the project nor installed is still library code by its import
    path (``import mk; mk.run()`` calls ``mk.run``): the dependency graph reports it."""
    if not isinstance(binding, ImportBinding) or binding.level or target.kind != "unresolved":
        return set()
    dotted = f"{binding.module}.{binding.name}" if binding.name else binding.bound_module
    return {("ext", dotted)}
