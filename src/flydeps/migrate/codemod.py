"""The libcst codemod behind ``flydeps migrate`` (see :mod:`.tree` for the rewrites it makes).

Contract: :class:`MigrateCommand` is a :class:`~libcst.codemod.VisitorBasedCodemodCommand`;
names are resolved through the import statements of the scopes a name is used in (module,
enclosing functions, the class body it sits in), so any import alias works, with the results
libcst's ``QualifiedNameProvider`` gives for imported names; those decisions, the line
numbers and whether an import is still used are read from one stdlib :mod:`ast` parse of the
same text (no libcst metadata: its scope analysis was most of the time, issue 38), and the
libcst passes visit statements only. An import of a replaced decorator is removed (libcst's
``RemoveImportsVisitor``) when nothing else loads its name (``__all__`` entries count); what
it cannot migrate it leaves unchanged with a ``path:line:`` warning naming the fix. Imports it
adds or rewrites end where the project's own ruff or isort settings put them, else where
isort's defaults do (:mod:`.imports`). No I/O besides listing the file's root directory
(to tell first-party imports from third-party ones) and, for a file on disk whose imports
changed, reading the project's import settings and running its tool (ruff or isort) on the
text.
"""

from __future__ import annotations

import ast
import os
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.codemod.visitors._add_imports import _GatherTopImportsBeforeStatements
from libcst.helpers import get_full_name_for_node

from .imports import apply_project_order, first_party_names, governed, place_imports

__all__ = ["FACADE_NAMES", "KEPT_NO_GRAPH", "KEPT_NO_KERNEL", "KERNEL_DECORATORS", "MigrateCommand", "source_facts"]

#: Why a cache was kept when no rule applies (``MigrateCommand.cache_functions``).
KEPT_NO_KERNEL = "reaches no kernel or launcher"
KEPT_NO_GRAPH = "defines no kernel and calls no kernel builder of its module (no whole-tree analysis covered it)"

FLYDSL_COMPILER = "flydsl.compiler"
RUNTIME_FLYC = "flydsl_runtime.flyc"
LRU_CACHE, CACHE = "functools.lru_cache", "functools.cache"
KERNEL_DECORATORS = frozenset(
    f"{module}.{name}" for module in (FLYDSL_COMPILER, RUNTIME_FLYC) for name in ("kernel", "jit")
)
#: What ``flydsl_runtime.flyc`` exports: ``flydsl.compiler.__all__`` of the pinned FlyDSL
#: (0.5.0) plus ``cached_factory``; tests compare it with the real facade where FlyDSL is
#: installed. An import whose names (or alias uses, ``flyc.jit_function``) fall outside it
#: is left unchanged, so a migration never breaks an import.
FACADE_NAMES = frozenset(
    {
        *("BaseBackend", "CompiledFunction", "GPUTarget", "JitArgumentRegistry", "cached_factory", "compile"),
        *("compile_backend_name", "from_c_void_p", "from_dlpack", "from_torch_tensor", "get_backend", "jit"),
        *("kernel", "register_backend"),
    }
)


_NODE_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef)
_Table = dict[str, list["_Binding"]]


@dataclass(frozen=True)
class _Binding:
    """A name bound by an import: ``qualified`` is what the name stands for (``functools``,
    ``functools.lru_cache``), ``key`` what :class:`RemoveImportsVisitor` removes it by
    (module, object, alias) and ``prefix`` the local name that key covers."""

    qualified: str
    key: tuple[str, str | None, str | None]
    prefix: str


@dataclass(frozen=True)
class _Function:
    """What the codemod needs of one ``def`` (stdlib :mod:`ast`, pre-order index)."""

    name: str
    line: int
    node: ast.FunctionDef | ast.AsyncFunctionDef
    chain: tuple[_Table, ...]  # the import tables its decorators see, innermost first
    decorators: tuple[frozenset[str], ...]


