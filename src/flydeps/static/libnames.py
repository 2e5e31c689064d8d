"""Library names: where a name a library exports is defined, read from its installed source.

Contract: ``canonical("flydsl.expr.const_expr")`` follows the library's own re-exports
(``from .primitive import *``, ``from .x import name as alias``, ``import a.b as c``) through
its installed ``.py`` files to the module that defines the name, as the runtime names a
library function or class it finds in a project global (``__module__`` + ``__qualname__``):
``Canonical("flydsl.expr.primitive.const_expr", "def")``. Attributes after a function, class
or value are dropped (the runtime's chain stops at a library object). Files are parsed with
``ast`` and never imported or executed; modules are found with
``importlib.machinery.PathFinder`` (no parent package is imported). Whatever cannot be read
for sure (a compiled module, a name bound in several branches of module-level control flow,
a computed ``__all__`` that decides it, a chain longer than ``MAX_HOPS``) leaves the dotted
name as written (``kind == "path"``): a naming difference at worst, never a missed edit (a
library leaf is digested by its distribution, whatever it is called).
"""

from __future__ import annotations

import ast
import functools
import importlib.machinery
import os
import sys
from typing import NamedTuple

__all__ = ["Canonical", "canonical"]

MAX_HOPS = 32


class Canonical(NamedTuple):
    """``dotted``: the name; ``kind``: ``module``, ``def`` (a function or class statement),
    ``value`` (an assignment: the runtime reads the value itself), or ``path`` (not
    resolved: the name as written)."""

    dotted: str
    kind: str


class _Module(NamedTuple):
    name: str
    is_package: bool
    bindings: dict[str, tuple[ast.stmt | ast.alias, ...]]  # name -> its bindings, in source order
    stars: tuple[tuple[str, int], ...]  # (module, level) of each ``from x import *``
    all_names: frozenset[str] | None  # a literal ``__all__``; None when absent or computed
    computed_all: bool


def canonical(dotted: str) -> Canonical:
    """The defining name of library name ``dotted`` (see the module docstring)."""
    return _canonical(dotted, 0)


@functools.lru_cache(maxsize=8192)
def _canonical(dotted: str, hops: int) -> Canonical:
    parts = dotted.split(".")
    module = parts[0]
    if _find(module) is None:
        return Canonical(dotted, "path")
    for i in range(1, len(parts)):
        name = parts[i]
        if _find(f"{module}.{name}") is not None and name not in (_read(module) or _EMPTY).bindings:
            module = f"{module}.{name}"
            continue
        found = _lookup(module, name, hops)
        if found is None:
            return Canonical(dotted, "path")
        if found.kind == "module":
            module = found.dotted
            continue
        return found
    return Canonical(module, "module")


def _lookup(module: str, name: str, hops: int) -> Canonical | None:
    """``module.name`` resolved to its definition; None when not known for sure."""
    if hops > MAX_HOPS:
        return None
    source = _read(module)
    if source is None:
        return None
    bound = source.bindings.get(name, ())
    if len(bound) > 1:
        return None  # bound twice (branches, a fallback, a rebinding): not known statically
    if bound:
        return _binding(source, name, bound[0], hops)
    for star_module, level in reversed(source.stars):
        base = _absolute(source, star_module, level)
        star = _read(base) if base else None
        if star is None:
            return None  # a star import of something unreadable may provide it
        if star.computed_all:
            return None
        if star.all_names is not None and name not in star.all_names or name.startswith("_"):
            continue
        found = _lookup(base, name, hops + 1)  # type: ignore[arg-type]
        if found is not None:
            return found
    if source.is_package and _find(f"{module}.{name}") is not None:
        return Canonical(f"{module}.{name}", "module")
    return None


def _binding(source: _Module, name: str, node: ast.stmt | ast.alias, hops: int) -> Canonical | None:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return Canonical(f"{source.name}.{name}", "def")
    if isinstance(node, ast.ImportFrom):
        base = _absolute(source, node.module or "", node.level)
        alias = next(a for a in node.names if (a.asname or a.name) == name)
        if base is None:
            return None
        if base != source.name and _read(base) is not None:  # ``from pkg import x``: pkg's x, else pkg.x
            return _lookup(base, alias.name, hops + 1)
        return Canonical(f"{base}.{alias.name}", "module") if _find(f"{base}.{alias.name}") else None
    if isinstance(node, ast.Import):
        alias = next(a for a in node.names if (a.asname or a.name.partition(".")[0]) == name)
        return Canonical(alias.name if alias.asname else name, "module")
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        value = node.value
        if isinstance(value, (ast.Name, ast.Attribute)):
            return None  # an alias of something else: not followed (rare in libraries)
        return Canonical(f"{source.name}.{name}", "value")
    return None


