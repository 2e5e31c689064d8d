"""Run one call-graph case and record which of its scopes called which: a check on the hand-written oracle.

Usage: ``python callgraph_trace.py CASE_DIR`` prints ``{"scopes": [...], "edges": [[caller, callee], ...]}``.

Contract: ``scopes`` are the PyCG names of every module, class body, function and lambda
of the case, read from the source (lambdas numbered per enclosing scope in source order;
comprehensions belong to the scope that contains them, as in PyCG). ``edges`` are the
calls observed while ``main.py`` runs as ``__main__``, between two scopes of the case:
the callee's frame was entered (or a generator resumed) directly from the caller's frame.
Not edges, as in the cases' convention: running a module on import, running a class body,
and code reached from outside the case (``eval``'d code, library callbacks). Builtin and
library callees are not observed (the oracle writes them from the source alone).
"""

from __future__ import annotations

import ast
import contextlib
import json
import runpy
import sys
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

_COMPREHENSIONS = {"<listcomp>", "<setcomp>", "<dictcomp>", "<genexpr>"}
_Key = tuple[str, str, int]  # (file, code name, first line)


class _Scopes(ast.NodeVisitor):
    """Maps each code object of one module (by file, name, first line) to its PyCG name."""

    def __init__(self, file: str, module: str) -> None:
        self.file = file
        self.names: dict[_Key, str] = {(file, "<module>", 0): module}
        self.transparent: dict[_Key, str] = {}
        self.kinds: dict[str, str] = {module: "module"}
        self.stack = [module]
        self.lambdas: dict[str, int] = {}

    def _enter(self, node: ast.AST, code_name: str, name: str, first: int, kind: str) -> None:
        full = f"{self.stack[-1]}.{name}"
        self.names[(self.file, code_name, first)] = full
        self.kinds[full] = kind
        self.stack.append(full)
        self.generic_visit(node)
        self.stack.pop()

    def _def(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, kind: str) -> None:
        for decorator in node.decorator_list:  # evaluated in the enclosing scope
            self.visit(decorator)
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        body = [n for n in ast.iter_child_nodes(node) if n not in node.decorator_list]
        full = f"{self.stack[-1]}.{node.name}"
        self.names[(self.file, node.name, first)] = full
        self.kinds[full] = kind
        self.stack.append(full)
        for child in body:
            self.visit(child)
        self.stack.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._def(node, "function")

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> None:
        self._def(node, "function")

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._def(node, "class")

    def visit_Lambda(self, node: ast.Lambda) -> None:
        count = self.lambdas[self.stack[-1]] = self.lambdas.get(self.stack[-1], 0) + 1
        self._enter(node, "<lambda>", f"<lambda{count}>", node.lineno, "lambda")

    def _comprehension(self, node: ast.AST, code_name: str) -> None:
        self.transparent[(self.file, code_name, getattr(node, "lineno", 0))] = self.stack[-1]
        self.generic_visit(node)

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._comprehension(node, "<listcomp>")

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._comprehension(node, "<setcomp>")

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._comprehension(node, "<dictcomp>")

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._comprehension(node, "<genexpr>")


def _module_name(case: Path, file: Path) -> str:
    parts = list(file.relative_to(case).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def trace(case: Path) -> dict[str, Any]:
    names: dict[_Key, str] = {}
    transparent: dict[_Key, str] = {}
    kinds: dict[str, str] = {}
    for file in sorted(case.rglob("*.py")):
        scopes = _Scopes(str(file.resolve()), _module_name(case, file))
        scopes.visit(ast.parse(file.read_text(encoding="utf-8")))
        names.update(scopes.names)
        transparent.update(scopes.transparent)
        kinds.update(scopes.kinds)

    def name_of(code: CodeType) -> str | None:
        first = 0 if code.co_name == "<module>" else code.co_firstlineno
        key = (code.co_filename, code.co_name, first)
        return names.get(key) or transparent.get(key)

    edges: set[tuple[str, str]] = set()

    def profile(frame: FrameType, event: str, arg: object) -> None:
        if event != "call" or frame.f_code.co_name in _COMPREHENSIONS:
            return
        callee = name_of(frame.f_code)
        if callee is None or kinds[callee] in ("module", "class") or frame.f_back is None:
            return
        caller = name_of(frame.f_back.f_code)
        if caller is not None:
            edges.add((caller, callee))

    sys.path.insert(0, str(case))
    sys.argv = [str(case / "main.py")]
    with contextlib.redirect_stdout(sys.stderr):  # the program's own output is not the report
        sys.setprofile(profile)
        try:
            runpy.run_path(str(case / "main.py"), run_name="__main__")
        finally:
            sys.setprofile(None)
    return {"scopes": sorted(kinds), "edges": sorted(edges)}


if __name__ == "__main__":
    print(json.dumps(trace(Path(sys.argv[1]).resolve())))
