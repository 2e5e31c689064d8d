"""Where added and rewritten import statements go: the project's own settings, else isort's defaults.

Contract: :func:`place_imports` takes a libcst module and the module names (``flydeps``,
``flydsl_runtime.flyc``) whose import statements ``flydeps migrate`` added or rewrote.
Each such statement of the module's first top-level import block (a single-name ``import
x [as y]``, or a ``from x import ...``) is taken out and put back where isort sorts it
with default settings, assuming the rest of the block is sorted: sections ``__future__``,
standard library, third party, first party (the top-level packages and modules of the
file's root directory, as ruff's default ``src = ["."]`` finds them), local (relative
imports), one blank line between sections; within a section ``import x`` before ``from x
import y``, then by module name ignoring case, in natural order (``a2`` before ``a10``).
Comments above a statement and after it move with it; nothing else in the file changes.
Pure: no I/O except listing the root directory in :func:`first_party_names`.

:func:`apply_project_order` then sorts that text with the project's own tool and settings,
so the project's lint stays clean: the ruff or isort configuration that governs the file
(:func:`find_import_config`: ``.ruff.toml``, ``ruff.toml``, ``[tool.ruff]``, ``.isort.cfg``,
``[tool.isort]``, ``[isort]`` of ``setup.cfg``/``tox.ini``, nearest directory first) applied
by the real engine: ``ruff check --select I001 --fix-only`` (the ``ruff`` package's binary,
else ``ruff`` on PATH) run in the configuration's directory, or isort's Python API. Neither
tool is a dependency of flydeps: without it the text stays as :func:`place_imports` left it
and one info line per configuration file names the tool to install. The tool sorts only a
file whose original imports it finds sorted, and its result is kept only when it differs in
nothing but imports (checked on the AST); otherwise, and for a configuration file that
cannot be read or a tool that fails, the text stays and a warning names the file, what was
wrong and what to do.
"""

from __future__ import annotations

import ast
import configparser
import importlib.util
import json
import logging
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.helpers import get_full_name_for_node

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "ConfigError",
    "ImportConfig",
    "Placement",
    "apply_project_order",
    "find_import_config",
    "first_party_names",
    "governed",
    "place_imports",
]

log = logging.getLogger("flydeps.static")

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


def place_imports(
    module: cst.Module, names: Collection[str], first_party: Collection[str], original: cst.Module | None = None
) -> cst.Module:
    """``module`` with the import statements of ``names`` moved where isort puts them.
    ``original``: the module before the migration; the blank lines above its first import
    block (after a docstring) are kept when libcst's removal of that block's first
    statement dropped them."""
    body = list(module.body)
    start, end = _import_block(body)
    if original is not None and 0 < start < end:
        body[start] = _keep_gap(original, body[start], start)
        module = module.with_changes(body=body)
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


def _keep_gap(
    original: cst.Module, first: cst.SimpleStatementLine | cst.BaseCompoundStatement, start: int
) -> cst.SimpleStatementLine | cst.BaseCompoundStatement:
    """``first`` (the first statement of the import block at ``start``) with the blank lines
    the original's block had above it, when it has none."""
    old_start, old_end = _import_block(original.body)
    if old_start != start or old_start == old_end or not isinstance(first, cst.SimpleStatementLine):
        return first
    old = original.body[old_start]
    old_blank = _split_lines(old)[0] if isinstance(old, cst.SimpleStatementLine) else []
    blank, comments = _split_lines(first)
    if old_blank and not blank:
        return first.with_changes(leading_lines=[*old_blank, *comments])
    return first


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


# --- the project's own import settings ------------------------------------------------------

_RUFF_FILES = (".ruff.toml", "ruff.toml")  # ruff's precedence within one directory, then pyproject.toml
_ISORT_INI = {
    ".isort.cfg": ("settings", "isort"),
    "setup.cfg": ("isort", "tool:isort"),
    "tox.ini": ("isort", "tool:isort"),
}
_TIMEOUT = 120.0  # seconds for one ruff run on one file
_announced: set[str] = set()  # info lines already logged (one per missing tool and configuration file)


@dataclass(frozen=True)
class ImportConfig:
    """The import-sorting configuration that governs a file: ``tool`` is ``"ruff"`` or
    ``"isort"``, ``path`` the configuration file, ``directory`` the directory holding it."""

    tool: str
    path: str

    @property
    def directory(self) -> str:
        return os.path.dirname(self.path)


