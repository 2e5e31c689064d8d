"""Call-graph facts: one module's AST -> the facts of a PyCG-style value flow.

Contract: :func:`flow_facts` is a pure function of an ``ast.Module`` (never imports or runs
anything). It writes down, mostly flow-insensitively, what the module's code does with values
that may be callable, in the spirit of PyCG's *assignment graph*:

* **slots** hold values: a variable of a scope (``v``), a function's return values
  (``r``) and yielded values (``y``), the elements of a container literal (``e``);
* **expressions** (:attr:`FlowFacts.exprs`, numbered) say how a value is computed from
  slots and other expressions: a name, an attribute, a call's result, a subscript, a
  container literal, a function or class object, ``super()``, the elements an iteration
  yields, a decorator applied, an instance of a caught exception class;
* **facts** (:attr:`FlowFacts.facts`) are the statements of the flow: ``assign`` (slot <-
  expression), ``setattr``/``setitem`` (a store through a computed object: ``self.x =
  ...``), ``call`` (a call site: caller, callee expression and arguments), ``mcall`` (an
  implicit method call: ``with`` -> ``__enter__``/``__exit__``, ``for`` ->
  ``__iter__``/``__next__``), ``construct`` (``raise Cls``: an instance is made), ``sig``
  (a function's parameters and flags), ``use`` (an attribute read, which calls a
  property's getter).

Straight-line code keeps its order: inside one scope, an assignment outside any branch
starts a new *version* of the name that the reads after it see (``x = f; x = g; x()``
reads ``g``), one inside a branch or loop adds to the previous version, and the
flow-insensitive slot (every assignment) is what loops, other scopes and names rebound by
``global``/``nonlocal`` read. A local holding a constant is a constant subscript key.

Names are resolved to scopes here, with Python's rules (locals decided per function,
``global``/``nonlocal``, class bodies invisible to nested functions); module-level names
stay symbolic (``glob``) and are resolved later through the symbol tables, so the facts
depend on the file's bytes only. :mod:`flydeps.static.callflow` solves the flow over the
modules of a project and yields the call graph.

Scopes are named as in the file summary (``f.<locals>.g``, ``C.m``, ``f#2`` for a repeated
name); lambdas as PyCG names them, per enclosing scope in source order
(``<lambda1>``, ``f.<locals>.<lambda2>``). A class body is the caller, named by the class
(as in PyCG), of what its statements call (decorators of its methods included).
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable
from typing import NamedTuple

from .store import Fixed, Int, Record, Seq, Str

__all__ = ["FACTS_SHAPE", "FACTS_VERSION", "FlowFacts", "MODULE", "flow_facts"]

#: The scope name of a module's own (import-time) code.
MODULE = ""

Entry = tuple[str, str, tuple[int, ...]]


class FlowFacts(NamedTuple):
    """The flow facts of one module (see the module docstring).

    ``exprs[i]`` is ``(op, text, operands)``; ``facts`` are ``(kind, text, operands)``;
    ``scopes`` are ``(name, kind, parent)`` for every code of the file (``module``,
    ``function``, ``lambda``, ``class``), parents first."""

    exprs: tuple[Entry, ...]
    facts: tuple[Entry, ...]
    scopes: tuple[tuple[str, str, str], ...]


#: Version of the stored form of :class:`FlowFacts` (the parse cache keeps one entry of
#: facts per file content next to its summary: :mod:`flydeps.static.parse`). The kind of
#: those entries also carries a digest of this file, so editing the extractor is enough.
FACTS_VERSION = 1
_ENTRY_SHAPE = Fixed(Str, Str, Seq(Int))
#: Field-by-field validation of a stored :class:`FlowFacts` (see :mod:`flydeps.static.store`).
FACTS_SHAPE = Record(FlowFacts, Seq(_ENTRY_SHAPE), Seq(_ENTRY_SHAPE), Seq(Fixed(Str, Str, Str)))


class _Scope:
    __slots__ = (
        "name", "kind", "parent", "locals", "globals", "nonlocals", "lambdas", "code",
        "versions", "constants", "depth", "loops",
    )  # fmt: skip

    def __init__(self, name: str, kind: str, parent: _Scope | None) -> None:
        self.name, self.kind, self.parent = name, kind, parent
        self.locals: set[str] = set()
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        self.lambdas = 0
        # Straight-line code: the current version of each local (an assignment outside any
        # branch replaces the value; inside a branch it adds to it), the constant a local
        # holds, and how deep in branches / loops the walk is.
        self.versions: dict[str, int] = {}
        self.constants: dict[str, str] = {}
        self.depth = 0
        self.loops = 0
        # The caller of what this scope's statements call: a class body is a caller of its
        # own, named by the class (as in PyCG), though it runs in its enclosing code.
        self.code: _Scope = self

    @property
    def key(self) -> str:
        """Slot namespace of the scope's variables (class bodies apart from functions)."""
        return "c:" + self.name if self.kind == "class" else self.name

    def child_prefix(self) -> str:
        if self.kind == "module":
            return ""
        return self.name + (".<locals>." if self.kind in ("function", "lambda") else ".")


