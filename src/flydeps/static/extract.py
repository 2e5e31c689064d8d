"""Summary extraction: one file's bytes -> :class:`~flydeps.static.summary.FileSummary`.

Contract: pure function of (bytes, Python version). Never imports or executes the file:
``compile()`` builds an AST and code objects, nothing runs. Code objects give the
function digests (``_bytecode.code_digest``, identical to the live function's) and the
names each function reads with CPython's own scoping (``code_refs``: global / free /
local); the AST gives what code objects cannot: what each scope *binds* (imports, defs,
classes, literal values), decorators, class bases and ``__all__``.

Why the stdlib ``ast`` and not libcst here: the digests need CPython's code objects, so the
CPython parser runs on every file anyway; reusing its AST costs nothing extra, while a
libcst parse on top would alone exceed the cold budget (see docs/static.md).

Unknown statement types are ignored for users and raise under ``FLYDEPS_STRICT_AST=1``
(set by the test-suite), so a new Python syntax fails the tests instead of silently
losing bindings.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterator
from types import CodeType
from typing import cast

from blake3 import blake3

from .. import settings
from .._bytecode import code_digest, code_refs, is_function_code, nested_codes
from .expressions import call_args_binding, class_body_digest, class_digest, dotted, text_of, value_binding
from .summary import (
    Binding,
    ClassBinding,
    ClassInfo,
    CodeInfo,
    DefBinding,
    FileSummary,
    ImportBinding,
    LocalBinding,
    ParamBinding,
    Problem,
    ValueBinding,
)

__all__ = ["extract", "failed_summary", "longest_line", "too_complex"]

_CO_NEWLOCALS = 0x0002


def extract(source: bytes, filename: str) -> FileSummary:
    """Summarize ``source``; a syntax error gives a summary with one problem and no code."""
    digest = blake3(source).hexdigest()
    lines = source.count(b"\n") + 1
    try:
        tree = cast(ast.Module, compile(source, filename, "exec", ast.PyCF_ONLY_AST, dont_inherit=True))
        module_code = compile(tree, filename, "exec", dont_inherit=True)
    except SyntaxError as exc:
        return failed_summary(digest, lines, exc.lineno or 1, f"syntax error: {exc.msg}; fix the file")
    except ValueError as exc:  # 3.11: null bytes
        return failed_summary(digest, lines, 1, f"cannot compile: {exc}")
    except (RecursionError, MemoryError) as exc:
        return failed_summary(digest, lines, *too_complex(source, exc))
    scopes = _ScopeBuilder()
    scopes.module(tree)
    codes = tuple(_code_infos(module_code, scopes))
    return FileSummary(
        content_digest=digest,
        lines=lines,
        scope=tuple(scopes.scopes[""].items()),
        all_names=scopes.all_names,
        star_imports=tuple(scopes.star_imports),
        imports=tuple(scopes.imports),
        classes=tuple(scopes.classes),
        codes=codes,
        problems=tuple(scopes.problems),
        fallbacks=scopes.fallbacks,
        patches=tuple(scopes.patches),
        optional_imports=tuple(sorted(scopes.optional)),
    )


# Below this size a MemoryError from the compiler is its parser stack, not a memory shortage.
_SMALL_SOURCE = 1 << 20


def too_complex(source: bytes, exc: BaseException) -> tuple[int, str]:
    """(line, message) for a RecursionError or MemoryError while compiling ``source``.

    CPython raises MemoryError both for a real shortage and (3.11, without a message) when
    its parser stack overflows on deep nesting; the "too complex" text of 3.12+, or a file
    too small to exhaust memory, means nesting. The line is the longest one: where a
    generated chain of thousands of operators lives."""
    if isinstance(exc, RecursionError) or "too complex" in str(exc) or len(source) < _SMALL_SOURCE:
        return longest_line(source), "expression nested too deeply for the Python compiler; split it into smaller parts"
    size = len(source) / 1e6
    return 1, f"out of memory while compiling this {size:.1f} MB file; split it or give flydeps more memory"


def longest_line(source: bytes) -> int:
    """1-based number of the longest line of ``source``."""
    lengths = [len(line) for line in source.split(b"\n")]
    return lengths.index(max(lengths)) + 1


def failed_summary(digest: str, lines: int, line: int, message: str) -> FileSummary:
    """A summary standing for a file that could not be read; it binds nothing."""
    return FileSummary(digest, lines, (), None, (), (), (), (), (Problem(line, message),))


def _code_infos(module_code: CodeType, scopes: _ScopeBuilder) -> Iterator[CodeInfo]:
    """Every function code object in source order, with unique qualnames (``#2`` for repeats).

    Walks all code objects (class bodies and comprehensions too, to keep the numbering of
    repeated qualnames aligned with the AST walk) but yields only function codes, each
    with the function codes directly inside it, as the runtime discovery sees them."""
    counts: Counter[str] = Counter()
    stack: list[tuple[CodeType, str, str, str]] = [(module_code, "", "", "")]
    while stack:
        code, qual, prefix, parent = stack.pop()
        children: list[tuple[CodeType, str, str, str]] = []
        inner_parent = qual if is_function_code(code) else parent
        for child in nested_codes(code):
            raw = getattr(child, "co_qualname", prefix + child.co_name)
            counts[raw] += 1
            unique = raw if counts[raw] == 1 else f"{raw}#{counts[raw]}"
            sep = ".<locals>." if child.co_flags & _CO_NEWLOCALS else "."
            children.append((child, unique, raw + sep, inner_parent))
        if code is not module_code and is_function_code(code):
            nested = [c[1] for c in children if is_function_code(c[0])]
            yield _code_info(code, qual, parent, nested, scopes)
        stack.extend(reversed(children))


def _code_info(code: CodeType, qual: str, parent: str, nested: list[str], scopes: _ScopeBuilder) -> CodeInfo:
    inner = _comprehension_locals(code)
    refs = tuple(
        (r.scope, r.name, r.attrs)
        for r in code_refs(code)
        if not (r.scope == "free" and r.name in inner and r.name not in code.co_freevars)
    )
    info = scopes.defs.get(qual)
    if info is None:  # a lambda: no statement of its own
        return CodeInfo(
            qual, parent, "lambda", code.co_firstlineno, code_digest(code), refs, tuple(nested), (), (), "", ()
        )
    return info._replace(parent=parent, digest=code_digest(code), refs=refs, nested=tuple(nested))


def _comprehension_locals(code: CodeType) -> frozenset[str]:
    """Names bound by the comprehensions (and class bodies) folded into ``code``: a nested
    comprehension reads its outer comprehension's variable as a free variable of its own."""
    names: set[str] = set()
    stack = [c for c in nested_codes(code) if not is_function_code(c)]
    while stack:
        folded = stack.pop()
        names.update(folded.co_varnames, folded.co_cellvars)
        stack.extend(c for c in nested_codes(folded) if not is_function_code(c))
    return frozenset(names)


def _strict() -> bool:
    return settings.flag("FLYDEPS_STRICT_AST", False)


class _Scope:
    """One lexical scope being filled: its qualname prefix and its name -> binding table."""

    __slots__ = ("qual", "kind", "bindings", "fallbacks", "in_try_handler", "data", "data_exact")

    def __init__(self, qual: str, kind: str) -> None:
        self.qual, self.kind = qual, kind
        self.bindings: dict[str, Binding] = {}
        self.fallbacks: dict[str, Binding] = {}  # bound again by an ``except`` handler
        self.in_try_handler = False
        # Class scopes: the literal data the class dict will hold, as the runtime digests it.
        self.data: dict[str, object] = {}
        self.data_exact = True

    def child_prefix(self) -> str:
        if self.kind == "module":
            return ""
        return self.qual + (".<locals>." if self.kind == "function" else ".")

    def bind(self, name: str, binding: Binding) -> None:
        # A name bound in an ``except`` handler (``except ImportError: x = None``) is the
        # fallback: the ``try`` body's binding is the one that normally holds; the fallback is
        # kept too (it is what runs where the import fails).
        if self.in_try_handler and name in self.bindings:
            self.fallbacks.setdefault(name, binding)
            return
        self.bindings[name] = binding


class _ScopeBuilder:
    """Walks statements (not expressions) and records what every scope binds."""

    def __init__(self) -> None:
        self.scopes: dict[str, dict[str, Binding]] = {}
        self.defs: dict[str, CodeInfo] = {}
        self.classes: list[ClassInfo] = []
        self.imports: list[ImportBinding] = []
        self.star_imports: list[ImportBinding] = []
        self.all_names: tuple[str, ...] | None = None
        self.problems: list[Problem] = []
        self.fallbacks: tuple[tuple[str, Binding], ...] = ()
        self.patches: list[tuple[str, str, ValueBinding]] = []
        self.optional: set[str] = set()
        self._optional_depth = 0  # inside ``try`` bodies whose handlers catch ImportError
        self._counts: Counter[str] = Counter()
        self._parents: dict[str, str] = {}

    def module(self, tree: ast.Module) -> None:
        scope = _Scope("", "module")
        self._body(tree.body, scope)
        self.scopes[""] = scope.bindings
        self.fallbacks = tuple(scope.fallbacks.items())

    def parent_of(self, qual: str) -> str:
        """Enclosing code of a lambda/comprehension: strip the last ``.<locals>.`` part."""
        head, sep, _ = qual.rpartition(".<locals>.")
        return head if sep else ""

    def _unique(self, raw: str) -> str:
        self._counts[raw] += 1
        n = self._counts[raw]
        return raw if n == 1 else f"{raw}#{n}"

    def _body(self, body: list[ast.stmt], scope: _Scope) -> None:
        for stmt in body:
            handler = getattr(self, "_stmt_" + type(stmt).__name__, None)
            if handler is not None:
                handler(stmt, scope)
            elif _strict() and type(stmt).__name__ not in _NO_BINDINGS:
                raise NotImplementedError(f"flydeps.static: unhandled statement {type(stmt).__name__}")

    # -- definitions ---------------------------------------------------------------------
    def _stmt_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef, scope: _Scope) -> None:
        qual = self._unique(scope.child_prefix() + node.name)
        decorators = tuple(dotted(d) for d in node.decorator_list)
        # ``@v.setter def v``: decorators run before the name is rebound.
        earlier = _earlier(scope, node.name, decorators)
        scope.bind(node.name, DefBinding(node.lineno, qual))
        inner = _Scope(qual, "function")
        positional, params = _params(node.args)
        for name in params:
            inner.bind(name, ParamBinding(node.lineno, name))
        self._body(node.body, inner)
        first = positional[0] if positional else ""
        self.defs[qual] = CodeInfo(
            qual,
            scope.qual,
            "method" if scope.kind == "class" else "function",
            node.lineno,
            "",
            (),
            (),
            decorators,
            tuple(_defaults(node.args, positional)),
            first if first in ("self", "cls") else "",
            tuple(inner.bindings.items()),
            earlier,
            _annotations_digest(node),
            tuple(
                (i, call_args_binding(d))
                for i, d in enumerate(node.decorator_list)
                if isinstance(d, ast.Call) and (d.args or d.keywords)
            ),
        )

    _stmt_AsyncFunctionDef = _stmt_FunctionDef

    def _stmt_ClassDef(self, node: ast.ClassDef, scope: _Scope) -> None:
        qual = self._unique(scope.child_prefix() + node.name)
        bases = tuple(dotted(b) for b in node.bases)
        # ``class ConstantOp(ConstantOp)``: bases are evaluated before the name is rebound.
        shadowed = _earlier(scope, node.name, bases)
        scope.bind(node.name, ClassBinding(node.lineno, qual))
        inner = _Scope(qual, "class")
        self._body(node.body, inner)
        decorators = tuple(dotted(d) for d in node.decorator_list)
        body = tuple(inner.bindings.items())
        exact = inner.data_exact and not node.decorator_list and not node.keywords
        exact = exact and all(isinstance(b, (DefBinding, ValueBinding)) for _, b in body)
        data = {k: v for k, v in inner.data.items() if k != "__doc__"}
        digest = class_digest(qual, data) if exact else ""
        body_digest = class_body_digest(node)
        self.classes.append(ClassInfo(qual, node.lineno, bases, decorators, body, digest, shadowed, body_digest))

    # -- imports -------------------------------------------------------------------------
    def _stmt_Import(self, node: ast.Import, scope: _Scope) -> None:
        for alias in node.names:
            if self._optional_depth:
                self.optional.add(alias.name.partition(".")[0])
            bound = alias.name if alias.asname else alias.name.partition(".")[0]
            binding = ImportBinding(node.lineno, alias.name, "", 0, bound)
            self.imports.append(binding)
            scope.bind(alias.asname or bound, binding)

    def _stmt_ImportFrom(self, node: ast.ImportFrom, scope: _Scope) -> None:
        module = node.module or ""
        if self._optional_depth and not node.level:
            self.optional.add(module.partition(".")[0])
        for alias in node.names:
            binding = ImportBinding(node.lineno, module, alias.name, node.level, module)
            self.imports.append(binding)
            if alias.name == "*":
                self.star_imports.append(binding)
            else:
                scope.bind(alias.asname or alias.name, binding)

    # -- assignments ---------------------------------------------------------------------
    def _stmt_Assign(self, node: ast.Assign, scope: _Scope) -> None:
        for target in node.targets:
            self._assign(target, node.value, scope)

    def _stmt_AnnAssign(self, node: ast.AnnAssign, scope: _Scope) -> None:
        if scope.kind == "class":  # an annotated field (``@fx.struct``): the body digest covers it
            scope.data_exact = False
        if node.value is not None:
            self._assign(node.target, node.value, scope)

    def _stmt_AugAssign(self, node: ast.AugAssign, scope: _Scope) -> None:
        if isinstance(node.target, ast.Name) and node.target.id == "__all__" and scope.kind == "module":
            self.all_names = (self.all_names or ()) + _literal_names(node.value)
        self._targets(node.target, scope, "augmented assignment")

    def _assign(self, target: ast.expr, value: ast.expr, scope: _Scope) -> None:
        pairs = _unpack(target, value)
        if pairs is not None:  # ``A, B = 1, 2``: each name its own value
            for name_target, item in pairs:
                self._assign(name_target, item, scope)
            return
        if isinstance(target, ast.Attribute) and scope.kind == "module" and dotted(target.value):
            # ``Cls.m = transform(Cls.m)``: patches an attribute, binds no name.
            self.patches.append((dotted(target.value), target.attr, value_binding(value)))
            return
        if not isinstance(target, ast.Name):
            self._targets(target, scope, "unpacking")
            return
        if target.id == "__all__" and scope.kind == "module":
            self.all_names = _literal_names(value)
        if scope.kind == "function":  # locals: only the fact of the binding and its text matter
            scope.bind(target.id, ValueBinding(target.lineno, "", False, text_of(value), ()))
            return
        binding = value_binding(value)
        scope.bind(target.id, binding)
        if scope.kind == "class":
            if binding.literal:
                scope.data[target.id] = ast.literal_eval(value)
            else:
                scope.data_exact = False

    def _targets(self, target: ast.AST, scope: _Scope, how: str) -> None:
        """Bind the names a target stores; ``a.b = x`` and ``a[i] = x`` bind no name."""
        stack = [target]
        while stack:
            node = stack.pop()
            if isinstance(node, ast.Name):
                scope.bind(node.id, LocalBinding(node.lineno, how))
            elif isinstance(node, (ast.Tuple, ast.List)):
                stack.extend(node.elts)
            elif isinstance(node, ast.Starred):
                stack.append(node.value)
            elif isinstance(node, ast.pattern):  # ``case Point(x=a, *rest)``: captures are strings
                for name in (getattr(node, "name", None), getattr(node, "rest", None)):
                    if isinstance(name, str):
                        scope.bind(name, LocalBinding(getattr(node, "lineno", 0), how))
                stack.extend(n for n in ast.iter_child_nodes(node) if isinstance(n, ast.pattern))

    # -- compound statements: same scope, nested bodies ------------------------------------
    def _stmt_If(self, node: ast.If | ast.While | ast.For | ast.AsyncFor, scope: _Scope) -> None:
        self._body(node.body, scope)
        self._body(node.orelse, scope)

    _stmt_While = _stmt_If

    def _stmt_For(self, node: ast.For | ast.AsyncFor, scope: _Scope) -> None:
        self._targets(node.target, scope, "for loop")
        self._stmt_If(node, scope)

    _stmt_AsyncFor = _stmt_For

    def _stmt_With(self, node: ast.With | ast.AsyncWith, scope: _Scope) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self._targets(item.optional_vars, scope, "with statement")
        self._body(node.body, scope)

    _stmt_AsyncWith = _stmt_With

    def _stmt_Try(self, node: ast.Try, scope: _Scope) -> None:
        optional = any(_catches_import_error(h) for h in node.handlers)
        self._optional_depth += optional
        self._body(node.body, scope)
        self._optional_depth -= optional
        self._body(node.orelse, scope)
        previous, scope.in_try_handler = scope.in_try_handler, True
        for handler in node.handlers:
            if handler.name:
                scope.bind(handler.name, LocalBinding(handler.lineno, "except clause"))
            self._body(handler.body, scope)
        scope.in_try_handler = previous
        self._body(node.finalbody, scope)

    _stmt_TryStar = _stmt_Try

    def _stmt_Match(self, node: ast.AST, scope: _Scope) -> None:
        for case in getattr(node, "cases", ()):
            self._targets(case.pattern, scope, "match pattern")
            self._body(case.body, scope)


