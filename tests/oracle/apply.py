"""Apply one mutation to a fresh copy of the package, and undo it exactly.

Contract
--------
:func:`applied` is a context manager: on entry it applies the mutation to the package copy
``pkg`` (a :class:`~worker.PackageCopy`) and yields the keyword arguments the caller's next
call passes (``{}`` unless the mutation is a call-argument change); on exit it restores what
it changed: the file's exact old bytes (and reloads the module), a data file's exact old
bytes (or its absence: no module is reloaded, the trace reads it), the attribute / default /
cell / ``__code__`` / dict item it replaced, the environment variable's previous value or
absence. Variant functions (monkeypatch and ``__code__`` swap) are compiled from the
function's source with its first semantic edit applied, written to a file of their own
next to the package copy (as a user's patch module), so FlyDSL's AST rewrite reads the
variant's source, not the original file's.
"""

from __future__ import annotations

import contextlib
import math
import os
import types
from collections.abc import Iterator
from typing import cast

from live import python_function, resolve
from model import Mutation

_MISSING = object()
_variants = 0


def value_of(spec: tuple, current: object = None) -> object:
    """A value spec from the plan: ``("value", v)``, ``("equal",)``, ``("bump",)``, ``("nan",)``, ``("stream",)``."""
    kind = spec[0]
    if kind == "value":
        return float("nan") if isinstance(spec[1], float) and math.isnan(spec[1]) else spec[1]
    if kind == "equal":  # an equal value that is a different object
        # the value's own (tuple or str-constructible) type rebuilds an equal copy
        return type(current)(list(current)) if isinstance(current, tuple) else type(current)(str(current))  # type: ignore[call-arg]
    if kind == "bump":
        return current + 1 if isinstance(current, (int, float)) else current
    if kind == "nan":
        return float("nan")
    if kind == "stream":
        import flydsl.expr as fx

        return fx.Stream(None)
    raise ValueError(f"unknown value spec {spec!r}")


@contextlib.contextmanager
def env_applied(pairs: tuple) -> Iterator[None]:
    saved = [(name, os.environ.get(name)) for name, _ in pairs]
    try:
        for name, value in pairs:
            os.environ[name] = value
        yield
    finally:
        for name, old in saved:
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


@contextlib.contextmanager
def _attr(obj: object, name: str, value: object) -> Iterator[None]:
    old = vars(obj).get(name, _MISSING) if hasattr(obj, "__dict__") else getattr(obj, name)
    setattr(obj, name, value)
    try:
        yield
    finally:
        if old is _MISSING:
            delattr(obj, name)
        else:
            setattr(obj, name, old)


@contextlib.contextmanager
def _item(container: object, key: object, spec: tuple) -> Iterator[None]:
    if isinstance(container, list):
        container.append(value_of(spec))
        try:
            yield
        finally:
            container.pop()
        return
    assert isinstance(container, dict)
    if key == "first":  # the trace filled nothing here: a write the trace will not read
        key = next(iter(container)) if container else "oracle"
    old = container.get(key, _MISSING)
    container[key] = value_of(spec, old)
    try:
        yield
    finally:
        if old is _MISSING:
            del container[key]
        else:
            container[key] = old


def variant(fn: types.FunctionType, edit: object, pkg: object) -> dict:
    """Re-execute the definition of ``fn`` (with its decorators) with ``edit`` applied.

    Returns the namespace the definition bound its name in; its globals are ``fn``'s module's.
    """
    global _variants
    source, first_line = pkg.definition_source(fn)  # type: ignore[attr-defined]
    if edit is not None:
        start, end, old, new = cast(tuple[int, int, str, str], edit)
        if source[start:end] != old:
            raise AssertionError(f"variant edit {old!r} not found at {start} in {fn.__qualname__}")
        source = source[:start] + new + source[end:]
    _variants += 1
    # A real file next to the package copy, as a user's patch module would be: FlyDSL's AST
    # rewrite reads the variant's source from it, and its line numbers are the original's.
    # The module's imports, never run: CPython compiles ``mod.f()`` differently when ``mod``
    # is imported in the same file, and the copy must compile as the original did.
    imports = pkg.import_lines(fn)  # type: ignore[attr-defined]
    prologue = ["if False:\n", *(f"    {line}\n" for line in imports)] if imports else []
    path = pkg.root.parent / f"oracle_variant_{_variants}.py"  # type: ignore[attr-defined]
    path.write_text("".join(prologue) + "\n" * max(0, first_line - 1 - len(prologue)) + source)
    namespace: dict = {}
    exec(compile(path.read_text(), str(path), "exec", dont_inherit=True), fn.__globals__, namespace)
    return namespace


