"""What a module's execution may leave in a name besides its last plain binding (issue 37).

Contract: pure functions of syntax trees, used by :mod:`.extract` while it walks a file.
They describe, without running anything, the statements and functions that may decide
the value a module-level name holds when the module finished executing:

* :func:`statement_binding`: a statement (a branch condition, ``B *= 2``, ``T[k] = f``,
  ``T.update(...)``, a starred unpacking) as a :class:`ValueBinding`: its normalized form
  digested (no positions, comments or docstrings) and the dotted names it reads (inside
  comprehensions and lambdas too, minus the names they bind);
* :func:`walrus_names`: the names ``:=`` binds in module code (not in functions);
* :func:`writes`: the module-level names a function stores into (``global X; X = ...``,
  ``X[k] = v``, ``X.update(...)``): such a function is one of the bindings of ``X``;
* :func:`getattr_refs`: ``getattr(mod, "name")`` with a constant name, as the dotted read
  ``mod.name`` it is;
* :func:`lazy_sources`: for a module defining PEP 562 ``__getattr__``, the modules it may
  take names from (imports in its body, module names written as strings in the file).

Every answer over-approximates: a statement that may run is counted, never dropped.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator

from blake3 import blake3

from .expressions import dotted, getattr_ref, text_of
from .summary import ImportBinding, ValueBinding

__all__ = ["getattr_refs", "lazy_sources", "statement_binding", "statement_refs", "walrus_names", "writes"]

_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)
_MUTATORS = frozenset({"update", "setdefault", "append", "extend", "add", "insert", "__setitem__", "register"})
_MODULE_NAME = re.compile(r"^(\.+[A-Za-z_]\w*(\.[A-Za-z_]\w*)*|[A-Za-z_]\w*(\.[A-Za-z_]\w*)+)$")


def statement_refs(nodes: Iterable[ast.AST]) -> tuple[str, ...]:
    """Dotted names the nodes read, comprehensions and lambdas included, minus the names
    those bind (a comprehension's variable, a lambda's parameters); in source order."""
    bound: set[str] = set()
    seen: dict[str, None] = {}
    stack = list(reversed(list(nodes)))
    while stack:
        current = stack.pop()
        if isinstance(current, (ast.Name, ast.Attribute)):
            if not isinstance(current.ctx, ast.Load):
                if isinstance(current, ast.Name):
                    bound.add(current.id)
            else:
                name = dotted(current)
                if name:
                    seen.setdefault(name)
                    continue
        elif isinstance(current, ast.Lambda):
            bound.update(a.arg for a in _lambda_args(current))
        elif isinstance(current, ast.Call):
            ref = getattr_ref(current)
            if ref:
                seen.setdefault(ref)
        stack.extend(reversed(list(ast.iter_child_nodes(current))))
    return tuple(r for r in seen if r.partition(".")[0] not in bound)


def _lambda_args(node: ast.Lambda) -> list[ast.arg]:
    args = node.args
    return [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]


def statement_binding(line: int, what: str, nodes: Iterable[ast.AST], skip: str = "") -> ValueBinding:
    """``nodes`` as one expression-like binding (never a literal: no value is claimed);
    ``skip`` is a name not to list as read (the target of ``X *= 2``)."""
    nodes = list(nodes)
    dump = "\0".join(ast.dump(n, annotate_fields=False, include_attributes=False) for n in nodes)
    digest = blake3(f"flydeps-statement-v1:{what}:{dump}".encode()).hexdigest()
    text = " ".join(text_of(n) if isinstance(n, ast.expr) else type(n).__name__ for n in nodes)
    refs = tuple(("", r) for r in statement_refs(nodes) if r.partition(".")[0] != skip)
    return ValueBinding(line, digest, False, f"{what}: {text}"[:80], refs)


def walrus_names(stmt: ast.stmt) -> Iterator[tuple[str, ast.NamedExpr]]:
    """``(name, node)`` for each ``name := value`` in module code of ``stmt``."""
    stack: list[ast.AST] = [stmt]
    while stack:
        current = stack.pop()
        if isinstance(current, ast.NamedExpr) and isinstance(current.target, ast.Name):
            yield current.target.id, current
        stack.extend(n for n in ast.iter_child_nodes(current) if not isinstance(n, _SCOPES))


def own_nodes(body: list[ast.stmt]) -> Iterator[ast.AST]:
    """The nodes of a function body outside its nested functions, classes and lambdas."""
    stack: list[ast.AST] = list(body)
    while stack:
        current = stack.pop()
        yield current
        stack.extend(n for n in ast.iter_child_nodes(current) if not isinstance(n, _SCOPES))


def writes(node: ast.FunctionDef | ast.AsyncFunctionDef, local: Iterable[str]) -> set[str]:
    """Non-local names the function stores into: ``global`` names it assigns, and names it
    does not bind whose items or contents it changes (``T[k] = f``, ``T.update(...)``)."""
    local = set(local)
    declared: set[str] = set()
    stored: set[str] = set()  # plain names stored: module-level only where declared global
    out: set[str] = set()
    for current in own_nodes(node.body):
        if isinstance(current, ast.Global):
            declared.update(current.names)
        elif isinstance(current, ast.Name):
            if isinstance(current.ctx, ast.Store):
                stored.add(current.id)
        elif isinstance(current, ast.Subscript):
            if isinstance(current.ctx, ast.Store):
                out.add(dotted(current.value).partition(".")[0])
        elif isinstance(current, ast.Call) and isinstance(current.func, ast.Attribute):
            if current.func.attr in _MUTATORS:
                out.add(dotted(current.func.value).partition(".")[0])
    out |= stored & declared
    return {n for n in out if n and (n in declared or n not in local)}


def getattr_refs(node: ast.FunctionDef | ast.AsyncFunctionDef) -> list[tuple[str, tuple[str, ...]]]:
    """``(head, attrs)`` of each ``getattr(head.x, "name")`` with a constant name in the
    function's own code (not in nested functions)."""
    out = []
    for current in own_nodes(node.body):
        if isinstance(current, ast.Call):
            ref = getattr_ref(current)
            if ref:
                head, *rest = ref.split(".")
                out.append((head, tuple(rest)))
    return out


def lazy_sources(tree: ast.Module, getattr_def: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[ImportBinding, ...]:
    """Where a PEP 562 ``__getattr__`` may take names from: the imports in its body
    (``from m import x``: the name ``x`` of ``m``) and every module name written as a
    string in the file (``{"rms_norm": "pkg.ops.rms"}``: any name of that module)."""
    found: dict[ImportBinding, None] = {}
    for current in ast.walk(getattr_def):
        if isinstance(current, ast.ImportFrom):
            for alias in current.names:
                found.setdefault(ImportBinding(current.lineno, current.module or "", alias.name, current.level, ""))
        elif isinstance(current, ast.Import):
            for alias in current.names:
                found.setdefault(ImportBinding(current.lineno, alias.name, "", 0, ""))
    for current in ast.walk(tree):
        if isinstance(current, ast.Constant) and isinstance(current.value, str) and _MODULE_NAME.match(current.value):
            level = len(current.value) - len(current.value.lstrip("."))
            found.setdefault(ImportBinding(current.lineno, current.value.lstrip("."), "", level, ""))
    return tuple(found)
