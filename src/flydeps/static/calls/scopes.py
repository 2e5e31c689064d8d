"""Call-graph facts, first pass: the scopes of one module and what each binds and declares.

Contract: :func:`scope_infos` is a pure function of an ``ast.Module``: the locals,
``global``/``nonlocal`` names and generator flag of every scope node, found in one walk
before the expression walk (:mod:`flydeps.static.calls.exprs`) needs them, as Python decides
locals per function before running it. :class:`Scope` is the walk's per-scope state
(straight-line versions, constants, branch and loop depth); :func:`decorator_flag` and
:func:`signature_text` are the texts of a ``sig`` fact (:mod:`flydeps.static.calls.facts`).
"""

from __future__ import annotations

import ast

__all__ = ["Scope", "ScopeInfo", "decorator_flag", "literal_key", "scope_infos", "signature_text"]


class Scope:
    """One scope being walked: its names (from :class:`ScopeInfo`) and straight-line state."""

    __slots__ = (
        "name", "kind", "parent", "locals", "globals", "nonlocals", "lambdas", "code",
        "versions", "constants", "depth", "loops", "fresh",
    )  # fmt: skip

    def __init__(self, name: str, kind: str, parent: Scope | None) -> None:
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
        # Dict displays bound to a local in straight-line code that nothing could have read
        # since (name -> the display's container): a store at a constant key replaces.
        self.fresh: dict[str, int] = {}
        # The caller of what this scope's statements call: a class body is a caller of its
        # own, named by the class (as in PyCG), though it runs in its enclosing code.
        self.code: Scope = self

    @property
    def key(self) -> str:
        """Slot namespace of the scope's variables (class bodies apart from functions)."""
        return "c:" + self.name if self.kind == "class" else self.name

    def child_prefix(self) -> str:
        if self.kind == "module":
            return ""
        return self.name + (".<locals>." if self.kind in ("function", "lambda") else ".")


class ScopeInfo:
    """What one scope binds and declares, found in one pass over the module."""

    __slots__ = ("locals", "globals", "nonlocals", "generator")

    def __init__(self) -> None:
        self.locals: set[str] = set()
        self.globals: set[str] = set()
        self.nonlocals: set[str] = set()
        self.generator = False


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def scope_infos(tree: ast.Module) -> dict[int, ScopeInfo]:
    """Locals, ``global``/``nonlocal`` names and whether it yields, per scope node (by id).

    One walk over the whole module: decorators, defaults and bases belong to the scope
    where the statement stands, bodies to the new scope. Comprehension variables count as
    locals of the enclosing scope (flow-insensitive: the same answers)."""
    infos = {id(tree): ScopeInfo()}
    stack: list[tuple[ast.AST, ast.AST]] = [(child, tree) for child in tree.body]
    while stack:
        node, owner = stack.pop()
        info = infos[id(owner)]
        if isinstance(node, _SCOPES):
            inner = infos[id(node)] = ScopeInfo()
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


def literal_key(node: ast.expr | None) -> str:
    """The key text of a constant subscript or dict key ('' when not a constant)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, bytes, bool)):
        return repr(node.value)
    return ""


def decorator_flag(decorator: ast.expr) -> str:
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


def signature_text(args: ast.arguments) -> str:
    """Parameters in order: ``p:name`` positional, ``*:name``, ``k:name`` keyword-only, ``**:name``."""
    parts = [f"p:{a.arg}" for a in (*args.posonlyargs, *args.args)]
    if args.vararg:
        parts.append(f"*:{args.vararg.arg}")
    parts.extend(f"k:{a.arg}" for a in args.kwonlyargs)
    if args.kwarg:
        parts.append(f"**:{args.kwarg.arg}")
    return ",".join(parts)
