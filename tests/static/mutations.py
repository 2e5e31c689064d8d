"""Systematic single edits of a Python source file, located with ``ast``.

Contract: :func:`edits` yields :class:`Edit` records for one file: the new source and
what kind of edit it is. Semantic edits change what the code does (a constant, an
operator, a comparison, a called attribute, a default value, a decorator argument, a
module constant, a class field); cosmetic edits never do (a comment, a docstring, a blank
line, a call re-wrapped over several lines); ``unrelated`` adds a function nothing calls.
Each edit replaces the source text of one AST node (or inserts one line), so the rest of
the file stays byte for byte; an edit whose result does not compile is not yielded.
The kinds are decided by construction here; what an edit *changes* is decided by the
oracle from the compiled code objects (:mod:`oracle_reach`). :class:`Overlay` is the
edited tree both oracles analyse (this one and the construct families of
:mod:`mutation_families`).
"""

from __future__ import annotations

import ast
import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from flydeps.static.project import FileSystemTree

SEMANTIC = (
    "constant",
    "operator",
    "compare",
    "called attribute",
    "default value",
    "decorator argument",
    "module constant",
    "class field",
)
COSMETIC = ("comment", "docstring", "blank line", "re-wrapped call")
UNRELATED = "unrelated function"

_OPS = {
    ast.Add: ast.Sub,
    ast.Sub: ast.Add,
    ast.Mult: ast.Add,
    ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
    ast.Pow: ast.Mult,
    ast.BitAnd: ast.BitOr,
    ast.BitOr: ast.BitAnd,
    ast.LShift: ast.RShift,
    ast.RShift: ast.LShift,
}
_CMPS = {
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
}


@dataclass(frozen=True)
class Edit:
    """One edit of one file: ``kind`` (see the tuples above), where, and the new bytes."""

    path: str
    kind: str
    line: int
    text: str  # what was done, for messages
    source: bytes
    statement: int  # index of the edited top-level statement (-1: appended at the end)

    @property
    def semantic(self) -> bool:
        return self.kind in SEMANTIC


class Overlay(FileSystemTree):
    """The files on disk with one file replaced in memory (the edited tree an oracle analyses)."""

    def __init__(self, path: str, data: bytes) -> None:
        super().__init__()
        self.path, self.data = posixpath.normpath(path), data

    def read(self, path: str) -> bytes:
        return self.data if posixpath.normpath(path) == self.path else super().read(path)


