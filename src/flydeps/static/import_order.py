"""Where isort (and ruff's ``I`` rules, default settings) put an import statement.

Contract: :func:`place_imports` takes a libcst module and the module names (``flydeps``,
``flydsl_runtime.flyc``) whose import statements ``flydeps migrate`` added or rewrote.
Each such statement of the module's first top-level import block (a single-name ``import
x [as y]``, or a ``from x import ...``) is taken out and put back where isort sorts it,
assuming the rest of the block is sorted: sections ``__future__``, standard library, third
party, first party (the top-level packages and modules of the file's root directory, as
ruff's default ``src = ["."]`` finds them), local (relative imports), one blank line
between sections; within a section ``import x`` before ``from x import y``, then by module
name ignoring case, in natural order (``a2`` before ``a10``). Comments above a statement
and after it move with it; nothing else in the file changes. Pure: no I/O except listing
the root directory in :func:`first_party_names`.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Collection, Sequence

import libcst as cst
from libcst.helpers import get_full_name_for_node

__all__ = ["first_party_names", "place_imports"]

FUTURE, STDLIB, THIRD_PARTY, FIRST_PARTY, LOCAL = range(5)
_STDLIB = frozenset(getattr(sys, "stdlib_module_names", ())) | {"__future__"}
_Key = tuple[int, int, list[object], list[object], str]


def first_party_names(path: str) -> frozenset[str]:
    """Top-level module names importable from the root of ``path``: the directory above
    the top-most package (``__init__.py``) containing the file."""
    root = os.path.dirname(os.path.abspath(path))
    while os.path.isfile(os.path.join(root, "__init__.py")):
        root = os.path.dirname(root)
    try:
        entries = os.listdir(root)
    except OSError:
        return frozenset()
    names = {e[:-3] for e in entries if e.endswith(".py")}
    names |= {e for e in entries if e.isidentifier() and os.path.isdir(os.path.join(root, e))}
    return frozenset(names)


def place_imports(module: cst.Module, names: Collection[str], first_party: Collection[str]) -> cst.Module:
    """``module`` with the import statements of ``names`` moved where isort puts them."""
    body = list(module.body)
    start, end = _import_block(body)
    block = [s for s in body[start:end] if isinstance(s, cst.SimpleStatementLine)]  # all of them
    ours = [s for s in block if _module_name(s) in names and _single(s)]
    if not ours:
        return module
    rest = _remove(block, ours)
    for statement in sorted(ours, key=lambda s: _key(s, first_party)):
        rest = _insert(rest, statement, first_party)
    rest = _section_breaks(rest, first_party)
    if start == 0 and not module.header:  # an import removed from the top leaves no blank first line
        rest[0] = rest[0].with_changes(leading_lines=_split_lines(rest[0])[1])
    return module.with_changes(body=[*body[:start], *rest, *body[end:]])


def _section_breaks(
    block: list[cst.SimpleStatementLine], first_party: Collection[str]
) -> list[cst.SimpleStatementLine]:
    """Blank lines inside the block as isort writes them: one before the first statement of a
    section and before a statement with comments above it, none elsewhere (libcst's import
    removal drops the blank line of a removed first statement of a section)."""
    out = block[:1]
    for previous, statement in zip(block, block[1:]):
        blank, comments = _split_lines(statement)
        if _key(previous, first_party)[0] != _key(statement, first_party)[0] or comments:
            lines = [*(blank or [cst.EmptyLine()]), *comments]
        else:
            lines = comments
        out.append(statement.with_changes(leading_lines=lines))
    return out


def _import_block(body: Sequence[cst.BaseStatement]) -> tuple[int, int]:
    """``[start, end)`` of the first run of top-level import statements."""
    start = next((i for i, s in enumerate(body) if _module_name(s) is not None), len(body))
    end = start
    while end < len(body) and _module_name(body[end]) is not None:
        end += 1
    return start, end


def _module_name(statement: cst.CSTNode) -> str | None:
    """The module an import statement names (``.``-prefixed when relative), else None."""
    if not isinstance(statement, cst.SimpleStatementLine) or len(statement.body) != 1:
        return None
    node = statement.body[0]
    if isinstance(node, cst.Import):
        return get_full_name_for_node(node.names[0].name)
    if isinstance(node, cst.ImportFrom):
        dots = "." * len(node.relative)
        return dots + (get_full_name_for_node(node.module) or "" if node.module is not None else "")
    return None


def _single(statement: cst.SimpleStatementLine) -> bool:
    node = statement.body[0]
    return not isinstance(node, cst.Import) or len(node.names) == 1


def _section(name: str, first_party: Collection[str]) -> int:
    if name.startswith("."):
        return LOCAL
    top = name.split(".")[0]
    if top == "__future__":
        return FUTURE
    if top in _STDLIB:
        return STDLIB
    return FIRST_PARTY if top in first_party else THIRD_PARTY


def _natural(text: str) -> list[object]:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", text)]


def _key(statement: cst.SimpleStatementLine, first_party: Collection[str]) -> _Key:
    name = _module_name(statement) or ""
    node = statement.body[0]
    alias = ""
    if isinstance(node, cst.Import) and node.names[0].asname is not None:
        alias = cst.Module([]).code_for_node(node.names[0].asname.name)
    straight = 0 if isinstance(node, cst.Import) else 1
    return _section(name, first_party), straight, _natural(name.lower()), _natural(name), alias


def _split_lines(statement: cst.SimpleStatementLine) -> tuple[list[cst.EmptyLine], list[cst.EmptyLine]]:
    """Leading lines as (the blank lines before the first comment, the rest)."""
    lines = list(statement.leading_lines)
    blank = 0
    while blank < len(lines) and lines[blank].comment is None:
        blank += 1
    return lines[:blank], lines[blank:]


def _remove(
    block: Sequence[cst.SimpleStatementLine], ours: Sequence[cst.SimpleStatementLine]
) -> list[cst.SimpleStatementLine]:
    """The block without ``ours``; a removed statement's blank lines (a section break, the
    line after the docstring) pass to the next statement that has none."""
    out: list[cst.SimpleStatementLine] = []
    carried: list[cst.EmptyLine] = []
    for statement in block:
        blank, comments = _split_lines(statement)
        if any(statement is o for o in ours):
            carried = carried or blank
            continue
        if carried and not blank:
            statement = statement.with_changes(leading_lines=[*carried, *comments])
        carried = []
        out.append(statement)
    return out


def _insert(
    block: list[cst.SimpleStatementLine], statement: cst.SimpleStatementLine, first_party: Collection[str]
) -> list[cst.SimpleStatementLine]:
    """``block`` with ``statement`` before the first statement isort sorts after it; blank
    lines are settled afterwards (:func:`_section_breaks`), except that a new first
    statement takes over the blank lines above the block (after a docstring)."""
    key = _key(statement, first_party)
    at = next((i for i, s in enumerate(block) if _key(s, first_party) > key), len(block))
    _, comments = _split_lines(statement)
    if at == 0 and block:
        blank, rest = _split_lines(block[0])
        block[0] = block[0].with_changes(leading_lines=rest)
        comments = [*blank, *comments]
    elif at == 0:
        comments = list(statement.leading_lines)
    return [*block[:at], statement.with_changes(leading_lines=comments), *block[at:]]
