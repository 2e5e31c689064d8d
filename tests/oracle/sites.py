"""Source edits generated from a module's syntax tree (the oracle's edit + reload mutations).

Contract
--------
:func:`source_sites` walks one module's AST and returns every single-span edit of the kinds
below as a :class:`Site` (a character span of the file, the exact old text and the new
text), so applying it is a string replacement and restoring it is writing the old bytes
back. Nothing is hand-listed: a new helper in the example package gets its mutations.

* cosmetic (IR must not change): a comment line, a docstring edit or a new docstring, a blank
  line, in every function; a new unrelated function appended to the module;
* semantic: every numeric literal and every compared / passed string literal in a function
  body, every arithmetic or ``==``/``!=`` operator, the names of the first two keyword
  arguments of a call, every literal in a decorator call or a default, every literal module
  constant and class attribute, a ``name=`` argument added to a bare ``@flyc.kernel``;
* edits inside a function no other code names are labelled ``unrelated function``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

_OPERATOR = {
    ast.Add: ("+", "-"),
    ast.Sub: ("-", "+"),
    ast.Mult: ("*", "+"),
    ast.Div: ("/", "*"),
    ast.FloorDiv: ("//", "*"),
}
_COMPARE = {ast.Eq: ("==", "!="), ast.NotEq: ("!=", "==")}


@dataclass(frozen=True)
class Site:
    kind: str
    line: int
    detail: str
    start: int  # character offsets into the file text
    end: int
    old: str
    new: str


class _Text:
    """Line/column <-> character offsets of one file (ASCII sources)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0]
        for line in text.splitlines(keepends=True):
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, line: int, col: int) -> int:
        return self.starts[line - 1] + col

    def span(self, node: ast.AST) -> tuple[int, int]:
        # Only positioned nodes (expressions, statements, keywords) are passed here.
        return self.offset(node.lineno, node.col_offset), self.offset(node.end_lineno, node.end_col_offset)  # type: ignore[attr-defined]

    def line_start(self, line: int) -> int:
        return self.starts[line - 1]

    def indent_of(self, line: int) -> str:
        raw = self.text[self.starts[line - 1] : self.starts[line]]
        return raw[: len(raw) - len(raw.lstrip())]


def _new_literal(value: object) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int):
        return repr(value + 1)
    if isinstance(value, float):
        return repr(value * 2 if value else 1.0)
    if isinstance(value, str):
        return repr({"0": "1", "1": "0"}.get(value, value + "_x"))
    return None


def used_names(trees: list[ast.AST]) -> set[str]:
    """Every name any module of the package loads, as a name, an attribute or an import."""
    names: set[str] = set()
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
                names.add(node.id)
            elif isinstance(node, ast.Attribute):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add(node.name)
    return names


def _own_nodes(fn: ast.AST) -> list[ast.AST]:
    """Nodes of a function body, not descending into nested functions or classes."""
    out: list[ast.AST] = []
    todo = list(reversed(fn.body))  # type: ignore[attr-defined]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        todo.extend(reversed(list(ast.iter_child_nodes(node))))
    return out