class _Context(ast.NodeVisitor):
    """Labels every node with the kind a constant edit inside it has."""

    def __init__(self) -> None:
        self.kind: dict[int, str] = {}
        self.docstrings: set[int] = set()
        self.in_fstring: set[int] = set()

    def mark(self, node: ast.AST, kind: str) -> None:
        for sub in ast.walk(node):
            self.kind.setdefault(id(sub), kind)

    def visit_Module(self, node: ast.Module) -> None:
        self._docstring(node)
        for stmt in node.body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                self.mark(stmt, "module constant")
        self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        self._docstring(node)
        for deco in node.decorator_list:
            self.mark(deco, "decorator argument")
        for default in [*node.args.defaults, *filter(None, node.args.kw_defaults)]:
            self.mark(default, "default value")
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._docstring(node)
        for stmt in node.body:
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
                self.mark(stmt, "class field")
        self.generic_visit(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        self.in_fstring.update(id(n) for n in ast.walk(node))

    def _docstring(self, node: ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        first = node.body[0] if node.body else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            self.docstrings.add(id(first.value))


class _Source:
    """Byte-offset arithmetic on a file's lines (``col_offset`` counts UTF-8 bytes)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.starts = [0]
        for n, byte in enumerate(data):
            if byte == 0x0A:
                self.starts.append(n + 1)

    def span(self, node: ast.AST) -> tuple[int, int]:
        start = self.starts[node.lineno - 1] + node.col_offset  # type: ignore[attr-defined]
        end = self.starts[node.end_lineno - 1] + node.end_col_offset  # type: ignore[attr-defined]
        return start, end

    def text(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.data[start:end].decode()

    def replace(self, node: ast.AST, text: str) -> bytes:
        start, end = self.span(node)
        return self.data[:start] + text.encode() + self.data[end:]

    def insert_before(self, stmt: ast.stmt, line: str) -> bytes | None:
        start = self.starts[stmt.lineno - 1]
        indent = self.data[start : start + stmt.col_offset]
        if indent.strip():  # `if x: y` or `a; b`: not at the start of a line
            return None
        return self.data[:start] + indent + line.encode() + b"\n" + self.data[start:]


def edits(path: str, data: bytes, *, per_kind: int = 6) -> Iterator[Edit]:
    """At most ``per_kind`` edits of each kind for the file (spread over the file)."""
    tree = ast.parse(data)
    context = _Context()
    context.visit(tree)
    source = _Source(data)
    top = {id(sub): i for i, stmt in enumerate(tree.body) for sub in ast.walk(stmt)}
    found: dict[str, list[Edit]] = {}
    for node in ast.walk(tree):
        for kind, text, new in _candidates(node, context, source):
            if new is not None and _compiles(new):
                found.setdefault(kind, []).append(
                    Edit(path, kind, getattr(node, "lineno", 0), text, new, top.get(id(node), -1))
                )
    unrelated = data.rstrip(b"\n") + b"\n\n\ndef _oracle_unrelated(x):\n    return x * 3 + 1\n"
    found[UNRELATED] = [Edit(path, UNRELATED, 0, "append an unused function", unrelated, -1)]
    for kind in sorted(found):
        items = sorted(found[kind], key=lambda e: (e.line, e.text))
        step = max(1, len(items) // per_kind)
        yield from items[::step][:per_kind]


def _compiles(data: bytes) -> bool:
    try:
        compile(data, "<edit>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


def _candidates(node: ast.AST, ctx: _Context, src: _Source) -> Iterator[tuple[str, str, bytes | None]]:
    if id(node) in ctx.in_fstring:
        return
    if isinstance(node, ast.Constant):
        yield from _constant(node, ctx, src)
    elif isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        new: ast.expr = ast.BinOp(node.left, _OPS[type(node.op)](), node.right)
        yield "operator", f"{src.text(node)} -> {ast.unparse(new)}", src.replace(node, f"({ast.unparse(new)})")
    elif isinstance(node, ast.Compare) and type(node.ops[0]) in _CMPS:
        new = ast.Compare(node.left, [_CMPS[type(node.ops[0])](), *node.ops[1:]], node.comparators)
        yield "compare", f"{src.text(node)} -> {ast.unparse(new)}", src.replace(node, f"({ast.unparse(new)})")
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        new_func = ast.Attribute(node.func.value, node.func.attr + "_v2", ast.Load())
        yield "called attribute", f"{node.func.attr} -> {new_func.attr}", src.replace(node.func, ast.unparse(new_func))
    if isinstance(node, ast.Call) and node.args and node.lineno == node.end_lineno:
        parts = [src.text(a) for a in (*node.args, *node.keywords)]
        wrapped = src.text(node.func) + "(\n" + "".join(f"        {p},\n" for p in parts) + ")"
        yield "re-wrapped call", f"re-wrap {src.text(node.func)}(...)", src.replace(node, wrapped)
    if isinstance(node, ast.stmt) and not isinstance(node, ast.Expr | ast.Pass) or isinstance(node, ast.Return):
        yield "comment", f"comment before line {node.lineno}", src.insert_before(node, "# an oracle comment")
        yield "blank line", f"blank line before line {node.lineno}", src.insert_before(node, "")


def _constant(node: ast.Constant, ctx: _Context, src: _Source) -> Iterator[tuple[str, str, bytes | None]]:
    value = node.value
    if id(node) in ctx.docstrings:
        yield "docstring", f"docstring at line {node.lineno}", src.replace(node, repr(cast(str, value) + " (edited)"))
        return
    kind = ctx.kind.get(id(node), "constant")
    if type(value) is int:
        new: object = value + 1
    elif type(value) is float:
        new = value * 2 + 1
    elif type(value) is str and kind != "module constant":
        new = value + "_x"
    else:
        return
    yield kind, f"{value!r} -> {new!r}", src.replace(node, f"({new!r})")