@contextlib.contextmanager
def _code_swap(fn: types.FunctionType, new_code: types.CodeType) -> Iterator[None]:
    old = fn.__code__
    fn.__code__ = new_code
    try:
        yield
    finally:
        fn.__code__ = old


@contextlib.contextmanager
def _defaults(fn: types.FunctionType, index: int, value: object) -> Iterator[None]:
    old = fn.__defaults__
    values = list(old or ())
    values[index] = value
    fn.__defaults__ = tuple(values)
    try:
        yield
    finally:
        fn.__defaults__ = old


@contextlib.contextmanager
def _kwdefaults(fn: types.FunctionType, key: str, value: object) -> Iterator[None]:
    old = fn.__kwdefaults__
    fn.__kwdefaults__ = {**(old or {}), key: value}
    try:
        yield
    finally:
        fn.__kwdefaults__ = old


@contextlib.contextmanager
def _cell(fn: object, var: str, value: object) -> Iterator[None]:
    inner = python_function(fn)
    cell = inner.__closure__[inner.__code__.co_freevars.index(var)]  # type: ignore[index]
    old = cell.cell_contents
    cell.cell_contents = value
    try:
        yield
    finally:
        cell.cell_contents = old


@contextlib.contextmanager
def applied(m: Mutation, pkg: object) -> Iterator[dict]:
    """Apply ``m`` to the package copy ``pkg``; yield the caller's keyword overrides; restore."""
    module = pkg.module(m.module) if m.module else None  # type: ignore[attr-defined]
    p = m.payload
    if m.op == "edit":
        with pkg.edited(m.module, *p):  # type: ignore[attr-defined]
            yield {}
    elif m.op == "reload":
        with pkg.reloaded(m.module):  # type: ignore[attr-defined]
            yield {}
    elif m.op == "env":
        with env_applied(((p[0], p[1]),)):
            yield {}
    elif m.op == "args":
        yield {p[0]: value_of(p[1])}
    elif m.op == "other":
        pkg.call_other(p[0], p[1])  # type: ignore[attr-defined]
        yield {}
    elif m.op == "data":
        with pkg.data_edited(p[0], p[1]):  # type: ignore[attr-defined]
            yield {}
    else:
        assert module is not None, f"{m.op} mutations name a module"
        with _live(m, module, p, pkg):
            yield {}


@contextlib.contextmanager
def _live(m: Mutation, module: types.ModuleType, p: tuple, pkg: object) -> Iterator[None]:
    if m.op == "setattr":
        owner = resolve(module, p[0])
        current = getattr(owner, p[1])
        with _attr(owner, p[1], value_of(p[2], current)):
            yield
    elif m.op == "setitem":
        with _item(resolve(module, p[0]), p[1], p[2]):
            yield
    elif m.op == "patch":
        original = getattr(module, p[0])
        fn = python_function(original)
        edit = pkg.first_edit(fn) if p[1] == "edit" else None  # type: ignore[attr-defined]
        with _attr(module, p[0], variant(fn, edit, pkg)[fn.__name__]):
            yield
    elif m.op == "code":
        fn = resolve(module, p[0])
        new = python_function(variant(fn, pkg.first_edit(fn), pkg)[fn.__name__])  # type: ignore[attr-defined]
        with _code_swap(fn, new.__code__):
            yield
    elif m.op == "defaults":
        fn = resolve(module, p[0])
        with _defaults(fn, p[1], value_of(p[2])):
            yield
    elif m.op == "kwdefaults":
        with _kwdefaults(resolve(module, p[0]), p[1], value_of(p[2])):
            yield
    elif m.op == "cell":
        with _cell(resolve(module, p[0]), p[1], value_of(p[2])):
            yield
    else:
        raise ValueError(f"unknown mutation op {m.op!r}")