@dataclass(frozen=True)
class Placement:
    """What :func:`apply_project_order` made of a rewritten file: its ``text`` and, when the
    project's configuration could not be applied, a ``warning`` (``path: why; what to do``)."""

    text: str
    warning: str | None = None


class ConfigError(ValueError):
    """A configuration file that cannot be read; the message names it and what is wrong."""


def _read_toml(path: str) -> dict[str, object]:
    try:
        with open(path, "rb") as stream:
            return tomllib.load(stream)
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read it as TOML ({error})") from error


def _read_ini(path: str) -> configparser.ConfigParser:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        with open(path, encoding="utf-8") as stream:
            parser.read_file(stream)
    except (OSError, configparser.Error, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read it as an INI file ({error})") from error
    return parser


def _table(data: dict[str, object], *keys: str) -> dict[str, object] | None:
    for key in keys:
        value = data.get(key)
        if not isinstance(value, dict):
            return None
        data = value
    return data


def _ruff_sorts_imports(settings: dict[str, object]) -> bool:
    """Whether a ruff configuration (its ``[tool.ruff]`` table or a ruff.toml) selects the
    ``I`` rules or configures them."""
    lint = _table(settings, "lint") or {}
    selected: list[str] = []
    for table in (settings, lint):
        for key in ("select", "extend-select"):
            codes = table.get(key)
            selected += [str(code) for code in codes] if isinstance(codes, list) else []
    configured = _table(lint, "isort") is not None or _table(settings, "isort") is not None
    return configured or any(code in ("ALL", "I") or code.startswith("I0") for code in selected)


def find_import_config(path: str) -> ImportConfig | None:
    """The configuration that sorts the imports of ``path``: walking up from its directory,
    the first directory with a ruff configuration (``.ruff.toml``, ``ruff.toml``, a
    ``[tool.ruff]`` table in ``pyproject.toml``) or an isort one (``.isort.cfg``,
    ``[tool.isort]``, ``[isort]`` of ``setup.cfg``/``tox.ini``). When a directory has both,
    ruff wins unless its configuration neither selects nor configures the ``I`` rules.
    Raises :class:`ConfigError` for a file there that cannot be parsed."""
    directory = os.path.dirname(os.path.abspath(path))
    while True:
        ruff: ImportConfig | None = None
        ruff_sorts = False
        isort_config: ImportConfig | None = None
        for name in _RUFF_FILES:
            candidate = os.path.join(directory, name)
            if os.path.isfile(candidate):
                ruff, ruff_sorts = ImportConfig("ruff", candidate), _ruff_sorts_imports(_read_toml(candidate))
                break
        pyproject = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(pyproject):
            data = _read_toml(pyproject)
            table = _table(data, "tool", "ruff")
            if ruff is None and table is not None:
                ruff, ruff_sorts = ImportConfig("ruff", pyproject), _ruff_sorts_imports(table)
            if _table(data, "tool", "isort") is not None:
                isort_config = ImportConfig("isort", pyproject)
        for name, sections in _ISORT_INI.items():
            candidate = os.path.join(directory, name)
            if isort_config is None and os.path.isfile(candidate):
                if any(_read_ini(candidate).has_section(section) for section in sections):
                    isort_config = ImportConfig("isort", candidate)
        if ruff is not None and (ruff_sorts or isort_config is None):
            return ruff
        if isort_config is not None:
            return isort_config
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def governed(path: str) -> bool:
    """Whether :func:`apply_project_order` may change or warn about ``path``: a configuration
    governs it, or one on its way up cannot be read (the warning comes from there)."""
    try:
        return find_import_config(path) is not None
    except ConfigError:
        return True


def _ruff_binary() -> str | None:
    """The ``ruff`` executable: the one the ``ruff`` Python package ships, else on PATH."""
    try:
        from ruff.__main__ import find_ruff_bin

        return os.fsdecode(find_ruff_bin())
    except (ImportError, FileNotFoundError):
        return shutil.which("ruff")


def _imports(text: str) -> tuple[str, list[tuple[object, ...]]] | None:
    """``text`` as an AST dump without its import statements, and the names those
    statements bind (sorted); None when it does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    names: list[tuple[object, ...]] = []

    class Strip(ast.NodeTransformer):
        def visit_Import(self, node: ast.Import) -> None:
            names.extend(("import", a.name, a.asname) for a in node.names)

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            names.extend(("from", node.level, node.module, a.name, a.asname) for a in node.names)

    stripped = Strip().visit(tree)
    return ast.dump(stripped), sorted(names, key=repr)


def _same_code(before: str, after: str) -> bool:
    """Whether ``after`` differs from ``before`` only in where and how imports are written."""
    old, new = _imports(before), _imports(after)
    return old is not None and old == new


def _run_ruff(binary: str, config: ImportConfig, path: str, text: str, *options: str) -> str:
    """stdout of ``ruff check --select I001`` on ``text`` as the file ``path`` in the
    project's directory (so ruff reads the project's configuration)."""
    command = [binary, "check", "--select", "I001", "--force-exclude", "--no-cache", *options]
    command += ["--stdin-filename", os.path.abspath(path), "-"]
    try:
        done = subprocess.run(
            command,
            input=text,
            capture_output=True,
            encoding="utf-8",
            cwd=config.directory,
            timeout=_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ConfigError(f"{binary}: {error}") from error
    if done.returncode != 0:
        detail = " ".join(done.stderr.split()) or f"exit status {done.returncode}"
        raise ConfigError(f"`{' '.join(command[:4])}` failed in {config.directory}: {detail}")
    return done.stdout


def _with_ruff(binary: str, config: ImportConfig, path: str, original: str, rewritten: str) -> Placement:
    output = _run_ruff(binary, config, path, original, "--output-format", "json", "--exit-zero")
    try:
        report = json.loads(output or "[]")
    except ValueError as error:
        raise ConfigError(f"{binary}: unexpected output for --output-format json ({error})") from error
    if report:
        line = report[0].get("location", {}).get("row", 1)
        return Placement(
            rewritten,
            f"{path}:{line}: imports were already unsorted for {config.path} (ruff I001) before the migration; "
            f"the added imports were placed by isort's defaults: run `ruff check --select I --fix {path}`",
        )
    return Placement(_run_ruff(binary, config, path, rewritten, "--fix-only", "--exit-zero"))


def _with_isort(config: ImportConfig, path: str, original: str, rewritten: str) -> Placement:
    import isort
    from isort.exceptions import FileSkipped, ISortError

    try:
        settings = isort.Config(settings_path=config.directory, quiet=True)
        if isort.code(original, config=settings, file_path=Path(path)) != original:
            return Placement(
                rewritten,
                f"{path}: imports were already unsorted for {config.path} (isort) before the migration; the added "
                f"imports were placed by isort's defaults: run `isort {path}`",
            )
        return Placement(isort.code(rewritten, config=settings, file_path=Path(path)))
    except FileSkipped:
        return Placement(rewritten)
    except (ISortError, ValueError, OSError) as error:
        raise ConfigError(f"{config.path}: isort cannot apply it ({error})") from error


def apply_project_order(path: str, original: str, rewritten: str) -> Placement:
    """``rewritten`` (``original`` after the migration, imports placed by
    :func:`place_imports`) with its imports sorted by the project's own tool and settings
    (:func:`find_import_config`): ``ruff check --select I001 --fix-only`` run in the
    configuration's directory, or isort's Python API. Only when ``original`` was sorted
    for that configuration (else the imports of the project's unsorted file stay where
    they are, with a warning), and only when the result differs from ``rewritten`` in
    nothing but its imports (checked on the AST). ``rewritten`` unchanged, with a warning,
    when a configuration file cannot be read or the tool fails; unchanged, with one info
    log line per configuration, when the tool is not installed; unchanged when no
    configuration governs the file (:func:`place_imports` follows the defaults)."""
    try:
        config = find_import_config(path)
        if config is None:
            return Placement(rewritten)
        if config.tool == "ruff":
            binary = _ruff_binary()
            if binary is None:
                return _not_installed(config, "ruff", rewritten)
            placed = _with_ruff(binary, config, path, original, rewritten)
        else:
            if importlib.util.find_spec("isort") is None:
                return _not_installed(config, "isort", rewritten)
            placed = _with_isort(config, path, original, rewritten)
    except ConfigError as error:
        return Placement(rewritten, f"{path}: imports placed by isort's defaults, not the project's settings: {error}")
    if placed.warning is None and not _same_code(rewritten, placed.text):
        return Placement(
            rewritten,
            f"{path}: {config.tool} (settings {config.path}) changed more than the imports; kept the imports where "
            f"isort's defaults put them: sort them with {config.tool}",
        )
    return placed


def _not_installed(config: ImportConfig, tool: str, rewritten: str) -> Placement:
    if config.path not in _announced:
        _announced.add(config.path)
        log.info(
            "%s: the import settings there could not be applied (%s is not installed); added imports follow "
            "isort's defaults: `pip install %s` to place them by the project's settings",
            config.path,
            tool,
            tool,
        )
    return Placement(rewritten)
