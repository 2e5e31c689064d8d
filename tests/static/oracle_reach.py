"""The oracle's own answer to "can this root's build run that code?", from code objects.

Contract: independent of flydeps' analyzer (no summaries, no graph, no resolver). The
package is imported for real, so Python's import system decides what each module-level
name is bound to; what code *runs* is read from the code objects compiled from the files:

* a unit is a function code object (``("code", module, key)``, ``key`` its qualified name,
  ``#n`` for repeats in source order) or a module-level name (``("global", module, name)``:
  the statement binding it, including decorators, defaults and class bodies);
* a root can run its own code, every enclosing function (a nested kernel exists only once
  its builder ran), the statement that defines it, and, transitively, every function code
  nested in a code it can run, and whatever any name a code reads (``co_names``, also the
  attribute names: an over-approximation) is bound to in the live module namespace
  (functions and their ``__wrapped__``/defaults, classes with every method of their MRO,
  modules with the names the code reads from them, containers with their items, library
  wrapper objects with the functions they hold);
* :func:`changed_units` compiles a file before and after an edit and names the units
  whose own code objects differ (comprehensions and class bodies belong to their
  enclosing function, or to the top-level statement at module level).
"""

from __future__ import annotations

import ast
import dis
import functools
import importlib
import sys
from collections.abc import Iterable, Iterator
from types import CodeType, FunctionType, ModuleType
from typing import cast

Unit = tuple[str, str, str]
_NEWLOCALS = 0x0002
_COMPREHENSIONS = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"})


def _is_function(code: CodeType) -> bool:
    return bool(code.co_flags & _NEWLOCALS) and code.co_name not in _COMPREHENSIONS


def numbered_codes(module_code: CodeType) -> Iterator[tuple[str, CodeType, str]]:
    """(key, code, key of the enclosing code or '' for the module) for every nested code
    object, in source order; repeated qualified names get ``#2``, ``#3``..."""
    counts: dict[str, int] = {}
    stack: list[tuple[CodeType, str]] = [(module_code, "")]
    out = []
    while stack:
        code, key = stack.pop()
        for child in code.co_consts:
            if isinstance(child, CodeType):
                counts[child.co_qualname] = counts.get(child.co_qualname, 0) + 1
                n = counts[child.co_qualname]
                child_key = child.co_qualname if n == 1 else f"{child.co_qualname}#{n}"
                out.append((child_key, child, key))
                stack.append((child, child_key))
    yield from sorted(out, key=lambda item: (item[1].co_firstlineno, item[0]))


def _signature(code: CodeType) -> tuple:
    """A code object's own behaviour: instructions, names and constants (nested code
    objects by qualified name: they are compared on their own)."""
    consts = tuple(
        ("code", c.co_qualname) if isinstance(c, CodeType) else (type(c).__name__, repr(c)) for c in code.co_consts
    )
    return (
        code.co_code,
        code.co_names,
        code.co_varnames,
        code.co_freevars,
        code.co_cellvars,
        code.co_argcount,
        code.co_kwonlyargcount,
        code.co_posonlyargcount,
        code.co_flags,
        consts,
    )


def _compile(data: bytes, path: str) -> CodeType:
    return compile(data, path, "exec", dont_inherit=True)


def changed_units(module: str, path: str, before: bytes, after: bytes, statement: int, line: int) -> set[Unit]:
    """The units whose code objects differ between the two versions of the file."""
    old = {k: (c, p) for k, c, p in numbered_codes(_compile(before, path))}
    new = {k: (c, p) for k, c, p in numbered_codes(_compile(after, path))}
    units: set[Unit] = set()
    module_level = _signature(_compile(before, path)) != _signature(_compile(after, path))
    for key in set(old) | set(new):
        if key in old and key in new and _signature(old[key][0]) == _signature(new[key][0]):
            continue
        table = new if key in new else old
        owner = key
        while owner and not _is_function(table[owner][0]):
            owner = table[owner][1]
        if owner:
            units.add(("code", module, owner))
        else:
            module_level = True
    if module_level and statement >= 0:
        stmt = ast.parse(before).body[statement]
        inner = (
            [s for s in stmt.body if s.lineno <= line <= (s.end_lineno or s.lineno)]
            if isinstance(stmt, ast.ClassDef)
            else []
        )
        if inner:  # a class field or a method's decorators/defaults: that class attribute
            name_of = cast(ast.ClassDef, stmt).name  # ``inner`` is only non-empty for a class
            units.update(("global", module, f"{name_of}.{name}") for name in bound_names(inner[0]))
        else:
            units.update(("global", module, name) for name in bound_names(stmt))
    return units


