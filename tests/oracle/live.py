"""Mutations of live objects, found by walking an imported copy of the real-world package.

Contract
--------
:func:`live_mutations` walks the objects a module binds (functions through library
wrappers' ``__wrapped__``, FlyDSL kernels to their function, launchers to their Python
function, classes to their methods and attributes, module-level instances to their
``__dict__``, closures to their cells) and returns, for each place a value or code lives,
the mutations a user can make without editing a file: rebinding a module constant (to a
new value and to an equal copy), writing into a module dict/list, monkeypatching a function
(with an edited and with an identical copy), swapping ``__code__``, changing a default or a
keyword-only default, writing a closure cell, changing a class or instance attribute, and
changing a kernel object's own attributes (its decorator arguments).

A place is named by *steps* from its module (:func:`resolve`), so the plan can be computed
in one process and applied in another on a fresh copy of the package.
"""

from __future__ import annotations

import math
import types
from collections.abc import Iterator

from flydsl.compiler.jit_function import JitFunction
from flydsl.compiler.kernel_function import KernelFunction

from flydsl_runtime import Launcher

SCALARS = (int, float, str, bool)


def resolve(root: object, steps: tuple) -> object:
    """Follow ``steps`` (``("attr", n)``, ``("dict", n)``, ``("code",)``, ``("cell", n)``) from ``root``."""
    obj = root
    for step in steps:
        op = step[0]
        if op == "attr":
            obj = getattr(obj, step[1])
        elif op == "dict":
            obj = vars(obj)[step[1]]
        elif op == "code":  # the Python function that holds the code of a wrapper/kernel/launcher
            obj = python_function(obj)
        elif op == "cell":
            obj = cell_of(obj, step[1]).cell_contents
        else:
            raise ValueError(f"unknown step {step!r} in {steps!r}")
    return obj


def python_function(obj: object) -> types.FunctionType:
    """The innermost Python function of a library wrapper, a FlyDSL kernel or a launcher."""
    for _ in range(8):
        if isinstance(obj, Launcher):
            obj = obj.jit_function
        if isinstance(obj, JitFunction):
            obj = obj.func
        if isinstance(obj, KernelFunction):
            obj = obj._func
        wrapped = getattr(obj, "__wrapped__", None)
        if wrapped is None:
            break
        obj = wrapped
    if not isinstance(obj, types.FunctionType):
        raise TypeError(f"no Python function behind {obj!r}")
    return obj


def cell_of(fn: object, name: str) -> types.CellType:
    fn = python_function(fn)
    return fn.__closure__[fn.__code__.co_freevars.index(name)]  # type: ignore[index]


