"""Expressions of module and class bodies: names they read, literal values, digests.

Contract: pure functions of AST nodes (never evaluated beyond ``ast.literal_eval``). A
literal gets the runtime's value digest (``flydeps.values.snapshot.value_digest``) so a static
``BLOCK = 256`` and the live value agree; anything else gets the digest of its
normalized form (no positions) and is tagged as not evaluated by the resolver. Deep
expressions never raise: ``RecursionError`` falls back to CPython's compiler, which
nests deeper than Python-level AST walks.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from blake3 import blake3

from ..code.bytecode import code_digest
from .summary import ValueBinding

__all__ = [
    "call_args_binding",
    "class_body_digest",
    "class_digest",
    "dotted",
    "literal_digest",
    "text_of",
    "value_binding",
]

_TEXT_LIMIT = 80


def dotted(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain (a call's callee for ``a.b(...)``), else ''."""
    if isinstance(node, ast.Call):
        node = node.func
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(node.id)
    return ".".join(reversed(parts))


def text_of(node: ast.expr) -> str:
    """Short source text of an expression, for humans (``detail`` of a node)."""
    try:
        text = ast.unparse(node)
    except RecursionError:  # a very deep expression (a long chain of `+`): describe it
        return f"<deeply nested {type(node).__name__.lower()}>"
    return text if len(text) <= _TEXT_LIMIT else text[: _TEXT_LIMIT - 3] + "..."


def _expr_digest(node: ast.expr) -> str:
    """Digest of an expression's normalized form (no positions); for expressions too deep
    for ``ast.dump``, the digest of its compiled code (CPython's compiler nests deeper)."""
    try:
        dump = ast.dump(node, annotate_fields=False, include_attributes=False).encode()
    except RecursionError:
        code = compile(ast.Expression(body=node), "<expr>", "eval", dont_inherit=True)
        dump = b"code:" + code_digest(code).encode()
    return blake3(b"flydeps-expr-v1:" + dump).hexdigest()


def value_binding(value: ast.expr) -> ValueBinding:
    """A module- or class-level assignment: literal values get the runtime value digest."""
    try:
        literal = ast.literal_eval(value)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        literal = _NOT_LITERAL
    if literal is not _NOT_LITERAL:
        digest = literal_digest(literal)
        if digest is not None:
            return ValueBinding(value.lineno, digest, True, text_of(value), ())
    return ValueBinding(value.lineno, _expr_digest(value), False, text_of(value), tuple(_value_refs(value)))


_NOT_LITERAL = object()


def call_args_binding(call: ast.Call) -> ValueBinding:
    """The arguments of a decorator call (``known_block_size=[N, 1, 1]``), digested as
    written (never evaluated), with the dotted names they read."""
    args: list[ast.AST] = [*call.args, *call.keywords]
    dump = "\0".join(_dump(a) for a in args)
    refs = tuple(("", ref) for arg in args for ref in _expr_refs(arg))
    text = text_of(call)
    return ValueBinding(
        call.lineno, blake3(b"flydeps-decorator-args-v1:" + dump.encode()).hexdigest(), False, text, refs
    )