def _dotted(node: ast.expr) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def _bind(table: _Table, statement: ast.Import | ast.ImportFrom) -> None:
    if isinstance(statement, ast.Import):
        for alias in statement.names:
            local = alias.asname or alias.name.split(".")[0]
            qualified = alias.name if alias.asname else local
            prefix = alias.asname or alias.name
            table.setdefault(local, []).append(_Binding(qualified, (alias.name, None, alias.asname), prefix))
        return
    module = "." * statement.level + (statement.module or "")
    for alias in statement.names:
        if alias.name == "*":
            continue
        local = alias.asname or alias.name
        qualified = f"{module}.{alias.name}" if module and not module.endswith(".") else module + alias.name
        table.setdefault(local, []).append(_Binding(qualified, (module, alias.name, alias.asname), local))


def _resolve(expr: ast.expr, chain: tuple[_Table, ...]) -> frozenset[str]:
    """What a dotted name stands for through the imports its scopes see (libcst's
    ``QualifiedNameProvider`` for imported names: every import of the innermost scope
    binding it)."""
    dotted = _dotted(expr)
    if dotted is None:
        return frozenset()
    head, _, rest = dotted.partition(".")
    for table in chain:
        bindings = table.get(head)
        if bindings:
            return frozenset(b.qualified + ("." + rest if rest else "") for b in bindings)
    return frozenset()


class _Facts:
    """One stdlib :mod:`ast` walk of the source: the import tables of every scope, each
    ``def`` and each import statement in pre-order (the order libcst visits them in), so
    that the codemod needs no libcst metadata (scope analysis was most of its time, issue 38)."""

    def __init__(self, text: str) -> None:
        self.tree = ast.parse(text)
        self.functions: list[_Function] = []
        self.import_lines: list[int] = []
        self.module_table: _Table = {}
        self._body_chain: dict[int, tuple[_Table, ...]] = {}
        self.names_compiler = False  # an import statement the codemod may rewrite
        self._pending: list[tuple[ast.FunctionDef | ast.AsyncFunctionDef, tuple[_Table, ...], list[int]]] = []
        self._scan(self.tree.body, self.module_table, (self.module_table,), [])
        kernel_flags: list[bool] = []
        self.defines_kernel: list[bool] = []
        for node, chain, _ in self._pending:
            decorators = tuple(_resolve(_callee(d), chain) for d in node.decorator_list)
            self.functions.append(_Function(node.name, node.lineno, node, chain, decorators))
            kernel_flags.append(any(d & KERNEL_DECORATORS for d in decorators))
            self.defines_kernel.append(False)
        for index, (_, _, ancestors) in enumerate(self._pending):
            if kernel_flags[index]:
                for ancestor in ancestors:
                    self.defines_kernel[ancestor] = True
        self.top_level = [i for i, (_, _, ancestors) in enumerate(self._pending) if not ancestors]

    def _scan(
        self,
        body: list[ast.stmt],
        table: _Table,
        chain: tuple[_Table, ...],
        ancestors: list[int],
        in_class: bool = False,
    ) -> None:
        for statement in body:
            if isinstance(statement, (ast.Import, ast.ImportFrom)):
                _bind(table, statement)
                self.import_lines.append(statement.lineno)
                self.names_compiler = self.names_compiler or _names_compiler(statement)
            elif isinstance(statement, _NODE_TYPES):
                index = len(self._pending)
                self._pending.append((statement, chain, list(ancestors)))
                inner: _Table = {}
                outer = chain[1:] if in_class else chain  # a class scope is not seen from a method
                self._body_chain[id(statement)] = (inner, *outer)
                self._scan(statement.body, inner, (inner, *outer), [*ancestors, index])
            elif isinstance(statement, ast.ClassDef):
                inner = {}
                self._body_chain[id(statement)] = (inner, *chain)
                self._scan(statement.body, inner, (inner, *chain), ancestors, in_class=True)
            else:
                for field in ("body", "orelse", "finalbody"):
                    block = getattr(statement, field, None)
                    if isinstance(block, list):
                        self._scan(block, table, chain, ancestors, in_class)
                for handler in getattr(statement, "handlers", ()):
                    self._scan(handler.body, table, chain, ancestors, in_class)
                for case in getattr(statement, "cases", ()):
                    self._scan(case.body, table, chain, ancestors, in_class)

    @property
    def inert(self) -> bool:
        """Whether the codemod can neither change this source nor say anything about it: no
        ``lru_cache``/``cache`` decorator and no import statement of ``flydsl.compiler``
        (then :func:`.tree.transform_module` need not run libcst at all)."""
        if self.names_compiler:
            return False
        return not any(d & {LRU_CACHE, CACHE} for f in self.functions for d in f.decorators)

    def compiler_attributes(self) -> set[str]:
        """``name`` of every ``X.name`` whose ``X`` stands for ``flydsl.compiler`` (one walk
        of the tree, only when some import names ``flydsl``)."""
        tables = [self.module_table, *self._body_chain_tables()]
        if not any(b.qualified.startswith("flydsl") for t in tables for bs in t.values() for b in bs):
            return set()
        used: set[str] = set()
        stack: list[tuple[ast.AST, tuple[_Table, ...]]] = [(self.tree, (self.module_table,))]
        while stack:
            node, chain = stack.pop()
            if isinstance(node, ast.Attribute) and FLYDSL_COMPILER in _resolve(node.value, chain):
                used.add(node.attr)
            body_chain = self._body_chain.get(id(node))
            for field, value in ast.iter_fields(node):
                inner = body_chain if body_chain is not None and field == "body" else chain
                if isinstance(value, list):
                    stack.extend((item, inner) for item in value if isinstance(item, ast.AST))
                elif isinstance(value, ast.AST):
                    stack.append((value, inner))
        return used

    def _body_chain_tables(self) -> list[_Table]:
        return [chain[0] for chain in self._body_chain.values()]


