"""Summary extraction: one file's bytes -> :class:`~flydeps.static.summary.FileSummary`.

Contract: pure function of (bytes, Python version). Never imports or executes the file:
``compile()`` builds an AST and code objects, nothing runs. Code objects give the
function digests (``_bytecode.code_digest``, identical to the live function's) and the
names each function reads with CPython's own scoping (``code_refs``: global / free /
local); the AST gives what code objects cannot: what each scope *binds* (imports, defs,
classes, literal values), decorators, class bases and ``__all__``, and, per module-level
name, every other binding that may be live at the end of the module and the statements and
functions that may decide its value (``FileSummary.alternatives``, :mod:`.moduleflow`).

Why the stdlib ``ast`` and not libcst here: the digests need CPython's code objects, so the
CPython parser runs on every file anyway; reusing its AST costs nothing extra, while a
libcst parse on top would alone exceed the cold budget (see docs/static.md).

Unknown statement types are ignored for users and raise under ``FLYDEPS_STRICT_AST=1``
(set by the test-suite), so a new Python syntax fails the tests instead of silently
losing bindings.
"""

from __future__ import annotations

import ast
import dis
from collections import Counter
from collections.abc import Iterator
from types import CodeType
from typing import cast

from blake3 import blake3

from .. import settings
from ..code.bytecode import code_digest, code_refs, is_function_code, nested_codes
from .expressions import call_args_binding, class_body_digest, class_digest, dotted, text_of, value_binding
from .moduleflow import getattr_refs, lazy_sources, statement_binding, statement_refs, walrus_names, writes
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
    scopes.finish()
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
        alternatives=scopes.alternatives,
        star_after=scopes.star_after,
        lazy=scopes.lazy,
        calls=tuple(scopes.calls),
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
    scopes.function_facts(qual, code)
    where = {r[1]: r[0] for r in refs}
    refs += tuple(  # ``getattr(mod, "name")``: the read ``mod.name``
        (where[head], head, attrs)
        for head, attrs in scopes.getattrs.get(qual, ())
        if where.get(head) in ("global", "free")
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

    __slots__ = (
        *("qual", "kind", "bindings", "fallbacks", "in_try_handler", "data", "data_exact"),
        *("alternatives", "depth", "guards", "stars", "star_at", "reads"),
    )

    def __init__(self, qual: str, kind: str) -> None:
        self.qual, self.kind = qual, kind
        self.bindings: dict[str, Binding] = {}
        self.fallbacks: dict[str, Binding] = {}  # bound again by an ``except`` handler
        self.in_try_handler = False
        # Class scopes: the literal data the class dict will hold, as the runtime digests it.
        self.data: dict[str, object] = {}
        self.data_exact = True
        # Module scope (issue 37): what else may decide each name's final value.
        self.alternatives: dict[str, list[Binding]] = {}
        self.depth = 0  # inside a compound statement: a binding here may not run
        self.guards: list[ValueBinding] = []  # conditions of the enclosing compound statements
        self.stars = 0  # star imports so far
        self.star_at: dict[str, int] = {}
        self.reads: list[tuple[str, str, Binding]] = []  # (reader, name read, its binding then)

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
            self.alternatives.setdefault(name, []).extend(self.guards)
            return
        if self.kind == "module":
            self.track(name, binding)
        self.bindings[name] = binding

    def track(self, name: str, binding: Binding, keep: bool = False) -> None:
        """A module-level binding: an unconditional one ends every earlier one (unless it
        reads it: ``keep``, ``B *= 2``); one that may not run keeps the earlier one live."""
        alternatives = self.alternatives.setdefault(name, [])
        previous = self.bindings.get(name)
        if self.depth == 0 and not keep:
            alternatives.clear()
        elif previous is not None:
            alternatives.append(previous)
        alternatives.extend(self.guards)
        self.star_at[name] = self.stars

    def effect(self, name: str, binding: ValueBinding) -> None:
        """A statement that changes what ``name`` holds without rebinding it (``T[k] = f``)."""
        if self.kind == "module" and name:
            self.alternatives.setdefault(name, []).extend([binding, *self.guards])


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
        self.calls: list[tuple[str, ValueBinding]] = []  # module-level ``f(...)`` statements
        self.optional: set[str] = set()
        self.alternatives: tuple[tuple[str, Binding], ...] = ()
        self.star_after: tuple[tuple[str, int], ...] = ()
        self.lazy: tuple[ImportBinding, ...] = ()
        self.getattrs: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
        self._writers: dict[str, list[DefBinding]] = {}
        self._decorated: list[tuple[Binding, list[str]]] = []
        self._functions: dict[str, tuple[ast.FunctionDef | ast.AsyncFunctionDef, tuple[str, ...]]] = {}
        self._module = _Scope("", "module")
        self._optional_depth = 0  # inside ``try`` bodies whose handlers catch ImportError
        self._counts: Counter[str] = Counter()
        self._parents: dict[str, str] = {}

    def module(self, tree: ast.Module) -> None:
        scope = _Scope("", "module")
        self._body(tree.body, scope)
        self.scopes[""] = scope.bindings
        self.fallbacks = tuple(scope.fallbacks.items())
        self._module = scope
        hook = next((s for s in tree.body if isinstance(s, _DEFS) and s.name == "__getattr__"), None)
        self.lazy = lazy_sources(tree, hook) if hook is not None else ()

    def function_facts(self, qual: str, code: CodeType) -> None:
        """Module-level names function ``qual`` stores into, and its ``getattr(m, "x")``
        reads; the syntax tree is walked only when its code can hold either."""
        found = self._functions.get(qual)
        if found is None or not _may_write_or_getattr(code):
            return
        node, local = found
        for name in writes(node, local):
            self._writers.setdefault(name, []).append(DefBinding(node.lineno, qual))
        refs = getattr_refs(node) if "getattr" in code.co_names else []
        if refs:
            self.getattrs[qual] = refs

    def finish(self) -> None:
        """Bindings besides the last one (see :mod:`.moduleflow`), once every code is read."""
        scope = self._module
        alternatives = scope.alternatives
        for reader, name, then in scope.reads:  # ``INV = 1 / SCALE`` before ``SCALE = 4.0``
            if scope.bindings.get(name) is not then and then not in alternatives.get(name, ()):
                alternatives.setdefault(reader, []).append(then)
        for name, functions in self._writers.items():
            if name not in scope.bindings:
                continue
            alternatives.setdefault(name, []).extend(functions)
            for binding, heads in self._decorated:  # a def a registering decorator inserts
                hooks = [scope.bindings.get(h) for h in heads]
                quals = [h.qualname for h in hooks if isinstance(h, DefBinding)]
                if any(f.qualname == q or f.qualname.startswith(q + ".<locals>.") for f in functions for q in quals):
                    alternatives[name].append(binding)
        later = {n: c for n, c in scope.star_at.items() if c < scope.stars and n in scope.bindings}
        for name in later:  # a later ``from x import *`` may rebind it: keep it as an alternative
            alternatives.setdefault(name, []).append(scope.bindings[name])
        self.star_after = tuple(sorted(later.items()))
        self.alternatives = tuple(
            (name, b)
            for name, items in alternatives.items()
            for b in dict.fromkeys(items)
            if b is not scope.bindings.get(name)
        )

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
            if scope.kind == "module" and scope.depth == 0:
                self._walrus(stmt, scope)
            handler = getattr(self, "_stmt_" + type(stmt).__name__, None)
            if handler is not None:
                handler(stmt, scope)
            elif _strict() and type(stmt).__name__ not in _NO_BINDINGS:
                raise NotImplementedError(f"flydeps.static: unhandled statement {type(stmt).__name__}")

    def _walrus(self, stmt: ast.stmt, scope: _Scope) -> None:
        """``if (v := os.environ.get("X")) is not None:``: module-level names ``:=`` binds."""
        if isinstance(stmt, (*_DEFS, ast.ClassDef)):
            return
        for name, node in walrus_names(stmt):
            scope.depth += 1
            scope.bind(name, statement_binding(node.lineno, "walrus", [node.value]))
            scope.depth -= 1

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
        self._functions[qual] = (node, tuple(inner.bindings))
        if scope.kind == "module" and node.decorator_list:
            heads = [dotted(d).partition(".")[0] for d in node.decorator_list]
            self._decorated.append((DefBinding(node.lineno, qual), heads))
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
            _default_refs(node.args, positional),
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
        values = [k.value for k in node.keywords] + [
            s.value
            for s in node.body
            if isinstance(s, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and s.value is not None
        ]
        refs = tuple(r for r in statement_refs(values) if r.partition(".")[0] not in inner.bindings)
        keyword_refs = statement_refs([k.value for k in node.keywords])
        head = [*node.decorator_list, *node.keywords]
        head_digest = statement_binding(node.lineno, "class", head).digest if head else ""
        if scope.kind == "module" and node.decorator_list:
            self._decorated.append(
                (ClassBinding(node.lineno, qual), [dotted(d).partition(".")[0] for d in node.decorator_list])
            )
        info = ClassInfo(
            qual, node.lineno, bases, decorators, body, digest, shadowed, body_digest, refs, keyword_refs, head_digest
        )
        self.classes.append(info)

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
                scope.stars += 1
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
        if scope.kind == "module" and isinstance(node.target, ast.Name):  # ``B *= 2`` reads the earlier B
            name = node.target.id
            step = ast.BinOp(ast.Name(name, ast.Load()), node.op, node.value)
            binding = statement_binding(node.lineno, "augmented assignment", [step], skip=name)
            scope.track(name, binding, keep=True)
            scope.bindings[name] = binding
            return
        if scope.kind == "module" and isinstance(node.target, (ast.Subscript, ast.Attribute)):
            head = dotted(node.target.value).partition(".")[0]
            scope.effect(head, statement_binding(node.lineno, "augmented item", [node.target, node.value]))
            return
        self._targets(node.target, scope, "augmented assignment")

    def _stmt_Expr(self, node: ast.Expr, scope: _Scope) -> None:
        """Module level: ``T.update(...)`` changes ``T``; ``setattr(Cls, "X", v)`` patches ``Cls``;
        another call by name is recorded (``calls``) for the registries its callee fills."""
        call = node.value
        if scope.kind != "module" or not isinstance(call, ast.Call):
            return
        if isinstance(call.func, ast.Name) and call.func.id == "setattr" and len(call.args) == 3:
            owner, attr, value = call.args
            if dotted(owner) and isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                self.patches.append((dotted(owner), attr.value, value_binding(value)))
        elif isinstance(call.func, ast.Attribute) and call.func.attr in _MUTATING_CALLS:
            head = dotted(call.func.value).partition(".")[0]
            scope.effect(head, statement_binding(node.lineno, "call", [call]))
        elif dotted(call.func):  # ``add("prod", fn)``: a registry ``add`` fills may hold ``fn``
            self.calls.append((dotted(call.func), statement_binding(node.lineno, "call", [call])))

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
        if isinstance(target, ast.Subscript) and scope.kind == "module":  # ``T[k] = f`` fills T
            head = dotted(target.value).partition(".")[0]
            scope.effect(head, statement_binding(target.lineno, "item", [target.slice, value]))
            return
        if not isinstance(target, ast.Name):
            self._unpacking(target, value, scope)
            return
        if target.id == "__all__" and scope.kind == "module":
            self.all_names = _literal_names(value)
        if scope.kind == "function":  # locals: only the fact of the binding and its text matter
            scope.bind(target.id, ValueBinding(target.lineno, "", False, text_of(value), ()))
            return
        binding = value_binding(value)
        reads = statement_refs([value]) if not binding.literal else ()
        binding = _with_inner_refs(binding, reads, scope)
        if scope.kind == "module":
            for head in {ref.partition(".")[0] for ref in reads}:
                if head in scope.bindings:
                    scope.reads.append((target.id, head, scope.bindings[head]))
        scope.bind(target.id, binding)
        if scope.kind == "class":
            if binding.literal:
                scope.data[target.id] = ast.literal_eval(value)
            else:
                scope.data_exact = False

    def _unpacking(self, target: ast.expr, value: ast.expr, scope: _Scope) -> None:
        """``A, *REST = value``: in a module or class body each name is the whole value's
        statement (its names are followed); in a function, a local like any other."""
        if scope.kind == "function":
            self._targets(target, scope, "unpacking")
            return
        binding = statement_binding(target.lineno, "unpacking", [value])
        scope.data_exact = False
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                scope.bind(node.id, binding)

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
    def _guarded(self, scope: _Scope, what: str, nodes: list[ast.AST], bodies: list[list[ast.stmt]]) -> None:
        """Bodies that may or may not run, under a condition (``if``/``while`` test, loop
        iterable, ``match`` subject and patterns): a binding in them keeps the earlier one
        live, and the condition decides which one is."""
        guard = statement_binding(getattr(nodes[0], "lineno", 0), what, nodes) if nodes else None
        scope.depth += 1
        scope.guards.extend([guard] if guard else [])
        for body in bodies:
            self._body(body, scope)
        if guard:
            scope.guards.pop()
        scope.depth -= 1

    def _stmt_If(self, node: ast.If | ast.While, scope: _Scope) -> None:
        self._guarded(scope, type(node).__name__.lower(), [node.test], [node.body, node.orelse])

    _stmt_While = _stmt_If

    def _stmt_For(self, node: ast.For | ast.AsyncFor, scope: _Scope) -> None:
        scope.depth += 1
        self._targets(node.target, scope, "for loop")
        scope.depth -= 1
        self._guarded(scope, "for", [node.target, node.iter], [node.body, node.orelse])

    _stmt_AsyncFor = _stmt_For

    def _stmt_With(self, node: ast.With | ast.AsyncWith, scope: _Scope) -> None:
        for item in node.items:
            if item.optional_vars is not None:
                self._targets(item.optional_vars, scope, "with statement")
        self._guarded(scope, "with", [item.context_expr for item in node.items], [node.body])

    _stmt_AsyncWith = _stmt_With

    def _stmt_Try(self, node: ast.Try, scope: _Scope) -> None:
        optional = any(_catches_import_error(h) for h in node.handlers)
        self._optional_depth += optional
        self._guarded(scope, "try", [], [node.body])
        self._optional_depth -= optional
        self._guarded(scope, "try", [], [node.orelse])
        previous, scope.in_try_handler = scope.in_try_handler, True
        scope.depth += 1
        for handler in node.handlers:
            if handler.name:
                scope.bind(handler.name, LocalBinding(handler.lineno, "except clause"))
            self._body(handler.body, scope)
        scope.depth -= 1
        scope.in_try_handler = previous
        self._body(node.finalbody, scope)

    _stmt_TryStar = _stmt_Try

    def _stmt_Match(self, node: ast.AST, scope: _Scope) -> None:
        cases = getattr(node, "cases", ())
        heads = [getattr(node, "subject"), *(c.pattern for c in cases), *(c.guard for c in cases if c.guard)]
        scope.depth += 1
        for case in cases:
            self._targets(case.pattern, scope, "match pattern")
        scope.depth -= 1
        self._guarded(scope, "match", heads, [case.body for case in cases])


# Statements that bind nothing (walrus targets: see ``_ScopeBuilder._walrus``).
_NO_BINDINGS = frozenset(
    {"Return", "Delete", "Raise", "Assert", "Global", "Nonlocal", "Expr", "Pass", "Break", "Continue", "TypeAlias"}
)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef)
# Method calls at module level that change the object they are called on (a registry).
_MUTATING_CALLS = frozenset({"update", "setdefault", "append", "extend", "add", "insert", "__setitem__", "register"})


_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})