# Statements that bind nothing (or bind through expressions we do not model: walrus).
_NO_BINDINGS = frozenset(
    {"Return", "Delete", "Raise", "Assert", "Global", "Nonlocal", "Expr", "Pass", "Break", "Continue", "TypeAlias"}
)


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    if handler.type is None:
        return True
    types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(dotted(t).rpartition(".")[2] in _IMPORT_ERRORS for t in types)


def _earlier(scope: _Scope, name: str, texts: tuple[str, ...]) -> tuple[tuple[str, Binding], ...]:
    """The binding ``name`` has *before* a def/class statement rebinds it, if the statement's
    decorators or bases read it (``@v.setter def v``, ``class Op(Op)``)."""
    if name in scope.bindings and any(t.partition(".")[0] == name for t in texts):
        return ((name, scope.bindings[name]),)
    return ()


def _unpack(target: ast.expr, value: ast.expr) -> list[tuple[ast.expr, ast.expr]] | None:
    """Element pairs of a same-length tuple/list assignment without starred targets."""
    shapes = (ast.Tuple, ast.List)
    if not (isinstance(target, shapes) and isinstance(value, shapes)) or len(target.elts) != len(value.elts):
        return None
    if any(isinstance(e, ast.Starred) for e in (*target.elts, *value.elts)):
        return None
    return list(zip(target.elts, value.elts, strict=True))