def _names_compiler(statement: ast.Import | ast.ImportFrom) -> bool:
    """Whether :meth:`MigrateCommand.leave_Import`/``leave_ImportFrom`` act on the statement."""
    if isinstance(statement, ast.Import):
        return any(alias.name == FLYDSL_COMPILER for alias in statement.names)
    if statement.level or statement.module is None:
        return False
    if statement.module == FLYDSL_COMPILER:
        return True
    return statement.module == "flydsl" and any(alias.name == "compiler" for alias in statement.names)


def source_facts(text: str) -> _Facts | None:
    """The stdlib :mod:`ast` facts the codemod decides from; None when CPython's parser
    refuses the text (the codemod then parses it and reports the failure)."""
    try:
        return _Facts(text[:-1] if text.endswith("\r") and not text.endswith("\r\n") else text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _callee(decorator: ast.expr) -> ast.expr:
    return decorator.func if isinstance(decorator, ast.Call) else decorator


def _runtime_flyc() -> cst.Attribute:
    return cst.Attribute(cst.Name("flydsl_runtime"), cst.Name("flyc"))


def _cached_factory() -> cst.Attribute:
    return cst.Attribute(cst.Name("flydeps"), cst.Name("cached_factory"))


_BLOCKS = (
    cst.Module,
    cst.BaseCompoundStatement,
    cst.BaseSuite,
    cst.Else,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Finally,
    cst.MatchCase,
)
_IMPORTS = (cst.Import, cst.ImportFrom)


def _descend(node: cst.CSTNode) -> bool:
    """Whether a pass below must visit ``node``'s children: blocks of statements, and the
    statement lines holding an import -- never expressions, decorators, parameters or
    whitespace (the passes act on ``def`` statements and imports only; every decision comes
    from the stdlib :mod:`ast`, so libcst rebuilds only what holds those, issue 38)."""
    if isinstance(node, _BLOCKS):
        return True
    if isinstance(node, (cst.SimpleStatementLine, cst.SimpleStatementSuite)):
        return any(isinstance(statement, _IMPORTS) for statement in node.body)
    return False


def _top_imports(node: cst.CSTNode) -> bool:
    """:func:`_descend` for a pass that needs the module's top-level import lines only."""
    if isinstance(node, cst.Module):
        return True
    return isinstance(node, cst.SimpleStatementLine) and any(isinstance(s, _IMPORTS) for s in node.body)


class _PlainDispatch:
    """Plain ``CSTTransformer`` dispatch for libcst's codemod visitors: no matcher
    decorators run on every node (none of ours uses them); ``on_visit`` (in each class)
    says which nodes to descend into (issue 38)."""

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        return cst.CSTTransformer.on_leave(self, original_node, updated_node)  # type: ignore[arg-type]

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        return None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        return None


class _AddImports(_PlainDispatch, AddImportsVisitor):
    """libcst's AddImportsVisitor (same output) without its walk of the whole tree for the
    module's leading imports, nor the matcher dispatch on every node (issue 38)."""

    def on_visit(self, node: cst.CSTNode) -> bool:
        cst.CSTTransformer.on_visit(self, node)
        return _top_imports(node)  # it edits only the imports at the top of the module

    def visit_Module(self, node: cst.Module) -> None:
        gatherer = _GatherTopImportsBeforeStatements(self.context)
        gatherer.leave_Module(node)  # it reads the module's leading statements only
        self.all_imports = gatherer.all_imports
        self.module_imports = self.module_imports - gatherer.module_imports
        for module, alias in gatherer.module_aliases.items():
            if module in self.module_aliases and self.module_aliases[module] == alias:
                del self.module_aliases[module]
        for module, aliases in gatherer.alias_mapping.items():
            for obj, alias in aliases:
                if module in self.alias_mapping and (obj, alias) in self.alias_mapping[module]:
                    self.alias_mapping[module].remove((obj, alias))
                    if not self.alias_mapping[module]:
                        del self.alias_mapping[module]
        for module, imports in gatherer.object_mapping.items():
            if module not in self.module_mapping:
                continue
            if "*" in imports:
                del self.module_mapping[module]
            else:
                self.module_mapping[module] = self.module_mapping[module] - imports
                if not self.module_mapping[module]:
                    del self.module_mapping[module]


class _RemoveImports(_PlainDispatch, RemoveImportsVisitor):
    """libcst's RemoveImportsVisitor (same edits) with "unused" decided by the caller from
    the stdlib :mod:`ast` (``unused``: local names nothing loads any more) instead of a
    scope analysis of the whole module, and no descent into expressions (issue 38)."""

    def __init__(self, context: CodemodContext, unused: frozenset[str]) -> None:
        super().__init__(context)
        self.unused_names = unused

    def on_visit(self, node: cst.CSTNode) -> bool:
        cst.CSTTransformer.on_visit(self, node)
        return _descend(node)

    def visit_Module(self, node: cst.Module) -> None:
        self._unused_imports = {}

    def visit_Import(self, node: cst.Import) -> None:
        for alias in node.names:
            local = alias.evaluated_alias or alias.evaluated_name.split(".")[0]
            if local in self.unused_names:
                self._unused_imports[alias] = node

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        if isinstance(node.names, cst.ImportStar):
            return
        for alias in node.names:
            if (alias.evaluated_alias or alias.evaluated_name) in self.unused_names:
                self._unused_imports[alias] = node


class MigrateCommand(_PlainDispatch, VisitorBasedCodemodCommand):
    """Compile factories to ``flydeps.cached_factory``, ``flydsl.compiler`` to the facade."""

    DESCRIPTION = "Migrate FlyDSL compile factories to flydeps.cached_factory and flydsl_runtime.flyc."

    def __init__(
        self,
        context: CodemodContext,
        *,
        skip_delegating: bool = False,
        reaching: Mapping[int, str] | None = None,
    ) -> None:
        super().__init__(context)
        self.skip_delegating = skip_delegating
        #: ``def`` line -> the kernel/launcher a cache-decorated function of this file reaches
        #: according to the whole-tree static graph (:mod:`.tree`); None: no graph covers
        #: the file, only the per-file rules apply.
        self.reaching = reaching
        #: One ``(def line, name, why kept)`` per ``lru_cache``/``cache`` function; ``why``
        #: is empty for a converted one.
        self.cache_functions: list[tuple[int, str, str]] = []
        self._facts: _Facts | None = None
        self._next_function = 0  # pre-order index of the next `def` visited
        self._functions: list[_Function] = []  # the enclosing `def`s being visited
        self._defines_kernel_stack: list[bool] = []
        self._import_line: dict[int, int] = {}  # id(libcst import node) -> line
        self._next_import = 0
        self._missing: list[str] = []  # `X.name` with X bound to flydsl.compiler, name not in the facade
        self._builders: frozenset[str] = frozenset()  # module-level functions that define a kernel
        self._placed: set[str] = set()  # modules whose import statements this run added or rewrote
        self._removed: Counter[str] = Counter()  # local names loaded by the decorators replaced
        self._remove_keys: set[tuple[str, str | None, str | None]] = set()
        self._rewrote = False  # a decorator or an import statement was rewritten
        #: The file's text, when the caller has it (spares generating it from the tree).
        self.source: str | None = None
        #: The result's code when :meth:`transform_module` knows it without generating it
        #: from the module it returns (which then lacks the project's import order: use this).
        self.text: str | None = None

    # Plain CSTTransformer dispatch, no descent into expressions: every decision comes from
    # one stdlib `ast` walk (:class:`_Facts`), so the libcst pass only visits statements
    # (no libcst metadata: its scope analysis was most of the time, issue 38).
    def on_visit(self, node: cst.CSTNode) -> bool:
        cst.CSTTransformer.on_visit(self, node)
        return _descend(node)

    def preset(self, facts: _Facts | None) -> None:
        """Use ``facts`` (:func:`source_facts` of the text about to be transformed)."""
        self._facts = facts

    def transform_module(self, tree: cst.Module) -> cst.Module:
        """The rewrites, the import additions/removals (libcst's visitors, without their
        scope analysis), then the added or rewritten imports moved where isort's defaults
        put them (:func:`.imports.place_imports`) and, for a file on disk, sorted by the
        project's own ruff or isort settings (:func:`.imports.apply_project_order`;
        what could not be applied is a warning). Sets :attr:`text` to the result's code when
        it is known without generating it (nothing changed, or the project's tool wrote it)."""
        self.text = None
        original = self.source if self.source is not None else tree.code
        if original.endswith("\r") and not original.endswith("\r\n"):
            original = original[:-1]  # libcst drops a final lone CR: the tree's own code
        if self._facts is None:
            self._facts = _Facts(original)
        module = tree.visit(self)
        if self._next_function != len(self._facts.functions) or self._next_import != len(self._facts.import_lines):
            raise RuntimeError("libcst and ast disagree on the functions or imports of this file")
        if AddImportsVisitor.CONTEXT_KEY in self.context.scratch:
            module = module.visit(_AddImports(self.context))
        if self._remove_keys:
            unused = frozenset(self._unused())
            if unused:
                for module_name, obj, asname in sorted(self._remove_keys, key=repr):
                    RemoveImportsVisitor.remove_unused_import(self.context, module_name, obj, asname)
                module = module.visit(_RemoveImports(self.context, unused))
        if not self._placed:
            if not self._rewrote:
                self.text = original
            return module
        path = self.context.filename
        first_party = first_party_names(path) if path else frozenset()
        placed = place_imports(module, self._placed, first_party, tree)
        if not path or not os.path.isfile(path) or not governed(path):
            return placed
        rewritten = placed.code
        result = apply_project_order(path, original, rewritten)
        if result.warning is not None:
            self.warn(result.warning)
        self.text = result.text
        return placed

    def _unused(self) -> set[str]:
        """Local names of the scheduled imports that nothing loads once the replaced
        decorators are gone (``__all__`` entries count as uses)."""
        assert self._facts is not None
        loads: Counter[str] = Counter()
        strings: set[str] = set()
        for node in ast.walk(self._facts.tree):
            if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
                loads[node.id] += 1
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                strings.add(node.value)
        out = set()
        for module_name, obj, asname in self._remove_keys:
            local = asname or (obj if obj is not None else module_name.split(".")[0])
            if loads[local] - self._removed[local] <= 0 and local not in strings:
                out.add(local)
        return out

    def visit_Module(self, node: cst.Module) -> None:
        assert self._facts is not None
        facts = self._facts
        self._builders = frozenset(facts.functions[i].name for i in facts.top_level if facts.defines_kernel[i])
        used = facts.compiler_attributes()
        self._missing = sorted(n for n in used if n not in FACADE_NAMES and not n.startswith("__"))

    def visit_Import(self, node: cst.Import) -> None:
        self._note_import(node)

    def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
        self._note_import(node)

    def _note_import(self, node: cst.CSTNode) -> None:
        assert self._facts is not None
        lines = self._facts.import_lines
        self._import_line[id(node)] = lines[self._next_import] if self._next_import < len(lines) else 1
        self._next_import += 1

    def _keep_compiler(self, node: cst.CSTNode) -> bool:
        """True (after a warning) when the file uses names of ``flydsl.compiler`` that the
        facade does not export: its import must stay."""
        if self._missing:
            self._warn(
                node,
                f"left unchanged: the file uses {FLYDSL_COMPILER}.{', .'.join(self._missing)}, which {RUNTIME_FLYC} "
                f"does not export; import those from {FLYDSL_COMPILER}.<module> under another name, then rerun",
            )
        return bool(self._missing)

    def _warn(self, node: cst.CSTNode, message: str) -> None:
        """A ``path:line:`` warning on an import statement."""
        self.warn(f"{self.context.filename}:{self._import_line.get(id(node), 1)}: {message}")

    def _delegates(self, function: _Function) -> str | None:
        """The builder of this module the body calls by name (``return build_x(...)``), if any."""
        calls = [
            (n.lineno, n.col_offset, n.func.id)
            for statement in function.node.body
            for n in ast.walk(statement)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
        ]
        return next((name for _, _, name in sorted(calls) if name in self._builders), None)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        assert self._facts is not None
        index = self._next_function
        if index >= len(self._facts.functions) or self._facts.functions[index].name != node.name.value:
            raise RuntimeError(f"libcst and ast disagree on the functions of this file at def {node.name.value}")
        self._functions.append(self._facts.functions[index])
        self._defines_kernel_stack.append(self._facts.defines_kernel[index])
        self._next_function += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        function = self._functions.pop()
        defines_kernel = self._defines_kernel_stack.pop()
        if not any(d & {LRU_CACHE, CACHE} for d in function.decorators):
            return updated_node  # nothing to convert (and no body scan for a delegation)
        line, name = function.line, function.name
        if not defines_kernel:
            callee = self._delegates(function) or (self.reaching or {}).get(line)
            if callee is None:
                self.cache_functions.append((line, name, KEPT_NO_GRAPH if self.reaching is None else KEPT_NO_KERNEL))
                return updated_node
            if self.skip_delegating:
                self.warn(
                    f"{self.context.filename}:{line}: delegating factory {name} kept its cache (--skip-delegating): "
                    f"it returns its first build even after {callee} changes; rerun without --skip-delegating to "
                    "migrate it"
                )
                self.cache_functions.append((line, name, f"--skip-delegating (it reaches {callee})"))
                return updated_node
        decorators = [self._factory(function, i, new) for i, new in enumerate(updated_node.decorators)]
        converted = any(new is not old for new, old in zip(decorators, updated_node.decorators))
        why = (
            "" if converted else "its cache decorator has a form flydeps.cached_factory cannot take; convert it by hand"
        )
        self.cache_functions.append((line, name, why))
        return updated_node.with_changes(decorators=decorators)

    def _factory(self, function: _Function, index: int, updated: cst.Decorator) -> cst.Decorator:
        """``lru_cache``/``cache`` (any form) -> ``flydeps.cached_factory``; others as they are."""
        names = function.decorators[index]
        expr = updated.decorator
        if LRU_CACHE in names:
            new: cst.BaseExpression = (
                expr.with_changes(func=_cached_factory()) if isinstance(expr, cst.Call) else _cached_factory()
            )
        elif CACHE in names and not isinstance(expr, cst.Call):
            new = cst.parse_expression("flydeps.cached_factory(maxsize=None)")
        else:
            return updated
        self._rewrote = True
        self._schedule_removal(function, function.node.decorator_list[index])
        AddImportsVisitor.add_needed_import(self.context, "flydeps")
        self._placed.add("flydeps")
        return updated.with_changes(decorator=new)

    def _schedule_removal(self, function: _Function, decorator: ast.expr) -> None:
        """What libcst's ``remove_unused_import_by_node`` schedules for the decorator: every
        import (of any scope its decorators see) binding a dotted name in it; and the names
        the replaced part (the callee) loaded, which no longer count as uses."""
        for node in ast.walk(decorator):
            dotted = _dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
            if dotted is None:
                continue
            head = dotted.split(".")[0]
            for table in function.chain:
                for binding in table.get(head, ()):
                    if dotted == binding.prefix or dotted.startswith(binding.prefix + "."):
                        self._remove_keys.add(binding.key)
        for node in ast.walk(_callee(decorator)):
            if isinstance(node, ast.Name):
                self._removed[node.id] += 1

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> cst.Import:
        aliases = []
        for alias in updated_node.names:
            if get_full_name_for_node(alias.name) == FLYDSL_COMPILER:
                if alias.asname is None:
                    self._warn(
                        original_node,
                        f"`import {FLYDSL_COMPILER}` has no alias, left unchanged; write "
                        f"`import {RUNTIME_FLYC} as flyc` and call `flyc.jit`/`flyc.kernel` through it",
                    )
                elif not self._keep_compiler(original_node):
                    alias = alias.with_changes(name=_runtime_flyc())
                    self._placed.add(RUNTIME_FLYC)
                    self._rewrote = True
            aliases.append(alias)
        return updated_node.with_changes(names=aliases)

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom | cst.Import:
        if updated_node.relative or updated_node.module is None:
            return updated_node
        module = get_full_name_for_node(updated_node.module)
        names = updated_node.names
        if module == FLYDSL_COMPILER:
            imported = [] if isinstance(names, cst.ImportStar) else [a.evaluated_name for a in names]
            missing = [name for name in imported if name not in FACADE_NAMES]
            if missing and len(missing) < len(imported):
                self._warn(
                    original_node,
                    f"left unchanged: {RUNTIME_FLYC} does not export {', '.join(missing)}; import the "
                    f"other names from {RUNTIME_FLYC} in a statement of their own",
                )
            if missing:
                return updated_node
            self._placed.add(RUNTIME_FLYC)
            return updated_node.with_changes(module=_runtime_flyc())
        if module != "flydsl" or isinstance(names, cst.ImportStar):
            return updated_node
        compiler = [a for a in names if a.evaluated_name == "compiler"]
        if not compiler or self._keep_compiler(original_node):
            return updated_node
        self._placed.add(RUNTIME_FLYC)
        if len(names) == 1:
            alias = cst.AsName(cst.Name(compiler[0].evaluated_alias or "compiler"))
            return cst.Import([cst.ImportAlias(_runtime_flyc(), alias)], semicolon=updated_node.semicolon)
        for compiler_alias in compiler:  # `from flydsl import compiler as flyc, expr as fx`: split the statement
            asname = compiler_alias.evaluated_alias or "compiler"
            AddImportsVisitor.add_needed_import(self.context, RUNTIME_FLYC, asname=asname)
        rest = [a for a in names if a.evaluated_name != "compiler"]
        rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(names=rest)