def flow_facts(tree: ast.Module) -> FlowFacts:
    """The flow facts of ``tree`` (see the module docstring)."""
    walker = _Walker(_scope_infos(tree))
    module = _Scope(MODULE, "module", None)
    walker.scopes.append((MODULE, "module", ""))
    try:
        walker.body(tree.body, module)
    except RecursionError:  # a pathological expression: the facts found so far still hold
        pass
    return FlowFacts(tuple(walker.exprs), tuple(walker.facts), tuple(walker.scopes))


class _ScopeInfo:
    """What one scope binds and declares, found in one pass over the module."""

    __slots__ = ("locals", "globals", "nonlocals", "generator")

    def __init__(self) -> None:
        self.locals: set[str] = set()
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        self.generator = False


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _scope_infos(tree: ast.Module) -> dict[int, _ScopeInfo]:
    """Locals, ``global``/``nonlocal`` names and whether it yields, per scope node (by id).

    One walk over the whole module: decorators, defaults and bases belong to the scope
    where the statement stands, bodies to the new scope. Comprehension variables count as
    locals of the enclosing scope (flow-insensitive: the same answers)."""
    infos = {id(tree): _ScopeInfo()}
    stack: list[tuple[ast.AST, ast.AST]] = [(child, tree) for child in tree.body]
    while stack:
        node, owner = stack.pop()
        info = infos[id(owner)]
        if isinstance(node, _SCOPES):
            inner = infos[id(node)] = _ScopeInfo()
            outside: list[ast.AST] = []
            if isinstance(node, ast.ClassDef):
                info.locals.add(node.name)
                outside.extend((*node.decorator_list, *node.bases, *node.keywords))
                stack.extend((child, node) for child in node.body)
            else:
                args = node.args
                every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
                inner.locals.update(a.arg for a in every)
                outside.extend(d for d in (*args.defaults, *args.kw_defaults) if d is not None)
                if isinstance(node, ast.Lambda):
                    stack.append((node.body, node))
                else:
                    info.locals.add(node.name)
                    outside.extend(node.decorator_list)
                    stack.extend((child, node) for child in node.body)
            stack.extend((child, owner) for child in outside)
            continue
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                info.locals.add(node.id)
            continue
        if isinstance(node, ast.Global):
            info.globals.update(node.names)
        elif isinstance(node, ast.Nonlocal):
            info.nonlocals.update(node.names)
        elif isinstance(node, (ast.Yield, ast.YieldFrom)):
            info.generator = True
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            info.locals.update((a.asname or a.name.partition(".")[0]) for a in node.names if a.name != "*")
        elif isinstance(node, ast.ExceptHandler) and node.name:
            info.locals.add(node.name)
        elif isinstance(node, ast.pattern):  # match captures
            for attr in ("name", "rest"):
                value = getattr(node, attr, None)
                if isinstance(value, str):
                    info.locals.add(value)
        stack.extend((child, owner) for child in ast.iter_child_nodes(node))
    return infos


