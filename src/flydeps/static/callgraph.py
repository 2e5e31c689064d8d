"""Call-graph facts: one module's AST -> its flow facts (:mod:`flydeps.static.callfacts`).

Contract: :func:`flow_facts` is a pure function of an ``ast.Module`` (never imports or runs
anything). It runs the scope pre-pass (:mod:`flydeps.static.callscopes`), then walks the
statements here and their expressions with :class:`~flydeps.static.callexprs.ExpressionWalker`
(which states how names and straight-line versions are resolved).
:mod:`flydeps.static.callflow` solves the flow over the modules of a project and yields the
call graph. The parse cache keys stored facts by a digest of these four modules
(:data:`EXTRACTOR_MODULES`).
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from .callexprs import ExpressionWalker
from .callfacts import MODULE, FlowFacts
from .callscopes import Scope, decorator_flag, scope_infos, signature_text

__all__ = ["EXTRACTOR_MODULES", "flow_facts"]

#: The source files of the extractor, whose digest is part of the stored facts' kind.
EXTRACTOR_MODULES = ("callfacts.py", "callscopes.py", "callexprs.py", "callgraph.py")


def flow_facts(tree: ast.Module) -> FlowFacts:
    """The flow facts of ``tree`` (see the module docstring)."""
    walker = _Walker(scope_infos(tree))
    module = Scope(MODULE, "module", None)
    walker.scopes.append((MODULE, "module", ""))
    try:
        walker.body(tree.body, module)
    except RecursionError:  # a pathological expression: the facts found so far still hold
        pass
    return FlowFacts(tuple(walker.exprs), tuple(walker.facts), tuple(walker.scopes))


class _Walker(ExpressionWalker):
    """Walks statements (their expressions through :class:`ExpressionWalker`)."""

    # -- statements --------------------------------------------------------------------
    def body(self, stmts: Iterable[ast.stmt], scope: Scope) -> None:
        for stmt in stmts:
            handler = getattr(self, "stmt_" + type(stmt).__name__, None)
            if handler is not None:
                handler(stmt, scope)
            else:
                self.generic(stmt, scope)

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