def _params(args: ast.arguments) -> tuple[list[str], list[str]]:
    """(positional parameter names, all parameter names)."""
    positional = [a.arg for a in (*args.posonlyargs, *args.args)]
    names = list(positional)
    if args.vararg:
        names.append(args.vararg.arg)
    names.extend(a.arg for a in args.kwonlyargs)
    if args.kwarg:
        names.append(args.kwarg.arg)
    return positional, names


def _annotations_digest(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """Digest of the annotations as written ('' when the function has none)."""
    args = node.args
    every = [*args.posonlyargs, *args.args, *args.kwonlyargs, *filter(None, (args.vararg, args.kwarg))]
    parts = [f"{a.arg}:{ast.unparse(a.annotation)}" for a in every if a.annotation is not None]
    if node.returns is not None:
        parts.append(f"return:{ast.unparse(node.returns)}")
    return blake3("\0".join(["annotations", *parts]).encode()).hexdigest() if parts else ""


def _defaults(args: ast.arguments, positional: list[str]) -> Iterator[tuple[str, str, str]]:
    """(parameter, kind, payload) of each default value; see ``CodeInfo.defaults``."""
    pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
    pairs += [(a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
    for name, node in pairs:
        ref = dotted(node) if not isinstance(node, ast.Call) else ""
        if ref:
            yield name, "ref", ref
            continue
        value = value_binding(node)
        yield name, "value" if value.literal else "expr", value.digest


def _literal_names(node: ast.expr) -> tuple[str, ...]:
    if isinstance(node, (ast.List, ast.Tuple)):
        return tuple(e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))
    return ()