def class_body_digest(node: ast.ClassDef) -> str:
    """A class statement as written, without positions or docstrings: bases, keywords,
    decorators, fields and their annotations, and each method's signature (decorators,
    defaults, annotations: evaluated in the class body). Method bodies are nodes of their
    own; nested classes are digested the same way."""
    parts = ["class", node.name, *(_dump(e) for e in (*node.bases, *node.keywords, *node.decorator_list))]
    body = node.body[1:] if _is_docstring(node.body[0]) else node.body
    for stmt in body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            head = [*stmt.decorator_list, stmt.args, *filter(None, [stmt.returns])]
            parts.append("def " + stmt.name + ":" + "\0".join(_dump(h) for h in head))
        elif isinstance(stmt, ast.ClassDef):
            parts.append(class_body_digest(stmt))
        else:
            parts.append(_dump(stmt))
    return blake3("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _dump(node: ast.AST) -> str:
    """Normalized form of a node (no positions); very deep nodes by their compiled code."""
    try:
        return ast.dump(node, annotate_fields=False, include_attributes=False)
    except RecursionError:
        return "deep:" + _expr_digest(node) if isinstance(node, ast.expr) else "deep:" + type(node).__name__


def class_digest(qual: str, data: dict[str, object]) -> str:
    """The runtime's class digest (``discover._visit_class``): qualname + data snapshot."""
    digest = literal_digest(data)
    if digest is None:
        return ""
    return blake3("\0".join(("class", qual.split("#")[0], digest)).encode()).hexdigest()


def literal_digest(value: object) -> str | None:
    """The runtime's value digest of a literal (``flydeps.values.snapshot``), None if unavailable."""
    try:
        from ..values.snapshot import value_digest
    except ImportError:  # the runtime value snapshot is not built yet: fall back to expressions
        return None
    return value_digest(value)


def _value_refs(node: ast.expr) -> Iterator[tuple[str, str]]:
    """(label, dotted) reads of a module/class-level value; labels as in ``ValueBinding``."""
    name = dotted(node) if not isinstance(node, ast.Call) else ""
    if name:
        yield "alias", name
        return
    if isinstance(node, ast.Call) and dotted(node.func).rpartition(".")[2] == "partial" and node.args:
        yield "type", dotted(node.func)
        first = dotted(node.args[0]) if not isinstance(node.args[0], ast.Call) else ""
        if first:
            yield "func", first
        rest: list[ast.AST] = []
        named = [(f"arg{i}", a) for i, a in enumerate(node.args[1:])] + [(k.arg or "", k.value) for k in node.keywords]
        for label, arg in named:
            bound = value_binding(arg)
            if bound.literal and label:
                yield label, "<value>:" + bound.digest  # the runtime's ``partial.args``/keywords
            else:
                rest.append(arg)
    elif isinstance(node, ast.Dict):
        rest = []
        for key, value in zip(node.keys, node.values, strict=True):
            label = _item_label(key)
            ref = _element_ref(value) if label else ""
            if ref:
                yield label, ref
            else:
                rest.append(value)
    elif isinstance(node, (ast.List, ast.Tuple)):
        rest = []
        for index, value in enumerate(node.elts):
            ref = _element_ref(value)
            if ref:
                yield f"[{index}]", ref
            else:
                rest.append(value)
    else:
        rest = [node]
    for other in rest:
        yield from (("", ref) for ref in _expr_refs(other))


def _element_ref(node: ast.expr) -> str:
    """A table entry: a dotted name, or ``<lambda>@LINE`` for a lambda written in place."""
    if isinstance(node, ast.Lambda):
        return f"<lambda>@{node.lineno}"
    return dotted(node) if not isinstance(node, ast.Call) else ""


def getattr_ref(call: ast.Call) -> str:
    """``mod.name`` for ``getattr(mod, "name")`` with a constant identifier, else ''."""
    if not (isinstance(call.func, ast.Name) and call.func.id == "getattr" and len(call.args) >= 2):
        return ""
    name, obj = call.args[1], dotted(call.args[0]) if not isinstance(call.args[0], ast.Call) else ""
    if obj and isinstance(name, ast.Constant) and isinstance(name.value, str) and name.value.isidentifier():
        return f"{obj}.{name.value}"
    return ""


def _item_label(key: ast.expr | None) -> str:
    if isinstance(key, ast.Constant) and type(key.value) in (int, str):
        return f"[{key.value!r}]"
    return ""


def _expr_refs(node: ast.AST) -> Iterator[str]:
    """Dotted names an expression reads, outside lambdas and comprehensions (own code)."""
    stack: list[ast.AST] = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, (ast.Name, ast.Attribute)):
            name = dotted(current)
            if name:
                yield name
                continue
        if isinstance(current, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(current, ast.Call) and getattr_ref(current):  # ``getattr(mod, "name")``: reads ``mod.name``
            yield getattr_ref(current)
        stack.extend(reversed(list(ast.iter_child_nodes(current))))
