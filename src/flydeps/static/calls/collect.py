"""Call-graph facts: one module's AST -> its flow facts (:mod:`flydeps.static.calls.facts`).

Contract: :func:`flow_facts` is a pure function of an ``ast.Module`` (never imports or runs
anything). It runs the scope pre-pass (:mod:`flydeps.static.calls.scopes`), then walks the
statements here and their expressions with :class:`~flydeps.static.calls.exprs.ExpressionWalker`
(which states how names and straight-line versions are resolved).
:mod:`flydeps.static.calls.solve` solves the flow over the modules of a project and yields the
call graph. The parse cache keys stored facts by a digest of these four modules
(:data:`EXTRACTOR_MODULES`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from .exprs import ExpressionWalker
from .facts import MODULE, FlowFacts
from .scopes import Scope, decorator_flag, literal_key, scope_infos, signature_text

__all__ = ["EXTRACTOR_MODULES", "flow_facts"]

#: The source files of the extractor, whose digest is part of the stored facts' kind.
EXTRACTOR_MODULES = tuple(f"flydeps.static.calls.{name}" for name in ("facts", "scopes", "exprs", "collect"))


def flow_facts(tree: ast.Module) -> FlowFacts:
    """The flow facts of ``tree`` (see the module docstring)."""
    walker = _Walker(scope_infos(tree))
    module = Scope(MODULE, "module", None)
    walker.scopes.append((MODULE, "module", ""))
    try:
        walker.body(tree.body, module)
    except RecursionError:  # a pathological expression: the facts found so far still hold
        pass
    facts = tuple(f for i, f in enumerate(walker.facts) if i not in walker.dropped)
    return FlowFacts(tuple(walker.exprs), facts, tuple(walker.scopes))


# Statements that run no code of their own besides the expressions :func:`_spoil` checks.
_QUIET = (ast.Assign, ast.AnnAssign, ast.FunctionDef, ast.AsyncFunctionDef, ast.Expr, ast.Pass, ast.Global)


def _spoil(stmt: ast.stmt, scope: Scope, read: dict[int, set[str]]) -> None:
    """Before ``stmt`` runs: a fresh dict it rebinds, stores into or reads whole is no longer
    fresh; an entry it reads at a constant key (``N["b"]``, a plain dict lookup that runs no
    code) is noted in ``read`` (that entry can no longer be replaced); every dict stops being
    fresh when the statement may run code (a call, an import, an attribute or operator that
    may run a method, a class body...), which could read the old entries."""
    if not isinstance(stmt, _QUIET):
        scope.fresh.clear()
        return
    targets: list[ast.expr] = []
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):  # the body runs later
        args = stmt.args
        every = [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]
        parts = [*stmt.decorator_list, *args.defaults, *(d for d in args.kw_defaults if d is not None)]
        parts += [a.annotation for a in every if a is not None and a.annotation is not None]
        parts += [stmt.returns] if stmt.returns is not None else []
        targets = [ast.Name(stmt.name)]
    elif isinstance(stmt, ast.Assign):
        parts, targets = [stmt.value], list(stmt.targets)
    elif isinstance(stmt, ast.AnnAssign):
        parts, targets = [stmt.annotation, *([stmt.value] if stmt.value is not None else [])], [stmt.target]
    elif isinstance(stmt, ast.Expr):
        parts = [stmt.value]
    else:
        parts = []
    reads: list[tuple[str, str]] = []
    if not all(_inert(part, scope.fresh, reads) for part in parts) or not all(_stores(t, scope) for t in targets):
        scope.fresh.clear()
        return
    for name, key in reads:
        if name in scope.fresh:
            read.setdefault(scope.fresh[name], set()).add(key)


def _stores(target: ast.expr, scope: Scope) -> bool:
    """A store target that runs no code (a name; an entry of a fresh dict, which is then no
    longer fresh); False for anything else."""
    if isinstance(target, ast.Name):
        scope.fresh.pop(target.id, None)
        return True
    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id in scope.fresh:
        if literal_key(target.slice):
            scope.fresh.pop(target.value.id)
            return True
    if isinstance(target, (ast.Tuple, ast.List)):
        return all(_stores(e, scope) for e in target.elts)
    return False


def _inert(node: ast.expr, fresh: dict[str, int], reads: list[tuple[str, str]]) -> bool:
    """Evaluating ``node`` runs no code and reads no fresh dict whole: names, constants,
    displays, lambdas (whose bodies do not run; their defaults do), and an entry of a fresh
    dict at a constant key (a plain dict lookup, noted in ``reads``)."""
    if isinstance(node, ast.Name):
        return node.id not in fresh
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in fresh:
        key = literal_key(node.slice)
        reads.append((node.value.id, key))
        return bool(key)
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return all(_inert(e, fresh, reads) for e in node.elts)
    if isinstance(node, ast.Dict):
        keys_inert = all(k is not None and _inert(k, fresh, reads) for k in node.keys)
        return keys_inert and all(_inert(v, fresh, reads) for v in node.values)
    if isinstance(node, ast.Lambda):
        defaults = [*node.args.defaults, *(d for d in node.args.kw_defaults if d is not None)]
        return all(_inert(d, fresh, reads) for d in defaults)
    return False


class _Walker(ExpressionWalker):
    """Walks statements (their expressions through :class:`ExpressionWalker`)."""

    # -- statements --------------------------------------------------------------------
    def body(self, stmts: Iterable[ast.stmt], scope: Scope) -> None:
        for stmt in stmts:
            if scope.fresh:
                if self._replace_entry(stmt, scope):
                    continue
                _spoil(stmt, scope, self.read_keys)
            handler = getattr(self, "stmt_" + type(stmt).__name__, None)
            if handler is not None:
                handler(stmt, scope)
            else:
                self.generic(stmt, scope)
            self._track_display(stmt, scope)

    # -- a dict entry replaced in straight-line code -----------------------------------
    def _track_display(self, stmt: ast.stmt, scope: Scope) -> None:
        """``N = {"a": f, ...}`` (constant keys) in straight-line code: ``N`` is fresh."""
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)):
            return
        cid = self.dict_nodes.get(id(stmt.value))
        name = stmt.targets[0].id
        if cid is None or scope.depth or scope.loops or self.versioned(name, scope) is None:
            return
        scope.fresh[name] = cid

    def _replace_entry(self, stmt: ast.stmt, scope: Scope) -> bool:
        """``N["a"] = g`` on a fresh ``N``, in straight-line code, with a value whose
        evaluation runs no code: the display's value at ``"a"`` is replaced (nothing could
        have called it: since the display, no statement ran code or read ``N``)."""
        if not (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and not scope.depth and not scope.loops):
            return False
        target = stmt.targets[0]
        if not (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)):
            return False
        name, key = target.value.id, literal_key(target.slice)
        cid = scope.fresh.get(name)
        reads: list[tuple[str, str]] = []
        if cid is None or not key or key in self.read_keys.get(cid, ()) or not _inert(stmt.value, scope.fresh, reads):
            return False
        for other, read in reads:  # ``N["a"] = N["b"]``: the value now at "b", which stays
            self.read_keys.setdefault(scope.fresh[other], set()).add(read)
        keys = self.dict_keys[cid]
        self.dropped.update(keys.get(key, ()))
        value = self.expr(stmt.value, scope)
        keys[key] = [len(self.facts)] if value is not None else []
        self.assign(f"e\0{cid}\0{key}", value)
        return True

    def generic(self, node: ast.AST, scope: Scope) -> None:
        """Any other statement: its expressions (for the calls in them), then its bodies."""
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.expr):
                self.expr(child, scope)
            elif isinstance(child, ast.stmt):
                self.body([child], scope)
            elif isinstance(child, ast.AST):
                self.generic(child, scope)

    def stmt_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: Scope) -> None:
        qual = self._unique(scope.child_prefix() + node.name)
        inner = Scope(qual, "function", scope)
        self.scopes.append((qual, "function", scope.code.name))
        value = self.function(node.args, qual, scope, inner)
        decorators = [d for d in node.decorator_list]
        flags = [decorator_flag(d) for d in decorators]
        info = self.infos[id(node)]
        if info.generator:
            flags.append("gen")
        if scope.kind == "class":
            flags.append("method")
        self.fact("sig", qual + "\0" + ",".join(f for f in flags if f) + "\0" + signature_text(node.args), ())
        positional = [*node.args.posonlyargs, *node.args.args]
        if positional:
            self.first_param[qual] = positional[0].arg
        value = self.decorate(decorators, value, scope)
        self.assign_name(node.name, value, scope)
        inner.locals, inner.globals, inner.nonlocals = info.locals, info.globals, info.nonlocals
        self.body(node.body, inner)

    stmt_AsyncFunctionDef = stmt_FunctionDef

    def stmt_ClassDef(self, node: ast.ClassDef, scope: Scope) -> None:
        qual = self._unique(scope.child_prefix() + node.name)
        self.scopes.append((qual, "class", scope.code.name))
        for base in (*node.bases, *(k.value for k in node.keywords)):
            self.expr(base, scope)
        value = self.decorate(list(node.decorator_list), self.expr_entry("cls", qual), scope)
        inner = Scope(qual, "class", scope)
        info = self.infos[id(node)]
        inner.locals, inner.globals = info.locals, info.globals
        self.body(node.body, inner)
        self.assign_name(node.name, value, scope)

    def stmt_Raise(self, node: ast.Raise, scope: Scope) -> None:
        raised = self.expr(node.exc, scope)
        self.expr(node.cause, scope)
        if raised is not None:  # ``raise Oops``: a class raised is instantiated
            self.fact("construct", scope.code.name, (raised,))

    def stmt_Return(self, node: ast.Return, scope: Scope) -> None:
        if node.value is not None:
            value = self.expr(node.value, scope)
            if scope.kind in ("function", "lambda"):
                self.assign(f"r\0{scope.name}", value)

    def stmt_Assign(self, node: ast.Assign, scope: Scope) -> None:
        value = self.expr(node.value, scope)
        for target in node.targets:
            self.target(target, value, node.value, scope)

    def stmt_AnnAssign(self, node: ast.AnnAssign, scope: Scope) -> None:
        if node.value is not None:
            self.target(node.target, self.expr(node.value, scope), node.value, scope)

    def stmt_AugAssign(self, node: ast.AugAssign, scope: Scope) -> None:
        self.target(node.target, self.expr(node.value, scope), node.value, scope, weak=True)

    def stmt_For(self, node: ast.For | ast.AsyncFor, scope: Scope) -> None:
        items = self.iterate(node.iter, scope, asynchronous=isinstance(node, ast.AsyncFor))
        scope.depth += 1
        scope.loops += 1
        self.target(node.target, items, None, scope)
        self.body(node.body, scope)
        scope.loops -= 1
        self.body(node.orelse, scope)
        scope.depth -= 1

    def stmt_While(self, node: ast.While, scope: Scope) -> None:
        scope.depth += 1
        scope.loops += 1
        self.expr(node.test, scope)
        self.body(node.body, scope)
        scope.loops -= 1
        self.body(node.orelse, scope)
        scope.depth -= 1

    def stmt_If(self, node: ast.If, scope: Scope) -> None:
        self.expr(node.test, scope)
        scope.depth += 1
        self.body(node.body, scope)
        self.body(node.orelse, scope)
        scope.depth -= 1

    def stmt_Match(self, node: ast.AST, scope: Scope) -> None:
        scope.depth += 1
        self.generic(node, scope)
        scope.depth -= 1

    stmt_AsyncFor = stmt_For

    def stmt_With(self, node: ast.With | ast.AsyncWith, scope: Scope) -> None:
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

    def stmt_Try(self, node: ast.Try, scope: Scope) -> None:
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

    def stmt_Import(self, node: ast.Import | ast.ImportFrom, scope: Scope) -> None:
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
