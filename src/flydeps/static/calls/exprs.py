"""Call-graph facts, the expression half of the walk: names, targets and expressions.

Contract: :class:`ExpressionWalker` numbers the expressions of one module and records the
facts they imply (:mod:`flydeps.static.calls.facts`), given the scope pre-pass
(:func:`flydeps.static.calls.scopes.scope_infos`); the statement walk
(:mod:`flydeps.static.calls.collect`) extends it. It never imports or runs anything.

Straight-line code keeps its order: inside one scope, an assignment outside any branch
starts a new *version* of the name that the reads after it see (``x = f; x = g; x()``
reads ``g``), one inside a branch or loop adds to the previous version, and the
flow-insensitive slot (every assignment) is what loops, other scopes and names rebound by
``global``/``nonlocal`` read. A local holding a constant is a constant subscript key.

Names are resolved to scopes here, with Python's rules (locals decided per function,
``global``/``nonlocal``, class bodies invisible to nested functions); module-level names
stay symbolic (``glob``) and are resolved later through the symbol tables, so the facts
depend on the file's bytes only.
"""

from __future__ import annotations

import ast
from collections import Counter

from .facts import Entry
from .scopes import Scope, ScopeInfo, decorator_flag, literal_key, signature_text

__all__ = ["ExpressionWalker"]