_STORES = frozenset({dis.opmap["STORE_SUBSCR"], dis.opmap["STORE_GLOBAL"]})


def _may_write_or_getattr(code: CodeType) -> bool:
    """Whether ``code`` (or a comprehension in it) may store into a module name, change a
    table (``T.update``) or call ``getattr``: the cheap test before walking its syntax."""
    stack = [code]
    while stack:
        current = stack.pop()
        names = current.co_names
        if "getattr" in names or not _MUTATING_CALLS.isdisjoint(names) or not _STORES.isdisjoint(current.co_code[::2]):
            return True
        stack.extend(c for c in nested_codes(current) if not is_function_code(c))
    return False


def _with_inner_refs(binding: ValueBinding, reads: tuple[str, ...], scope: _Scope) -> ValueBinding:
    """A module or class value also reads what its comprehensions and lambdas read
    (``{d: _bits(d) for d in NAMES}``; ``reads``: every name it reads), minus the class
    body's own names."""
    if binding.literal or scope.kind == "function":
        return binding
    have = {text for _, text in binding.refs}
    local = scope.bindings if scope.kind == "class" else {}
    extra = [r for r in reads if r not in have and r.partition(".")[0] not in local]
    return binding._replace(refs=binding.refs + tuple(("", r) for r in extra)) if extra else binding


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


def _default_pairs(args: ast.arguments, positional: list[str]) -> list[tuple[str, ast.expr]]:
    """(parameter, default expression) of each parameter that has a default."""
    pairs = list(zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True))
    pairs += [(a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None]
    return pairs


def _default_refs(args: ast.arguments, positional: list[str]) -> tuple[tuple[str, str], ...]:
    """(parameter, dotted name) read by each computed default (``off=_helper()``)."""
    return tuple(
        (param, ref)
        for param, default in _default_pairs(args, positional)
        if isinstance(default, ast.Call) or not dotted(default)
        for ref in statement_refs([default])
    )


def _defaults(args: ast.arguments, positional: list[str]) -> Iterator[tuple[str, str, str]]:
    """(parameter, kind, payload) of each default value; see ``CodeInfo.defaults``."""
    for name, node in _default_pairs(args, positional):
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