def bound_names(stmt: ast.stmt) -> set[str]:
    """Module-level names a top-level statement binds (or patches: ``Cls.m = ...``)."""
    names: set[str] = set()
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).partition(".")[0] for a in node.names)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name):
                names.add(base.id)
        stack.extend(ast.iter_child_nodes(node))
    return names


def _imports(module: str, path: str) -> Iterator[tuple[tuple[str, str], tuple[str, str]]]:
    """((module, bound name), (source module, name)) of the module-level ``from`` imports;
    a star import is ``(module, "*")``."""
    with open(path, "rb") as handle:
        tree = ast.parse(handle.read())
    package = module if path.endswith("__init__.py") else module.rpartition(".")[0]
    for stmt in tree.body:
        if not isinstance(stmt, ast.ImportFrom):
            continue
        base = package.split(".")[: len(package.split(".")) - stmt.level + 1] if stmt.level else []
        source = ".".join([*base, *([stmt.module] if stmt.module else [])])
        for alias in stmt.names:
            yield (module, alias.asname or alias.name), (source, alias.name)


def _statement_reads(module: str, path: str) -> Iterator[tuple[tuple[str, str], tuple[str, ...]]]:
    """((module, bound name), names the top-level statement reads outside function bodies)."""
    with open(path, "rb") as handle:
        tree = ast.parse(handle.read())
    for stmt in tree.body:
        reads: list[str] = []
        stack: list[ast.AST] = [stmt]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                reads.append(node.id)
            for child in ast.iter_child_nodes(node):
                inside_body = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and child in node.body
                if not inside_body:
                    stack.append(child)
        for name in bound_names(stmt):
            yield (module, name), tuple(reads)


def _function_imports(module: str, code: CodeType) -> Iterator[tuple[str, str]]:
    """(module, name) of ``from X import name`` statements in ``code`` (relative to ``module``)."""
    level, target = 0, ""
    consts: list[object] = []
    for ins in dis.get_instructions(code):
        if ins.opname == "IMPORT_NAME":
            level = consts[-2] if len(consts) >= 2 and isinstance(consts[-2], int) else 0
            package = module.split(".")[: len(module.split(".")) - level] if level else []
            target = ".".join([*package, *([ins.argval] if ins.argval else [])])
        elif ins.opname == "IMPORT_FROM" and target:
            yield target, ins.argval
        consts = [*consts, ins.argval] if ins.opname == "LOAD_CONST" else []