def new_value(value: object) -> object:
    """A different value of the same type (what a user edit of the constant would give)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return value + 1
    if isinstance(value, float):
        return 1.0 if value == 0.0 or math.isnan(value) else value * 2
    if isinstance(value, str):
        return {"0": "1", "1": "0"}.get(value, value + "_x")
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], int):
        return type(value)([value[0] * 2, *value[1:]])
    return None


def _is_callable_code(obj: object) -> bool:
    try:
        python_function(obj)
    except TypeError:
        return False
    return True


class _Walk:
    def __init__(self, module: types.ModuleType, short: str) -> None:
        self.module, self.short = module, short
        self.out: list[tuple] = []
        self.seen: set[int] = set()

    def emit(self, kind: str, op: str, where: str, detail: str, payload: tuple) -> None:
        self.out.append((kind, op, where, detail, payload))

    def owned(self, obj: object) -> bool:
        return getattr(obj, "__module__", None) == self.module.__name__

    def run(self) -> list[tuple]:
        for name, obj in sorted(vars(self.module).items()):
            if name.startswith("__") or isinstance(obj, types.ModuleType):
                continue
            steps = (("attr", name),)
            if isinstance(obj, type) and self.owned(obj):
                self.klass(obj, steps, name)
            elif _is_callable_code(obj) and self.owned(python_function(obj)):
                self.module_function(name, obj)
                self.function(obj, steps, name)
            elif isinstance(obj, SCALARS) or (isinstance(obj, tuple) and new_value(obj) is not None):
                self.constant("module constant", steps[:-1], name, obj)
            elif isinstance(obj, (list, dict)) and not name.startswith("oracle"):
                self.container(name, obj)
            elif self.owned(type(obj)):
                self.instance(obj, steps, name)
        return self.out

    def constant(self, kind: str, steps: tuple, name: str, value: object) -> None:
        where = ".".join([self.short, *(s[1] for s in steps), name])
        self.emit(kind, "setattr", where, f"-> {new_value(value)!r}", (steps, name, ("value", new_value(value))))
        if isinstance(value, (float, str, tuple)):
            self.emit(f"{kind}: equal value rebound", "setattr", where, "-> an equal copy", (steps, name, ("equal",)))

    def container(self, name: str, obj: object) -> None:
        where = f"{self.short}.{name}"
        if isinstance(obj, list):
            self.emit(
                "shared data: user write",
                "setitem",
                where,
                "append an item",
                ((("attr", name),), "append", ("value", "user")),
            )
        else:
            self.emit(
                "shared data: user write",
                "setitem",
                where,
                "first entry value changed",
                ((("attr", name),), "first", ("bump",)),
            )
            self.emit(
                "shared data: user write",
                "setitem",
                where,
                "unrelated entry added",
                ((("attr", name),), "oracle", ("value", 1)),
            )

    def module_function(self, name: str, obj: object) -> None:
        if isinstance(obj, Launcher):
            return  # a caller holds the launcher object: rebinding the module's name is not seen by it
        where = f"{self.short}.{name}"
        self.emit("monkeypatch", "patch", where, "edited copy", (name, "edit"))
        self.emit("monkeypatch: identical copy", "patch", where, "identical copy", (name, None))

    def function(self, obj: object, steps: tuple, where: str) -> None:
        fn = python_function(obj)
        if id(fn) in self.seen:
            return
        self.seen.add(id(fn))
        code_steps = (*steps, ("code",))
        if not isinstance(obj, (KernelFunction, JitFunction, Launcher)) and not fn.__code__.co_freevars:
            self.emit("__code__ swap", "code", f"{self.short}.{where}", "edited code", (code_steps, "edit"))
        for i, value in enumerate(fn.__defaults__ or ()):
            if isinstance(value, SCALARS):
                detail = f"default #{i} {value!r} -> {new_value(value)!r}"
                self.emit(
                    "default value",
                    "defaults",
                    f"{self.short}.{where}",
                    detail,
                    (code_steps, i, ("value", new_value(value))),
                )
        for key, value in sorted((fn.__kwdefaults__ or {}).items()):
            if isinstance(value, SCALARS):
                detail = f"keyword default {key}={value!r} -> {new_value(value)!r}"
                self.emit(
                    "default value",
                    "kwdefaults",
                    f"{self.short}.{where}",
                    detail,
                    (code_steps, key, ("value", new_value(value))),
                )
        if isinstance(obj, KernelFunction):
            self.kernel(steps, where)
        for var, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            self.cell(code_steps, where, var, cell.cell_contents)

    def cell(self, code_steps: tuple, where: str, var: str, value: object) -> None:
        if isinstance(value, SCALARS):
            detail = f"{var}: {value!r} -> {new_value(value)!r}"
            self.emit(
                "closure cell", "cell", f"{self.short}.{where}", detail, (code_steps, var, ("value", new_value(value)))
            )
        elif _is_callable_code(value) and not isinstance(value, type):
            self.function(value, (*code_steps[:-1], ("code",), ("cell", var)), f"{where}.<{var}>")

    def kernel(self, steps: tuple, where: str) -> None:
        self.emit(
            "kernel attribute",
            "setattr",
            f"{self.short}.{where}",
            "_known_block_size -> [128, 1, 1]",
            (steps, "_known_block_size", ("value", [128, 1, 1])),
        )
        self.emit(
            "kernel attribute",
            "setattr",
            f"{self.short}.{where}",
            "_name -> 'oracle_kernel'",
            (steps, "_name", ("value", "oracle_kernel")),
        )

    def klass(self, cls: type, steps: tuple, name: str) -> None:
        for attr, value in sorted(vars(cls).items()):
            if attr.startswith("__"):
                continue
            if isinstance(value, SCALARS):
                self.constant("class attribute", steps, attr, value)
            elif _is_callable_code(value):
                self.function(value, (*steps, ("dict", attr)), f"{name}.{attr}")

    def instance(self, obj: object, steps: tuple, name: str) -> None:
        for attr, value in sorted(vars(obj).items()):
            if isinstance(value, SCALARS):
                self.emit(
                    "instance attribute",
                    "setattr",
                    f"{self.short}.{name}.{attr}",
                    f"-> {new_value(value)!r}",
                    (steps, attr, ("value", new_value(value))),
                )


def live_mutations(module: types.ModuleType, short: str) -> Iterator[tuple]:
    """``(kind, op, where, detail, payload)`` for every live place of ``module`` (see above)."""
    yield from _Walk(module, short).run()