class _Collector:
    def __init__(self, text: str, names: set[str]) -> None:
        self.t = _Text(text)
        self.names = names
        self.sites: list[Site] = []

    def add(self, kind: str, node_line: int, detail: str, start: int, end: int, new: str) -> None:
        old = self.t.text[start:end]
        if old != new:
            self.sites.append(Site(kind, node_line, detail, start, end, old, new))

    def literal(self, kind: str, node: ast.Constant, where: str) -> None:
        new = _new_literal(node.value)
        if new is not None:
            start, end = self.t.span(node)
            self.add(kind, node.lineno, f"{where}: {self.t.text[start:end]} -> {new}", start, end, new)

    def literals_in(self, kind: str, tree: ast.AST | None, where: str) -> None:
        for node in ast.walk(tree) if tree is not None else ():
            if isinstance(node, ast.Constant):
                self.literal(kind, node, where)

    # --- functions ---------------------------------------------------------------------

    def function(self, fn: ast.FunctionDef, qual: str) -> None:
        unrelated = fn.name not in self.names
        semantic = "unrelated function" if unrelated else "edit+reload"
        self.cosmetic(fn, qual)
        for deco in fn.decorator_list:
            self.decorator(deco, qual)
        for default in (*fn.args.defaults, *(d for d in fn.args.kw_defaults if d is not None)):
            self.literals_in("unrelated function" if unrelated else "default value (edit)", default, f"{qual} default")
        body = fn.body[1:] if _docstring(fn) else fn.body
        parents = {child: node for node in _own_nodes(fn) for child in ast.iter_child_nodes(node)}
        for node in (n for stmt in body for n in [stmt, *_own_nodes_of(stmt)]):
            self.semantic(node, parents, semantic, qual)

    def semantic(self, node: ast.AST, parents: dict, kind: str, qual: str) -> None:
        if isinstance(node, ast.Constant) and not isinstance(node.value, str):
            self.literal(kind, node, qual)
        elif isinstance(node, ast.Constant) and isinstance(parents.get(node), (ast.Compare, ast.Call)):
            self.literal(kind, node, qual)
        elif isinstance(node, ast.BinOp) and type(node.op) in _OPERATOR:
            self.operator(kind, node, _OPERATOR[type(node.op)], node.left, node.right, qual)
        elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            self.operator(kind, node, _COMPARE[type(node.ops[0])], node.left, node.comparators[0], qual)
        elif isinstance(node, ast.Call) and sum(k.arg is not None for k in node.keywords) >= 2:
            self.keyword_swap(node, qual)

    def operator(
        self, kind: str, node: ast.expr, ops: tuple[str, str], left: ast.AST, right: ast.AST, qual: str
    ) -> None:
        lo, hi = self.t.span(left)[1], self.t.span(right)[0]
        gap = self.t.text[lo:hi]
        at = gap.find(ops[0])
        if at >= 0:
            start = lo + at
            self.add(kind, node.lineno, f"{qual}: {ops[0]} -> {ops[1]}", start, start + len(ops[0]), ops[1])

    def keyword_swap(self, call: ast.Call, qual: str) -> None:
        first, second = [k for k in call.keywords if k.arg is not None][:2]
        start, end = self.t.offset(first.lineno, first.col_offset), self.t.offset(second.lineno, second.col_offset)
        end += len(second.arg)  # type: ignore[arg-type]
        old = self.t.text[start:end]
        new = second.arg + old[len(first.arg) : len(old) - len(second.arg)] + first.arg  # type: ignore[operator, arg-type]
        self.add("keyword names", call.lineno, f"{qual}: {first.arg}=.., {second.arg}=.. swapped", start, end, new)

    def decorator(self, deco: ast.expr, qual: str) -> None:
        if isinstance(deco, ast.Call):
            self.literals_in("decorator argument", deco, f"@{ast.unparse(deco.func)} on {qual}")
        elif isinstance(deco, ast.Attribute) and deco.attr == "kernel":
            end = self.t.span(deco)[1]
            self.add(
                "decorator argument",
                deco.lineno,
                f"@{ast.unparse(deco)}(name=...) on {qual}",
                end,
                end,
                '(name="oracle_renamed")',
            )

    def cosmetic(self, fn: ast.FunctionDef, qual: str) -> None:
        doc = _docstring(fn)
        first = fn.body[1] if doc and len(fn.body) > 1 else fn.body[0]
        at = self.t.line_start(first.lineno)
        indent = self.t.indent_of(first.lineno)
        self.add("cosmetic: comment", first.lineno, f"{qual}: comment line", at, at, f"{indent}# oracle: a comment\n")
        self.add("cosmetic: blank line", first.lineno, f"{qual}: blank line", at, at, "\n")
        if doc is not None:
            start, end = self.t.span(doc)
            text = self.t.text[start:end]
            quote = text[-3:] if text.endswith(('"""', "'''")) else text[-1]
            new = text[: len(text) - len(quote)] + " (edited)" + quote
            self.add("cosmetic: docstring", doc.lineno, f"{qual}: docstring edited", start, end, new)
        else:
            at = self.t.line_start(fn.body[0].lineno)
            indent = self.t.indent_of(fn.body[0].lineno)
            self.add(
                "cosmetic: docstring",
                fn.body[0].lineno,
                f"{qual}: docstring added",
                at,
                at,
                f'{indent}"""Oracle docstring."""\n',
            )


def _docstring(fn: ast.AST) -> ast.Constant | None:
    body = getattr(fn, "body", [])
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        if isinstance(body[0].value.value, str):
            return body[0].value
    return None


def _own_nodes_of(stmt: ast.AST) -> list[ast.AST]:
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return []
    return [n for child in ast.iter_child_nodes(stmt) for n in [child, *_own_nodes_of(child)]]


def _functions(tree: ast.Module) -> list[tuple[ast.FunctionDef, str]]:
    out: list[tuple[ast.FunctionDef, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.append((child, prefix + child.name))  # type: ignore[arg-type]
                visit(child, f"{prefix}{child.name}.<locals>.")
            elif isinstance(child, ast.ClassDef):
                visit(child, f"{prefix}{child.name}.")

    visit(tree, "")
    return out


def _constants(c: _Collector, tree: ast.Module) -> None:
    scopes = [("module constant (edit)", tree.body, "")]
    scopes += [("class attribute (edit)", n.body, n.name + ".") for n in tree.body if isinstance(n, ast.ClassDef)]
    for kind, body, prefix in scopes:
        for stmt in body:
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None
            target = stmt.target if isinstance(stmt, ast.AnnAssign) else target
            value = getattr(stmt, "value", None)
            if isinstance(target, ast.Name) and isinstance(value, (ast.Constant, ast.Tuple, ast.List)):
                c.literals_in(kind, value, prefix + target.id)


def source_sites(text: str, names: set[str]) -> list[Site]:
    """Every single-span edit of one module's source (see the module docstring)."""
    tree = ast.parse(text)
    c = _Collector(text, names)
    for fn, qual in _functions(tree):
        c.function(fn, qual)
    _constants(c, tree)
    end = len(text)
    unrelated = "\n\ndef oracle_unrelated(n):\n    return n * 2 + 1\n"
    c.add("unrelated function", text.count("\n") + 1, "a new function appended", end, end, unrelated)
    return c.sites