def _absolute(source: _Module, module: str, level: int) -> str | None:
    if not level:
        return module
    package = source.name if source.is_package else source.name.rpartition(".")[0]
    parts = package.split(".")
    if level - 1 > len(parts) - 1:
        return None
    base = ".".join(parts[: len(parts) - (level - 1)])
    return f"{base}.{module}" if module else base


_EMPTY = _Module("", False, {}, (), None, False)


@functools.lru_cache(maxsize=4096)
def _find(name: str) -> importlib.machinery.ModuleSpec | None:
    """The spec of library module ``name`` found on ``sys.path``, importing nothing."""
    head = name.rpartition(".")[0]
    try:
        if not head:
            return importlib.machinery.PathFinder.find_spec(name)
        parent = _find(head)
        locations = parent.submodule_search_locations if parent is not None else None
        return importlib.machinery.PathFinder.find_spec(name, list(locations)) if locations else None
    except (ImportError, ValueError, OSError, KeyError):  # KeyError: a namespace package's
        return None  # search path asks sys.modules for a parent nothing imported


@functools.lru_cache(maxsize=1024)
def _read(name: str) -> _Module | None:
    """Module ``name``'s top-level bindings, from its source file (None: not a readable
    ``.py`` file of a library)."""
    spec = _find(name)
    origin = spec.origin if spec is not None else None
    if spec is None or not origin or not origin.endswith(".py") or not os.path.isfile(origin):
        return None
    try:
        with open(origin, "rb") as f:
            tree = ast.parse(f.read(), origin)
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None
    bindings: dict[str, list[ast.stmt | ast.alias]] = {}
    stars: list[tuple[str, int]] = []
    all_names: frozenset[str] | None = None
    computed_all = False
    for stmt in _module_level(tree.body):
        for bound, node in _bound_names(stmt):
            if bound == "*":
                stars.append((stmt.module or "", stmt.level))  # type: ignore[attr-defined]
                continue
            bindings.setdefault(bound, []).append(node)
            if bound == "__all__":
                literal = _literal_names(getattr(stmt, "value", None))
                all_names, computed_all = (literal, False) if literal is not None else (None, True)
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == "__all__":
            computed_all = True
    return _Module(
        name,
        bool(spec.submodule_search_locations),
        {k: tuple(v) for k, v in bindings.items()},
        tuple(stars),
        all_names,
        computed_all,
    )


def _module_level(body: list[ast.stmt]):
    """Every statement that runs at module level (inside ``if``/``try``/``with``/loops),
    except the body of ``if TYPE_CHECKING:`` (never runs)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            test = stmt.test
            checking = (
                isinstance(test, ast.Name)
                and test.id == "TYPE_CHECKING"
                or (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")
            )
            if not checking:
                yield from _module_level(stmt.body)
            yield from _module_level(stmt.orelse)
        elif isinstance(stmt, (ast.Try, *((ast.TryStar,) if sys.version_info >= (3, 11) else ()))):
            for block in (stmt.body, *(h.body for h in stmt.handlers), stmt.orelse, stmt.finalbody):  # type: ignore[attr-defined]
                yield from _module_level(block)
        elif isinstance(stmt, (ast.With, ast.For, ast.While)):
            yield from _module_level(stmt.body)
            yield from _module_level(getattr(stmt, "orelse", []))
        else:
            yield stmt


def _bound_names(stmt: ast.stmt):
    """(name, node) for each name ``stmt`` binds at module level (``*`` for a star import)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield stmt.name, stmt
    elif isinstance(stmt, ast.ImportFrom):
        for alias in stmt.names:
            yield (alias.asname or alias.name) if alias.name != "*" else "*", stmt
    elif isinstance(stmt, ast.Import):
        for alias in stmt.names:
            yield alias.asname or alias.name.partition(".")[0], stmt
    elif isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    yield node.id, stmt
    elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
        if not isinstance(stmt, ast.AnnAssign) or stmt.value is not None:
            yield stmt.target.id, stmt
    elif isinstance(stmt, ast.Expr):
        for node in ast.walk(stmt):
            if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
                yield node.target.id, stmt


def _literal_names(value: ast.expr | None) -> frozenset[str] | None:
    if isinstance(value, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in value.elts
    ):
        return frozenset(e.value for e in value.elts)  # type: ignore[attr-defined]
    return None