class ExpressionWalker:
    """Walks expressions (and assignment targets), numbering expressions and recording
    facts; :mod:`flydeps.static.calls.collect` adds the statements."""

    def __init__(self, infos: dict[int, ScopeInfo]) -> None:
        self.infos = infos
        self.exprs: list[Entry] = []
        self.facts: list[Entry] = []
        self.scopes: list[tuple[str, str, str]] = []
        self._counts: Counter[str] = Counter()
        self._memo: dict[Entry, int] = {}
        self.first_param: dict[str, str] = {}  # function -> its first positional parameter
        # Names some function rebinds with ``global``/``nonlocal``: never versioned.
        self.rebound = {n for info in infos.values() for n in (*info.globals, *info.nonlocals)}
        self._version = 0
        # Dict displays with constant keys only: container -> key -> the indices of the
        # facts that store its values (a later store at that key may replace them), the
        # display node -> its container, and the facts so replaced (left out of the result).
        self.dict_keys: dict[int, dict[str, list[int]]] = {}
        self.dict_nodes: dict[int, int] = {}
        self.dropped: set[int] = set()
        self.read_keys: dict[int, set[str]] = {}  # container -> keys read while it was fresh

    # -- recording ---------------------------------------------------------------------
    def expr_entry(self, op: str, text: str = "", operands: tuple[int, ...] = ()) -> int:
        entry = (op, text, operands)
        found = self._memo.get(entry)
        if found is None or op in ("cont", "call", "mcall", "attr"):
            found = len(self.exprs)
            self.exprs.append(entry)
            self._memo[entry] = found
        return found

    def fact(self, kind: str, text: str, operands: tuple[int, ...]) -> None:
        self.facts.append((kind, text, operands))

    def assign(self, slot: str, value: int | None) -> None:
        if value is not None:
            self.fact("assign", slot, (value,))

    def _unique(self, raw: str) -> str:
        self._counts[raw] += 1
        n = self._counts[raw]
        return raw if n == 1 else f"{raw}#{n}"

    # -- names -------------------------------------------------------------------------
    def versioned(self, name: str, scope: Scope) -> Scope | None:
        """``scope`` when its straight-line versions of ``name`` apply (a local of a
        function, a module global no function rebinds), else None (flow-insensitive)."""
        if scope.kind == "class" or name in self.rebound:
            return None
        if scope.kind == "module" or (name in scope.locals and name not in scope.globals):
            return scope
        return None

    def load(self, name: str, scope: Scope) -> int:
        owner = self.versioned(name, scope)
        if owner is not None and owner.loops == 0 and name in owner.versions:
            return self.expr_entry("var", f"{owner.key}\0{name}\1{owner.versions[name]}")
        return self.load_any(name, scope)

    def load_any(self, name: str, scope: Scope) -> int:
        """``name`` as any assignment of the scope may have bound it (flow-insensitive)."""
        if scope.kind == "class" and name in scope.locals and name not in scope.globals:
            return self.expr_entry("var", f"{scope.key}\0{name}")
        if name in scope.globals:
            return self.expr_entry("glob", name)
        current: Scope | None = scope if scope.kind != "class" else scope.parent
        while current is not None and current.kind != "module":
            if current.kind != "class" and name in current.locals and name not in current.nonlocals:
                if name in current.globals:
                    break
                return self.expr_entry("var", f"{current.key}\0{name}")
            current = current.parent
        return self.expr_entry("glob", name)

    def assign_name(
        self, name: str, value: int | None, scope: Scope, node: ast.expr | None = None, *, weak: bool = False
    ) -> None:
        """``name = value``: into the flow-insensitive slot (what other scopes and loops
        read) and, for straight-line reads in the scope itself, into a new version."""
        self.assign(self.store_slot(name, scope), value)
        owner = self.versioned(name, scope)
        if owner is None:
            return
        previous = owner.versions.get(name)
        self._version += 1
        owner.versions[name] = self._version
        slot = f"v\0{owner.key}\0{name}\1{self._version}"
        self.assign(slot, value)
        if weak or owner.depth:  # a branch may not run: the earlier value stays possible
            before = f"{owner.key}\0{name}\1{previous}"
            self.assign(slot, self.expr_entry("var", before) if previous else self.load_any(name, scope))
            owner.constants.pop(name, None)
        elif isinstance(node, ast.Constant) and literal_key(node):
            owner.constants[name] = literal_key(node)
        else:
            owner.constants.pop(name, None)

    def key_of(self, node: ast.expr, scope: Scope) -> str:
        """A subscript's constant key: a literal, or a local that holds one (``key = "gelu"``)."""
        if isinstance(node, ast.Name):
            owner = self.versioned(node.id, scope)
            return owner.constants.get(node.id, "") if owner is not None and not owner.loops else ""
        return literal_key(node)

    def store_slot(self, name: str, scope: Scope) -> str:
        if name in scope.globals or scope.kind == "module":
            return f"v\0\0{name}"
        if name in scope.nonlocals:
            current = scope.parent
            while current is not None and current.kind != "module":
                if current.kind != "class" and name in current.locals and name not in current.nonlocals:
                    return f"v\0{current.key}\0{name}"
                current = current.parent
        return f"v\0{scope.key}\0{name}"

    def function(self, args: ast.arguments, qual: str, scope: Scope, inner: Scope) -> int:
        """The function object's expression; its defaults flow into its parameters."""
        positional = [*args.posonlyargs, *args.args]
        pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
        for param, default in pairs:
            self.assign(f"v\0{qual}\0{param.arg}", self.expr(default, scope))
        return self.expr_entry("fn", qual)

    def decorate(self, decorators: list[ast.expr], value: int, scope: Scope) -> int:
        for decorator in reversed(decorators):
            func = self.expr(decorator, scope)
            if func is None:
                continue
            self.fact("call", f"{scope.code.name}\0p", (func, value))
            if decorator_flag(decorator) not in ("staticmethod", "classmethod", "property", "abstract", "setter"):
                value = self.expr_entry("deco", "", (func, value))  # else: the function, with its flag
        return value

    def target(
        self, target: ast.expr, value: int | None, node: ast.expr | None, scope: Scope, *, weak: bool = False
    ) -> None:
        if isinstance(target, ast.Name):
            self.assign_name(target.id, value, scope, node, weak=weak)
        elif isinstance(target, ast.Attribute):
            base = self.expr(target.value, scope)
            if base is not None and value is not None:
                self.fact("setattr", target.attr, (base, value))
        elif isinstance(target, ast.Subscript):
            base = self.expr(target.value, scope)
            self.expr(target.slice, scope)
            if base is not None and value is not None:
                self.fact("setitem", self.key_of(target.slice, scope), (base, value))
        elif isinstance(target, (ast.Tuple, ast.List)):
            same = isinstance(node, (ast.Tuple, ast.List)) and len(node.elts) == len(target.elts)
            for i, element in enumerate(target.elts):
                if isinstance(element, ast.Starred):
                    self.target(element.value, value, None, scope)
                elif same and not any(isinstance(e, ast.Starred) for e in node.elts):  # type: ignore[union-attr]
                    item = node.elts[i]  # type: ignore[union-attr]
                    self.target(
                        element, self.expr(item, scope) if value is None else self._element(value, i), item, scope
                    )
                else:
                    part = self.expr_entry("sub", repr(i), (value,)) if value is not None else None
                    self.target(element, part, None, scope)
        elif isinstance(target, ast.Starred):
            self.target(target.value, value, None, scope)

    def _element(self, value: int, i: int) -> int:
        return self.expr_entry("sub", repr(i), (value,))

    def iterate(self, node: ast.expr, scope: Scope, *, asynchronous: bool = False) -> int | None:
        base = self.expr(node, scope)
        if base is None:
            return None
        self.fact("mcall", f"{scope.code.name}\0{'__aiter__' if asynchronous else '__iter__'}", (base,))
        return self.expr_entry("iter", "", (base,))

    # -- expressions -------------------------------------------------------------------
    def expr(self, node: ast.expr | None, scope: Scope) -> int | None:
        """The expression number of ``node``'s value, or None when it cannot be code."""
        if node is None:
            return None
        handler = getattr(self, "expr_" + type(node).__name__, None)
        if handler is not None:
            return handler(node, scope)  # type: ignore[no-any-return]
        for child in ast.iter_child_nodes(node):  # operators, f-strings...: only their calls
            if isinstance(child, ast.expr):
                self.expr(child, scope)
            elif isinstance(child, ast.comprehension):
                self.comprehension(child, scope)
        return None

    def expr_Name(self, node: ast.Name, scope: Scope) -> int:
        return self.load(node.id, scope)

    def expr_Attribute(self, node: ast.Attribute, scope: Scope) -> int | None:
        base = self.expr(node.value, scope)
        if base is None:
            return None
        found = self.expr_entry("attr", f"{node.attr}\0{scope.code.name}", (base,))
        self.fact("use", "", (found,))  # read even when unused: a property read calls its getter
        return found

    def expr_Subscript(self, node: ast.Subscript, scope: Scope) -> int | None:
        base = self.expr(node.value, scope)
        self.expr(node.slice, scope)
        return self.expr_entry("sub", self.key_of(node.slice, scope), (base,)) if base is not None else None

    def expr_Call(self, node: ast.Call, scope: Scope) -> int | None:
        if isinstance(node.func, ast.Name) and node.func.id == "super" and not node.args:
            self.fact("call", f"{scope.code.name}\0", (self.load("super", scope),))  # a call of super itself
            return self.super_call(scope)
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "setattr"
            and len(node.args) == 3
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):  # ``setattr(box, "act", f)`` with a constant name is ``box.act = f``
            base, value = self.expr(node.args[0], scope), self.expr(node.args[2], scope)
            if base is not None and value is not None:
                self.fact("setattr", node.args[1].value, (base, value))
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            base = self.expr(node.args[0], scope)
            for extra in node.args[2:]:
                self.expr(extra, scope)
            self.fact("call", f"{scope.code.name}\0", (self.load("getattr", scope),))
            attr = node.args[1].value
            return self.expr_entry("attr", f"{attr}\0{scope.code.name}", (base,)) if base is not None else None
        func = self.expr(node.func, scope)
        spec: list[str] = []
        operands: list[int] = []
        for arg in node.args:
            if isinstance(arg, ast.Starred) and isinstance(arg.value, (ast.List, ast.Tuple)):
                items = [e for e in arg.value.elts if not isinstance(e, ast.Starred)]
                pieces: list[tuple[str, ast.expr]] = [("p", e) for e in items]
            elif isinstance(arg, ast.Starred):
                pieces = [("*", arg.value)]
            else:
                pieces = [("p", arg)]
            for kind, item in pieces:
                value = self.expr(item, scope)
                spec.append(kind)
                operands.append(value if value is not None else -1)
        for keyword in node.keywords:
            value = self.expr(keyword.value, scope)
            spec.append(f"k:{keyword.arg}" if keyword.arg else "**")
            operands.append(value if value is not None else -1)
        if func is None:
            return None
        self.fact("call", f"{scope.code.name}\0{','.join(spec)}", (func, *operands))
        return self.expr_entry("call", ",".join(spec), (func, *operands))

    def super_call(self, scope: Scope) -> int | None:
        """``super()`` in a method: the defining class and the method's first parameter."""
        current: Scope | None = scope
        while current is not None and current.kind not in ("function",):
            current = current.parent
        owner = current.parent if current is not None else None
        if current is None or owner is None or owner.kind != "class":
            return None
        first = self.first_param.get(current.name)
        self_value = self.expr_entry("var", f"{current.key}\0{first}") if first else None
        return self.expr_entry("super", owner.name, (self_value,) if self_value is not None else ())

    def expr_Lambda(self, node: ast.Lambda, scope: Scope) -> int:
        owner = scope
        owner.lambdas += 1
        qual = f"{owner.child_prefix()}<lambda{owner.lambdas}>"
        inner = Scope(qual, "lambda", scope)
        inner.locals = self.infos[id(node)].locals
        self.scopes.append((qual, "lambda", scope.code.name))
        self.fact("sig", qual + "\0\0" + signature_text(node.args), ())
        value = self.function(node.args, qual, scope, inner)
        self.assign(f"r\0{qual}", self.expr(node.body, inner))
        return value

    def expr_IfExp(self, node: ast.IfExp, scope: Scope) -> int | None:
        self.expr(node.test, scope)
        return self.union([self.expr(node.body, scope), self.expr(node.orelse, scope)])

    def expr_BoolOp(self, node: ast.BoolOp, scope: Scope) -> int | None:
        return self.union([self.expr(v, scope) for v in node.values])

    def union(self, parts: list[int | None]) -> int | None:
        found = tuple(p for p in parts if p is not None)
        if not found:
            return None
        return found[0] if len(found) == 1 else self.expr_entry("union", "", found)

    def expr_Await(self, node: ast.Await, scope: Scope) -> int | None:
        return self.expr(node.value, scope)

    def expr_NamedExpr(self, node: ast.NamedExpr, scope: Scope) -> int | None:
        value = self.expr(node.value, scope)
        owner = scope
        self.target(node.target, value, node.value, owner)
        return value

    def expr_Starred(self, node: ast.Starred, scope: Scope) -> int | None:
        return self.expr(node.value, scope)

    def expr_Yield(self, node: ast.Yield | ast.YieldFrom, scope: Scope) -> None:
        value = self.expr(node.value, scope) if node.value is not None else None
        if isinstance(node, ast.YieldFrom) and value is not None:
            value = self.expr_entry("iter", "", (value,))
        if scope.kind in ("function", "lambda"):
            self.assign(f"y\0{scope.name}", value)

    expr_YieldFrom = expr_Yield

    def expr_List(self, node: ast.List | ast.Tuple | ast.Set, scope: Scope) -> int:
        cid = self.expr_entry("cont")
        for i, element in enumerate(node.elts):
            starred = isinstance(element, ast.Starred)
            value = self.expr(element, scope)
            if starred and value is not None:
                value = self.expr_entry("sub", "", (value,))
            self.assign(f"e\0{cid}\0{'?' if starred else repr(i)}", value)
        return cid

    expr_Tuple = expr_List
    expr_Set = expr_List

    def expr_Dict(self, node: ast.Dict, scope: Scope) -> int:
        cid = self.expr_entry("cont")
        keys: dict[str, list[int]] | None = {}
        for key, item in zip(node.keys, node.values, strict=True):
            self.expr(key, scope)
            value = self.expr(item, scope)
            if key is None and value is not None:  # ``{**other}``
                value = self.expr_entry("sub", "", (value,))
            literal = literal_key(key)
            if keys is not None and literal:
                keys.setdefault(literal, []).extend([len(self.facts)] if value is not None else [])
            else:
                keys = None
            self.assign(f"e\0{cid}\0{literal or '?'}", value)
        if keys is not None:
            self.dict_keys[cid] = keys
            self.dict_nodes[id(node)] = cid
        return cid

    def comprehension(self, node: ast.comprehension, scope: Scope) -> None:
        items = self.iterate(node.iter, scope, asynchronous=bool(node.is_async))
        # Comprehension variables are locals of the enclosing code (``scope_infos``).
        self.target(node.target, items, None, scope)
        for condition in node.ifs:
            self.expr(condition, scope)

    def expr_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp, scope: Scope) -> int:
        for generator in node.generators:
            self.comprehension(generator, scope)
        cid = self.expr_entry("cont")
        self.assign(f"e\0{cid}\0?", self.expr(node.elt, scope))
        return cid

    expr_SetComp = expr_ListComp
    expr_GeneratorExp = expr_ListComp

    def expr_DictComp(self, node: ast.DictComp, scope: Scope) -> int:
        for generator in node.generators:
            self.comprehension(generator, scope)
        self.expr(node.key, scope)
        cid = self.expr_entry("cont")
        self.assign(f"e\0{cid}\0?", self.expr(node.value, scope))
        return cid
