"""The libcst codemod behind ``flydeps migrate`` (see :mod:`.migrate` for the rewrites it makes).

Contract: :class:`MigrateCommand` is a :class:`~libcst.codemod.VisitorBasedCodemodCommand`;
names are resolved with libcst's ``QualifiedNameProvider`` so any import alias works; what it
cannot migrate it leaves unchanged with a ``path:line:`` warning naming the fix. Imports it
adds or rewrites end where the project's own ruff or isort settings put them, else where
isort's defaults do (:mod:`.import_order`). No I/O besides listing the file's root directory
(to tell first-party imports from third-party ones) and, for a file on disk whose imports
changed, reading the project's import settings and running its tool (ruff or isort) on the
text.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, TypeVar

import libcst as cst
from libcst.codemod import CodemodContext, VisitorBasedCodemodCommand
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.helpers import get_full_name_for_node
from libcst.metadata import PositionProvider, QualifiedNameProvider

from .import_order import apply_project_order, first_party_names, place_imports

__all__ = ["FACADE_NAMES", "KEPT_NO_GRAPH", "KEPT_NO_KERNEL", "KERNEL_DECORATORS", "MigrateCommand"]

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


_N = TypeVar("_N", bound=cst.CSTNode)


class _Collector(cst.CSTVisitor):
    """Every node of one type, in pre-order (what ``m.findall(tree, m.Type())`` returns,
    without the matcher machinery's per-node bookkeeping, issue 38)."""

    def __init__(self, kind: type[cst.CSTNode]) -> None:
        super().__init__()
        self.kind = kind
        self.found: list[cst.CSTNode] = []

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, self.kind):
            self.found.append(node)
        return True

    def on_leave(self, original_node: cst.CSTNode) -> None:
        return None

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        return None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        return None


def _find(tree: cst.CSTNode, kind: type[_N]) -> list[_N]:
    collector = _Collector(kind)
    tree.visit(collector)
    return collector.found  # type: ignore[return-value]


def _runtime_flyc() -> cst.Attribute:
    return cst.Attribute(cst.Name("flydsl_runtime"), cst.Name("flyc"))


def _cached_factory() -> cst.Attribute:
    return cst.Attribute(cst.Name("flydeps"), cst.Name("cached_factory"))