class Reach:
    """Units each root of a package can run (see the module docstring)."""

    def __init__(self, packages: Iterable[str], files: dict[str, str]) -> None:
        """``packages``: top-level names of the project; ``files``: module -> source path."""
        self.packages = tuple(packages)
        self.files = files
        self.codes: dict[str, dict[str, CodeType]] = {}
        self.parents: dict[str, dict[str, str]] = {}
        self.by_line: dict[str, dict[tuple[str, int], str]] = {}
        for module, path in files.items():
            with open(path, "rb") as handle:
                code = _compile(handle.read(), path)
            table = list(numbered_codes(code))
            self.codes[module] = {k: c for k, c, _ in table}
            self.parents[module] = {k: p for k, _, p in table}
            self.by_line[module] = {(c.co_qualname, c.co_firstlineno): k for k, c, _ in table}
        self.aliases = {key: value for module, path in files.items() for key, value in _imports(module, path)}
        self.reads = {key: value for module, path in files.items() for key, value in _statement_reads(module, path)}
        self._holders: dict[int, list[Unit]] | None = None

    def add_global(self, seen: set[Unit], work: list, module: str, name: str) -> None:
        """A module-level name read: the statement binding it (and what that statement
        reads: decorators, defaults, bases, the assigned expression), and the statement it
        was imported from (``from .mem import TABLE``, ``from .reduce import *``)."""
        unit: Unit = ("global", module, name)
        while unit not in seen:
            seen.add(unit)
            live = sys.modules.get(unit[1])
            for read in self.reads.get((unit[1], unit[2]), ()):
                if live is not None and read in vars(live):
                    self.add_global(seen, work, unit[1], read)
                    if not isinstance(vars(live)[read], type):  # a base class: its MRO decides
                        work.append((vars(live)[read], frozenset()))
            source = self.aliases.get((unit[1], unit[2])) or self.aliases.get((unit[1], "*"))
            if source is None or (
                source[1] == "*" and unit[2] not in vars(sys.modules.get(source[0], ModuleType("?")))
            ):
                return
            unit = ("global", source[0], unit[2] if source[1] == "*" else source[1])

    def holders(self, value: object) -> list[Unit]:
        """The module-level names bound to this very object (not for interned scalars)."""
        if self._holders is None:
            self._holders = {}
            for module in self.files:
                for name, held in vars(importlib.import_module(module)).items():
                    if not isinstance(held, (int, float, str, bytes, bool, type(None), ModuleType)):
                        self._holders.setdefault(id(held), []).append(("global", module, name))
        return self._holders.get(id(value), [])

    def _project(self, module: object) -> bool:
        return isinstance(module, str) and module.partition(".")[0] in self.packages and module in self.files

    @functools.lru_cache(maxsize=None)  # noqa: B019  (one instance per test module)
    def of_root(self, root: str) -> frozenset[Unit]:
        module, _, rest = root.partition(":")
        qual, _, owner = rest.partition("@")
        seen: set[Unit] = set()
        work: list[tuple[object, frozenset[str]]] = []
        self._owner: type | None = None  # ``self.x`` of the root's methods resolves on it
        if owner:
            owner_module, _, owner_qual = owner.partition(":")
            self._owner = self._live(owner_module, owner_qual)  # type: ignore[assignment]
            work.append((self._owner, frozenset()))
        self._code_unit(module, qual, seen, work)
        self._drain(seen, work)
        return frozenset(seen)

    def _live(self, module: str, qual: str) -> object:
        obj: object = importlib.import_module(module)
        for part in qual.split("."):
            obj = getattr(obj, part)
        return obj

    def _code_unit(self, module: str, key: str, seen: set[Unit], work: list) -> None:
        """A code that runs, the codes enclosing it and the statement defining it."""
        while key:
            if ("code", module, key) in seen:
                return
            seen.add(("code", module, key))
            top = key.split(".<locals>.")[0].partition("#")[0]  # the statement defining it
            seen.add(("global", module, top))
            seen.add(("global", module, top.split(".")[0]))
            code = self.codes[module].get(key)
            if code is None:
                return
            names = set(code.co_names)
            stack = [code]
            while stack:  # comprehensions and class bodies run with their code
                for child in stack.pop().co_consts:
                    if not isinstance(child, CodeType):
                        continue
                    child_key = self.by_line[module].get((child.co_qualname, child.co_firstlineno), "")
                    if _is_function(child):
                        work.append((("code-key", module, child_key), frozenset()))
                    else:
                        names.update(child.co_names)
                        stack.append(child)
            live = sys.modules.get(module) or importlib.import_module(module)
            for target, name in _function_imports(module, code):  # ``from .mem import ALIGN`` in a function
                found = sys.modules.get(target)
                if found is not None and name in vars(found):
                    self.add_global(seen, work, target, name)
                    work.append((vars(found)[name], frozenset()))
            for name in names:
                if name in vars(live):
                    self.add_global(seen, work, module, name)
                    work.append((vars(live)[name], frozenset(names)))
            cls = vars(live).get(key.split(".")[0]) if "." in top else None
            if isinstance(cls, type):  # a method: ``self.x`` on the owner, else on its class
                owner = self._owner if self._owner is not None and issubclass(self._owner, cls) else cls
                work.append((("mro", owner) if "super" in names else ("self", owner), frozenset(names)))
            key = self.parents[module].get(key, "")
            while key and not _is_function(self.codes[module][key]):  # a class body: not run by this root
                key = self.parents[module].get(key, "")

    def _drain(self, seen: set[Unit], work: list[tuple[object, frozenset[str]]]) -> None:
        visited: set[tuple[int, frozenset[str]]] = set()
        keep: list[object] = []
        while work:
            value, names = work.pop()
            if isinstance(value, tuple) and len(value) == 3 and value[0] == "code-key":
                if value[2]:
                    self._code_unit(value[1], value[2], seen, work)
                continue
            if isinstance(value, tuple) and len(value) == 2 and value[0] == "mro":  # super(): every class's own
                for klass in value[1].__mro__:
                    work.extend((attr, frozenset()) for attr in self._attributes(klass, klass, seen))
                continue
            if isinstance(value, tuple) and len(value) == 2 and value[0] == "self":
                # ``self.x`` in a method: the instance exists already (its constructor ran
                # before the build); the attributes the code names, as the MRO resolves them.
                first = {n: k for k in reversed(value[1].__mro__) for n in vars(k) if n in names}
                for klass in value[1].__mro__:
                    work.extend((attr, frozenset()) for attr in self._attributes(klass, first, seen))
                continue
            mark = (id(value), names if isinstance(value, ModuleType) else frozenset())
            if mark in visited:
                continue
            visited.add(mark)
            keep.append(value)
            for unit in self.holders(value):
                self.add_global(seen, work, unit[1], unit[2])
            work.extend((v, names) for v in self._inside(value, names, seen))
            if isinstance(value, FunctionType):
                self._function(value, seen, work)

    def _function(self, fn: FunctionType, seen: set[Unit], work: list) -> None:
        module = fn.__module__
        if not self._project(module):
            return
        key = self.by_line[module].get((fn.__code__.co_qualname, fn.__code__.co_firstlineno))
        if key is None:  # code rewritten after the class statement (AST transforms): by name
            key = next((k for (q, _), k in self.by_line[module].items() if q == fn.__qualname__), None)
        if key is not None:
            self._code_unit(module, key, seen, work)

    def _attributes(self, klass: type, first: object, seen: set[Unit]) -> Iterator[object]:
        """The attributes ``klass`` defines that lookups reach (``first``: name -> the class
        the MRO finds it on, or one class to take all of its own)."""
        if not self._project(klass.__module__):
            return
        top = klass.__qualname__.split(".")[0]
        seen.add(("global", klass.__module__, top))
        for name, attr in vars(klass).items():
            if first is klass or (isinstance(first, dict) and first.get(name) is klass):
                seen.add(("global", klass.__module__, f"{klass.__qualname__}.{name}"))
                yield attr

    def _inside(self, value: object, names: frozenset[str], seen: set[Unit]) -> Iterator[object]:
        """What a reached value can hand to the code that reads it."""
        if isinstance(value, FunctionType):
            if not self._project(value.__module__):
                yield from filter(None, [getattr(value, "__wrapped__", None)])
                return
            yield from (value.__defaults__ or ())
            yield from (value.__kwdefaults__ or {}).values()
            if hasattr(value, "__wrapped__"):
                yield value.__wrapped__
        elif isinstance(value, ModuleType):
            if self._project(value.__name__):
                for name in names & set(vars(value)):
                    self.add_global(seen, [], value.__name__, name)
                    yield vars(value)[name]
        elif isinstance(value, type):  # each attribute as the MRO resolves it
            first: dict[str, type] = {}
            for klass in value.__mro__:
                for name in vars(klass):
                    first.setdefault(name, klass)
            for klass in value.__mro__:
                yield from self._attributes(klass, first, seen)
        elif isinstance(value, (list, tuple, set, frozenset)):
            yield from value
        elif isinstance(value, dict):
            yield from value.values()
        elif isinstance(value, (staticmethod, classmethod)):
            yield value.__func__
        elif isinstance(value, property):
            yield from filter(None, (value.fget, value.fset, value.fdel))
        elif isinstance(value, functools.partial):
            yield from (value.func, *value.args, *value.keywords.values())
        else:  # wrappers (lru_cache, FlyDSL kernels and launchers), instances
            if self._project(type(value).__module__):
                yield type(value)
            attributes = vars(value).values() if hasattr(value, "__dict__") else ()
            yield from (v for v in attributes if isinstance(v, (FunctionType, type)) or hasattr(v, "__wrapped__"))
            wrapped = getattr(value, "__wrapped__", None)
            if wrapped is not None:
                yield wrapped