def _literal_key(node: ast.expr | None) -> str:
    """The key text of a constant subscript or dict key ('' when not a constant)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, bytes, bool)):
        return repr(node.value)
    return ""


class _Walker:
    """Walks statements and expressions, numbering expressions and recording facts."""

    def __init__(self, infos: dict[int, _ScopeInfo]) -> None:
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
    def versioned(self, name: str, scope: _Scope) -> _Scope | None:
        """``scope`` when its straight-line versions of ``name`` apply (a local of a
        function, a module global no function rebinds), else None (flow-insensitive)."""
        if scope.kind == "class" or name in self.rebound:
            return None
        if scope.kind == "module" or (name in scope.locals and name not in scope.globals):
            return scope
        return None

    def load(self, name: str, scope: _Scope) -> int:
        owner = self.versioned(name, scope)
        if owner is not None and owner.loops == 0 and name in owner.versions:
            return self.expr_entry("var", f"{owner.key}\0{name}\1{owner.versions[name]}")
        return self.load_any(name, scope)

    def load_any(self, name: str, scope: _Scope) -> int:
        """``name`` as any assignment of the scope may have bound it (flow-insensitive)."""
        if scope.kind == "class" and name in scope.locals and name not in scope.globals:
            return self.expr_entry("var", f"{scope.key}\0{name}")
        if name in scope.globals:
            return self.expr_entry("glob", name)
        current: _Scope | None = scope if scope.kind != "class" else scope.parent
        while current is not None and current.kind != "module":
            if current.kind != "class" and name in current.locals and name not in current.nonlocals:
                if name in current.globals:
                    break
                return self.expr_entry("var", f"{current.key}\0{name}")
            current = current.parent
        return self.expr_entry("glob", name)

    def assign_name(
        self, name: str, value: int | None, scope: _Scope, node: ast.expr | None = None, *, weak: bool = False
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
        elif isinstance(node, ast.Constant) and _literal_key(node):
            owner.constants[name] = _literal_key(node)
        else:
            owner.constants.pop(name, None)

    def key_of(self, node: ast.expr, scope: _Scope) -> str:
        """A subscript's constant key: a literal, or a local that holds one (``key = "gelu"``)."""
        if isinstance(node, ast.Name):
            owner = self.versioned(node.id, scope)
            return owner.constants.get(node.id, "") if owner is not None and not owner.loops else ""
        return _literal_key(node)

    def store_slot(self, name: str, scope: _Scope) -> str:
        if name in scope.globals or scope.kind == "module":
            return f"v\0\0{name}"
        if name in scope.nonlocals:
            current = scope.parent
            while current is not None and current.kind != "module":
                if current.kind != "class" and name in current.locals and name not in current.nonlocals:
                    return f"v\0{current.key}\0{name}"
                current = current.parent
        return f"v\0{scope.key}\0{name}"

    # -- statements --------------------------------------------------------------------
    def body(self, stmts: Iterable[ast.stmt], scope: _Scope) -> None:
        for stmt in stmts:
            handler = getattr(self, "stmt_" + type(stmt).__name__, None)
            if handler is not None:
                handler(stmt, scope)
            else:
                self.generic(stmt, scope)

    def generic(self, node: ast.AST, scope: _Scope) -> None:
        """Any other statement: its expressions (for the calls in them), then its bodies."""
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, scope)
            elif isinstance(child, ast.stmt):
                self.body([child], scope)
            elif isinstance(child, ast.AST):
                self.generic(child, scope)

    def stmt_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: _Scope) -> None:
        qual = self._unique(scope.child_prefix() + node.name)
        inner = _Scope(qual, "function", scope)
        self.scopes.append((qual, "function", scope.code.name))
        value = self.function(node.args, qual, scope, inner)
        decorators = [d for d in node.decorator_list]
        flags = [_flag(d) for d in decorators]
        info = self.infos[id(node)]
        if info.generator:
            flags.append("gen")
        if scope.kind == "class":
            flags.append("method")
        self.fact("sig", qual + "\0" + ",".join(f for f in flags if f) + "\0" + _signature(node.args), ())
        positional = [*node.args.posonlyargs, *node.args.args]
        if positional:
            self.first_param[qual] = positional[0].arg
        value = self.decorate(decorators, value, scope)
        self.assign_name(node.name, value, scope)
        inner.locals, inner.globals, inner.nonlocals = info.locals, info.globals, info.nonlocals
        self.body(node.body, inner)

    stmt_AsyncFunctionDef = stmt_FunctionDef

    def function(self, args: ast.arguments, qual: str, scope: _Scope, inner: _Scope) -> int:
        """The function object's expression; its defaults flow into its parameters."""
        positional = [*args.posonlyargs, *args.args]
        pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
        pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
        for param, default in pairs:
            self.assign(f"v\0{qual}\0{param.arg}", self.expr(default, scope))
        return self.expr_entry("fn", qual)

    def decorate(self, decorators: list[ast.expr], value: int, scope: _Scope) -> int:
        for decorator in reversed(decorators):
            func = self.expr(decorator, scope)
            if func is None:
                continue
            self.fact("call", f"{scope.code.name}\0p", (func, value))
            if _flag(decorator) not in ("staticmethod", "classmethod", "property", "abstract", "setter"):
                value = self.expr_entry("deco", "", (func, value))  # else: the function, with its flag
        return value

    def stmt_ClassDef(self, node: ast.ClassDef, scope: _Scope) -> None:
        qual = self._unique(scope.child_prefix() + node.name)
        self.scopes.append((qual, "class", scope.code.name))
        for base in (*node.bases, *(k.value for k in node.keywords)):
            self.expr(base, scope)
        value = self.decorate(list(node.decorator_list), self.expr_entry("cls", qual), scope)
        inner = _Scope(qual, "class", scope)
        info = self.infos[id(node)]
        inner.locals, inner.globals = info.locals, info.globals
        self.body(node.body, inner)
        self.assign_name(node.name, value, scope)

    def stmt_Raise(self, node: ast.Raise, scope: _Scope) -> None:
        raised = self.expr(node.exc, scope)
        self.expr(node.cause, scope)
        if raised is not None:  # ``raise Oops``: a class raised is instantiated
            self.fact("construct", scope.code.name, (raised,))

    def stmt_Return(self, node: ast.Return, scope: _Scope) -> None:
        if node.value is not None:
            value = self.expr(node.value, scope)
            if scope.kind in ("function", "lambda"):
                self.assign(f"r\0{scope.name}", value)

    def stmt_Assign(self, node: ast.Assign, scope: _Scope) -> None:
        value = self.expr(node.value, scope)
        for target in node.targets:
            self.target(target, value, node.value, scope)

    def stmt_AnnAssign(self, node: ast.AnnAssign, scope: _Scope) -> None:
        if node.value is not None:
            self.target(node.target, self.expr(node.value, scope), node.value, scope)

    def stmt_AugAssign(self, node: ast.AugAssign, scope: _Scope) -> None:
        self.target(node.target, self.expr(node.value, scope), node.value, scope, weak=True)

    def target(
        self, target: ast.expr, value: int | None, node: ast.expr | None, scope: _Scope, *, weak: bool = False
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

    def stmt_For(self, node: ast.For | ast.AsyncFor, scope: _Scope) -> None:
        items = self.iterate(node.iter, scope, asynchronous=isinstance(node, ast.AsyncFor))
        scope.depth += 1
        scope.loops += 1
        self.target(node.target, items, None, scope)
        self.body(node.body, scope)
        scope.loops -= 1
        self.body(node.orelse, scope)
        scope.depth -= 1

    def stmt_While(self, node: ast.While, scope: _Scope) -> None:
        scope.depth += 1
        scope.loops += 1
        self.expr(node.test, scope)
        self.body(node.body, scope)
        scope.loops -= 1
        self.body(node.orelse, scope)
        scope.depth -= 1

    def stmt_If(self, node: ast.If, scope: _Scope) -> None:
        self.expr(node.test, scope)
        scope.depth += 1
        self.body(node.body, scope)
        self.body(node.orelse, scope)
        scope.depth -= 1

    def stmt_Match(self, node: ast.AST, scope: _Scope) -> None:
        scope.depth += 1
        self.generic(node, scope)
        scope.depth -= 1

    stmt_AsyncFor = stmt_For

    def iterate(self, node: ast.expr, scope: _Scope, *, asynchronous: bool = False) -> int | None:
        base = self.expr(node, scope)
        if base is None:
            return None
        self.fact("mcall", f"{scope.code.name}\0{'__aiter__' if asynchronous else '__iter__'}", (base,))
        return self.expr_entry("iter", "", (base,))

    def stmt_With(self, node: ast.With | ast.AsyncWith, scope: _Scope) -> None:
        enter, leave = ("__aenter__", "__aexit__") if isinstance(node, ast.AsyncWith) else ("__enter__", "__exit__")
        for item in node.items:
            context = self.expr(item.context_expr, scope)
            if context is not None:
                self.fact("mcall", f"{scope.code.name}\0{enter}", (context,))
                self.fact("mcall", f"{scope.code.name}\0{leave}", (context,))
            if item.optional_vars is not None:
                entered = self.expr_entry("mcall", enter, (context,)) if context is not None else None
                self.target(item.optional_vars, entered, None, scope)
        self.body(node.body, scope)

    stmt_AsyncWith = stmt_With

    def stmt_Try(self, node: ast.Try, scope: _Scope) -> None:
        scope.depth += 1  # any part may be cut short by an exception
        self.body(node.body, scope)
        for handler in node.handlers:
            kind = self.expr(handler.type, scope) if handler.type is not None else None
            if handler.name and kind is not None:
                self.assign_name(handler.name, self.expr_entry("inst", "", (kind,)), scope)
            self.body(handler.body, scope)
        self.body(node.orelse, scope)
        scope.depth -= 1
        self.body(node.finalbody, scope)

    stmt_TryStar = stmt_Try

    def stmt_Import(self, node: ast.Import | ast.ImportFrom, scope: _Scope) -> None:
        if scope.kind == "module":  # module-level imports are the symbol tables' business
            for alias in node.names:
                scope.versions.pop(alias.asname or alias.name.partition(".")[0], None)
            return
        for alias in node.names:
            if alias.name == "*":
                continue
            if isinstance(node, ast.ImportFrom):
                text = f"{node.level}\0{node.module or ''}\0{alias.name}\0{node.module or ''}"
                bound = alias.asname or alias.name
            else:
                bound = alias.asname or alias.name.partition(".")[0]
                module = alias.name if alias.asname else bound
                text = f"0\0{alias.name}\0\0{module}"
            self.assign_name(bound, self.expr_entry("imp", text), scope)

    stmt_ImportFrom = stmt_Import

    # -- expressions -------------------------------------------------------------------
    def expr(self, node: ast.expr | None, scope: _Scope) -> int | None:
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

    def expr_Name(self, node: ast.Name, scope: _Scope) -> int:
        return self.load(node.id, scope)

    def expr_Attribute(self, node: ast.Attribute, scope: _Scope) -> int | None:
        base = self.expr(node.value, scope)
        if base is None:
            return None
        found = self.expr_entry("attr", f"{node.attr}\0{scope.code.name}", (base,))
        self.fact("use", "", (found,))  # read even when unused: a property read calls its getter
        return found

    def expr_Subscript(self, node: ast.Subscript, scope: _Scope) -> int | None:
        base = self.expr(node.value, scope)
        self.expr(node.slice, scope)
        return self.expr_entry("sub", self.key_of(node.slice, scope), (base,)) if base is not None else None

    def expr_Call(self, node: ast.Call, scope: _Scope) -> int | None:
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

    def super_call(self, scope: _Scope) -> int | None:
        """``super()`` in a method: the defining class and the method's first parameter."""
        current: _Scope | None = scope
        while current is not None and current.kind not in ("function",):
            current = current.parent
        owner = current.parent if current is not None else None
        if current is None or owner is None or owner.kind != "class":
            return None
        first = self.first_param.get(current.name)
        self_value = self.expr_entry("var", f"{current.key}\0{first}") if first else None
        return self.expr_entry("super", owner.name, (self_value,) if self_value is not None else ())

    def expr_Lambda(self, node: ast.Lambda, scope: _Scope) -> int:
        owner = scope
        owner.lambdas += 1
        qual = f"{owner.child_prefix()}<lambda{owner.lambdas}>"
        inner = _Scope(qual, "lambda", scope)
        inner.locals = self.infos[id(node)].locals
        self.scopes.append((qual, "lambda", scope.code.name))
        self.fact("sig", qual + "\0\0" + _signature(node.args), ())
        value = self.function(node.args, qual, scope, inner)
        self.assign(f"r\0{qual}", self.expr(node.body, inner))
        return value

    def expr_IfExp(self, node: ast.IfExp, scope: _Scope) -> int | None:
        self.expr(node.test, scope)
        return self.union([self.expr(node.body, scope), self.expr(node.orelse, scope)])

    def expr_BoolOp(self, node: ast.BoolOp, scope: _Scope) -> int | None:
        return self.union([self.expr(v, scope) for v in node.values])

    def union(self, parts: list[int | None]) -> int | None:
        found = tuple(p for p in parts if p is not None)
        if not found:
            return None
        return found[0] if len(found) == 1 else self.expr_entry("union", "", found)

    def expr_Await(self, node: ast.Await, scope: _Scope) -> int | None:
        return self.expr(node.value, scope)

    def expr_NamedExpr(self, node: ast.NamedExpr, scope: _Scope) -> int | None:
        value = self.expr(node.value, scope)
        owner = scope
        self.target(node.target, value, node.value, owner)
        return value

    def expr_Starred(self, node: ast.Starred, scope: _Scope) -> int | None:
        return self.expr(node.value, scope)

    def expr_Yield(self, node: ast.Yield | ast.YieldFrom, scope: _Scope) -> None:
        value = self.expr(node.value, scope) if node.value is not None else None
        if isinstance(node, ast.YieldFrom) and value is not None:
            value = self.expr_entry("iter", "", (value,))
        if scope.kind in ("function", "lambda"):
            self.assign(f"y\0{scope.name}", value)

    expr_YieldFrom = expr_Yield

    def expr_List(self, node: ast.List | ast.Tuple | ast.Set, scope: _Scope) -> int:
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

    def expr_Dict(self, node: ast.Dict, scope: _Scope) -> int:
        cid = self.expr_entry("cont")
        for key, item in zip(node.keys, node.values, strict=True):
            self.expr(key, scope)
            value = self.expr(item, scope)
            if key is None and value is not None:  # ``{**other}``
                value = self.expr_entry("sub", "", (value,))
            self.assign(f"e\0{cid}\0{_literal_key(key) or '?'}", value)
        return cid

    def comprehension(self, node: ast.comprehension, scope: _Scope) -> None:
        items = self.iterate(node.iter, scope, asynchronous=bool(node.is_async))
        # Comprehension variables are locals of the enclosing code (``_scope_infos``).
        self.target(node.target, items, None, scope)
        for condition in node.ifs:
            self.expr(condition, scope)

    def expr_ListComp(self, node: ast.ListComp | ast.SetComp | ast.GeneratorExp, scope: _Scope) -> int:
        for generator in node.generators:
            self.comprehension(generator, scope)
        cid = self.expr_entry("cont")
        self.assign(f"e\0{cid}\0?", self.expr(node.elt, scope))
        return cid

    expr_SetComp = expr_ListComp
    expr_GeneratorExp = expr_ListComp

    def expr_DictComp(self, node: ast.DictComp, scope: _Scope) -> int:
        for generator in node.generators:
            self.comprehension(generator, scope)
        self.expr(node.key, scope)
        cid = self.expr_entry("cont")
        self.assign(f"e\0{cid}\0?", self.expr(node.value, scope))
        return cid


def _flag(decorator: ast.expr) -> str:
    """What a well-known decorator does to the function ('' for anything else)."""
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    name = node.attr if isinstance(node, ast.Attribute) else node.id if isinstance(node, ast.Name) else ""
    if name in ("staticmethod", "classmethod", "property"):
        return name
    if name in ("abstractmethod", "abstractproperty"):
        return "abstract"
    if name in ("setter", "getter", "deleter") and isinstance(node, ast.Attribute):
        return "setter"
    return ""


def _signature(args: ast.arguments) -> str:
    """Parameters in order: ``p:name`` positional, ``*:name``, ``k:name`` keyword-only, ``**:name``."""
    parts = [f"p:{a.arg}" for a in (*args.posonlyargs, *args.args)]
    if args.vararg:
        parts.append(f"*:{args.vararg.arg}")
    parts.extend(f"k:{a.arg}" for a in args.kwonlyargs)
    if args.kwarg:
        parts.append(f"**:{args.kwarg.arg}")
    return ",".join(parts)