class MigrateCommand(VisitorBasedCodemodCommand):
    """Compile factories to ``flydeps.cached_factory``, ``flydsl.compiler`` to the facade."""

    DESCRIPTION = "Migrate FlyDSL compile factories to flydeps.cached_factory and flydsl_runtime.flyc."
    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

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
        #: according to the whole-tree static graph (:mod:`.migrate`); None: no graph covers
        #: the file, only the per-file rules apply.
        self.reaching = reaching
        #: One ``(def line, name, why kept)`` per ``lru_cache``/``cache`` function; ``why``
        #: is empty for a converted one.
        self.cache_functions: list[tuple[int, str, str]] = []
        self._defines_kernel: list[bool] = []  # one flag per enclosing function
        self._missing: list[str] = []  # `X.name` with X bound to flydsl.compiler, name not in the facade
        self._builders: frozenset[str] = frozenset()  # module-level functions that define a kernel
        self._placed: set[str] = set()  # modules whose import statements this run added or rewrote

    # No matcher decorators and no per-attribute hooks here: plain CSTTransformer dispatch,
    # without MatcherDecoratableTransformer's bookkeeping on every node and attribute (a
    # third of the pass's time on FlyDSL's kernels, issue 38). Same calls, same results.
    def on_visit(self, node: cst.CSTNode) -> bool:
        return cst.CSTTransformer.on_visit(self, node)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        return cst.CSTTransformer.on_leave(self, original_node, updated_node)

    def on_visit_attribute(self, node: cst.CSTNode, attribute: str) -> None:
        return None

    def on_leave_attribute(self, original_node: cst.CSTNode, attribute: str) -> None:
        return None

    def transform_module(self, tree: cst.Module) -> cst.Module:
        """The rewrites, libcst's import additions/removals, then the added or rewritten
        imports moved where isort's defaults put them (:func:`.import_order.place_imports`)
        and, for a file on disk, sorted by the project's own ruff or isort settings
        (:func:`.import_order.apply_project_order`; what could not be applied is a warning)."""
        module = super().transform_module(tree)
        if not self._placed:
            return module
        path = self.context.filename
        first_party = first_party_names(path) if path else frozenset()
        placed = place_imports(module, self._placed, first_party, tree)
        if not path or not os.path.isfile(path):
            return placed
        result = apply_project_order(path, tree.code, placed.code)
        if result.warning is not None:
            self.warn(result.warning)
        if result.text == placed.code:
            return placed
        return cst.parse_module(result.text)

    def visit_Module(self, node: cst.Module) -> None:
        functions = [f for f in node.body if isinstance(f, cst.FunctionDef)]
        self._builders = frozenset(f.name.value for f in functions if self._defines_any_kernel(f))
        attributes = _find(node, cst.Attribute)
        used = {ref.attr.value for ref in attributes if FLYDSL_COMPILER in self._qualified(ref.value)}
        self._missing = sorted(n for n in used if n not in FACADE_NAMES and not n.startswith("__"))

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

    def _qualified(self, expr: cst.BaseExpression) -> set[str]:
        """What a decorator (or the callee of a decorator call) names, through imports."""
        target = expr.func if isinstance(expr, cst.Call) else expr
        return {q.name for q in self.get_metadata(QualifiedNameProvider, target, set())}

    def _warn(self, node: cst.CSTNode, message: str) -> None:
        line = self.get_metadata(PositionProvider, node).start.line
        self.warn(f"{self.context.filename}:{line}: {message}")

    def _defines_any_kernel(self, node: cst.FunctionDef) -> bool:
        nested = [f for f in _find(node, cst.FunctionDef) if f is not node]
        return any(self._qualified(d.decorator) & KERNEL_DECORATORS for f in nested for d in f.decorators)

    def _delegates(self, node: cst.FunctionDef) -> str | None:
        """The builder of this module the body calls by name (``return build_x(...)``), if any."""
        calls = _find(node.body, cst.Call)
        names = (c.func.value for c in calls if isinstance(c.func, cst.Name))
        return next((name for name in names if name in self._builders), None)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if any(self._qualified(d.decorator) & KERNEL_DECORATORS for d in node.decorators):
            self._defines_kernel = [True] * len(self._defines_kernel)
        self._defines_kernel.append(False)

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        defines_kernel = self._defines_kernel.pop()
        if not any(self._qualified(d.decorator) & {LRU_CACHE, CACHE} for d in original_node.decorators):
            return updated_node  # nothing to convert (and no body scan for a delegation)
        line = self.get_metadata(PositionProvider, original_node.name).start.line
        name = original_node.name.value
        if not defines_kernel:
            callee = self._delegates(original_node) or (self.reaching or {}).get(line)
            if callee is None:
                self.cache_functions.append((line, name, KEPT_NO_GRAPH if self.reaching is None else KEPT_NO_KERNEL))
                return updated_node
            if self.skip_delegating:
                self._warn_delegating(original_node, callee)
                self.cache_functions.append((line, name, f"--skip-delegating (it reaches {callee})"))
                return updated_node
        decorators = [self._factory(old, new) for old, new in zip(original_node.decorators, updated_node.decorators)]
        converted = any(new is not old for new, old in zip(decorators, updated_node.decorators))
        why = (
            "" if converted else "its cache decorator has a form flydeps.cached_factory cannot take; convert it by hand"
        )
        self.cache_functions.append((line, name, why))
        return updated_node.with_changes(decorators=decorators)

    def _warn_delegating(self, node: cst.FunctionDef, callee: str) -> None:
        if any(self._qualified(d.decorator) & {LRU_CACHE, CACHE} for d in node.decorators):
            self._warn(
                node,
                f"delegating factory {node.name.value} kept its cache (--skip-delegating): it returns its first "
                f"build even after {callee} changes; rerun without --skip-delegating to migrate it",
            )

    def _factory(self, original: cst.Decorator, updated: cst.Decorator) -> cst.Decorator:
        """``lru_cache``/``cache`` (any form) -> ``flydeps.cached_factory``; others as they are."""
        names = self._qualified(original.decorator)
        expr = updated.decorator
        if LRU_CACHE in names:
            new: cst.BaseExpression = (
                expr.with_changes(func=_cached_factory()) if isinstance(expr, cst.Call) else _cached_factory()
            )
        elif CACHE in names and not isinstance(expr, cst.Call):
            new = cst.parse_expression("flydeps.cached_factory(maxsize=None)")
        else:
            return updated
        RemoveImportsVisitor.remove_unused_import_by_node(self.context, original.decorator)
        AddImportsVisitor.add_needed_import(self.context, "flydeps")
        self._placed.add("flydeps")
        return updated.with_changes(decorator=new)

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
