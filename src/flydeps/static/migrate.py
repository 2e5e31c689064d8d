"""``flydeps migrate``: the libcst codemod that moves a kernel repository onto flydeps.

Contract: :func:`migrate_paths` yields one :class:`FileMigration` per ``.py`` file under
the given paths (a file, or every module below a directory), in path order, and never
raises for bad input: a missing path, undecodable bytes or a file libcst cannot parse is a
``path:line: message`` :class:`~flydeps.static.project.Diagnostic` on that file's record,
and the other files are still migrated. Nothing is written unless the caller asks
(:meth:`FileMigration.write`: a temporary file in the same directory, then
``os.replace``; unchanged files are never touched). Rewrites, done by
:class:`MigrateCommand` (a :class:`~libcst.codemod.VisitorBasedCodemodCommand`, names
resolved with libcst's ``QualifiedNameProvider`` so any import alias works):

1. A compile factory -- a function decorated with ``functools.lru_cache`` (any call form)
   or ``functools.cache`` whose body defines, at any depth, a function decorated with
   FlyDSL's ``kernel`` or ``jit``, or that calls a function of the same module that does (a
   delegating entry point: ``@lru_cache def _build_x(...): return build_x(...)``) -- is
   decorated with ``flydeps.cached_factory`` instead,
   with the same arguments (``cache`` becomes ``cached_factory(maxsize=None)``); ``import
   flydeps`` is added once and a ``functools`` import nothing else uses is removed
   (libcst's ``AddImportsVisitor``/``RemoveImportsVisitor``). Other memoized functions
   keep ``lru_cache``.
2. ``import flydsl.compiler as X`` and ``from flydsl import compiler as X`` become
   ``import flydsl_runtime.flyc as X``; ``from flydsl.compiler import a, b`` becomes
   ``from flydsl_runtime.flyc import a, b`` -- only when every name imported (or used as
   ``X.name``) is one the facade exports (:data:`FACADE_NAMES`), so no import breaks.

Everything else is kept byte for byte (libcst's lossless round trip; the file's encoding,
BOM and line endings included), so running it twice changes nothing the second time.
Files that never mention ``flydsl`` cannot contain either pattern and are skipped unparsed,
as are the files of a ``flydsl_runtime`` package (the facade wraps ``flydsl.compiler``).
What it cannot migrate is left unchanged with a warning naming the line and the fix.
"""

from __future__ import annotations

import ast
import difflib
import importlib.metadata
import io
import os
import tempfile
import tokenize
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import libcst as cst
import libcst.matchers as m
from libcst.codemod import (
    CodemodContext,
    SkipReason,
    TransformFailure,
    TransformResult,
    TransformSkip,
    TransformSuccess,
    VisitorBasedCodemodCommand,
    transform_module,
)
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.helpers import get_full_name_for_node
from libcst.metadata import PositionProvider, QualifiedNameProvider

from .project import Diagnostic, FileSystemTree

__all__ = ["FileMigration", "MigrateCommand", "migrate_file", "migrate_paths", "migrate_source"]

FLYDSL_COMPILER = "flydsl.compiler"
RUNTIME_FLYC = "flydsl_runtime.flyc"
LRU_CACHE, CACHE = "functools.lru_cache", "functools.cache"
KERNEL_DECORATORS = frozenset(
    f"{module}.{name}" for module in (FLYDSL_COMPILER, RUNTIME_FLYC) for name in ("kernel", "jit")
)
#: What ``flydsl_runtime.flyc`` exports: ``flydsl.compiler.__all__`` of the pinned FlyDSL
#: (0.5.0) plus ``cached_factory``; tests compare it with the real facade where FlyDSL is
#: installed. An import whose names (or alias uses, ``flyc.jit_function``) fall outside it
#: is left unchanged, so a migration never breaks an import.
FACADE_NAMES = frozenset(
    {
        *("BaseBackend", "CompiledFunction", "GPUTarget", "JitArgumentRegistry", "cached_factory", "compile"),
        *("compile_backend_name", "from_c_void_p", "from_dlpack", "from_torch_tensor", "get_backend", "jit"),
        *("kernel", "register_backend"),
    }
)


def _runtime_flyc() -> cst.Attribute:
    return cst.Attribute(cst.Name("flydsl_runtime"), cst.Name("flyc"))


def _cached_factory() -> cst.Attribute:
    return cst.Attribute(cst.Name("flydeps"), cst.Name("cached_factory"))


class MigrateCommand(VisitorBasedCodemodCommand):
    """Compile factories to ``flydeps.cached_factory``, ``flydsl.compiler`` to the facade."""

    DESCRIPTION = "Migrate FlyDSL compile factories to flydeps.cached_factory and flydsl_runtime.flyc."
    METADATA_DEPENDENCIES = (QualifiedNameProvider, PositionProvider)

    def __init__(self, context: CodemodContext) -> None:
        super().__init__(context)
        self._defines_kernel: list[bool] = []  # one flag per enclosing function
        self._missing: list[str] = []  # `X.name` with X bound to flydsl.compiler, name not in the facade
        self._builders: frozenset[str] = frozenset()  # module-level functions that define a kernel

    def visit_Module(self, node: cst.Module) -> None:
        functions = [f for f in node.body if isinstance(f, cst.FunctionDef)]
        self._builders = frozenset(f.name.value for f in functions if self._defines_any_kernel(f))
        attributes = [ref for ref in m.findall(node, m.Attribute()) if isinstance(ref, cst.Attribute)]
        used = {ref.attr.value for ref in attributes if FLYDSL_COMPILER in self._qualified(ref.value)}
        self._missing = sorted(n for n in used if n not in FACADE_NAMES and not n.startswith("__"))

    def _keep_compiler(self, node: cst.CSTNode) -> bool:
        """True (after a warning) when the file uses names of ``flydsl.compiler`` that the
        facade does not export: its import must stay."""
        if self._missing:
            self._warn(
                node,
                f"left unchanged: the file uses {FLYDSL_COMPILER}.{', .'.join(self._missing)}, which {RUNTIME_FLYC} "
                f"does not export; import those from {FLYDSL_COMPILER}.<module> under another name, then rerun",
            )
        return bool(self._missing)

    def _qualified(self, expr: cst.BaseExpression) -> set[str]:
        """What a decorator (or the callee of a decorator call) names, through imports."""
        target = expr.func if isinstance(expr, cst.Call) else expr
        return {q.name for q in self.get_metadata(QualifiedNameProvider, target, set())}

    def _warn(self, node: cst.CSTNode, message: str) -> None:
        line = self.get_metadata(PositionProvider, node).start.line
        self.warn(f"{self.context.filename}:{line}: {message}")

    def _defines_any_kernel(self, node: cst.FunctionDef) -> bool:
        nested = [f for f in m.findall(node, m.FunctionDef()) if isinstance(f, cst.FunctionDef) and f is not node]
        return any(self._qualified(d.decorator) & KERNEL_DECORATORS for f in nested for d in f.decorators)

    def _delegates(self, node: cst.FunctionDef) -> bool:
        """The body calls a builder of this module by name (``return build_x(...)``)."""
        calls = m.findall(node.body, m.Call(func=m.Name()))
        return any(isinstance(c, cst.Call) and cst.ensure_type(c.func, cst.Name).value in self._builders for c in calls)

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        if any(self._qualified(d.decorator) & KERNEL_DECORATORS for d in node.decorators):
            self._defines_kernel = [True] * len(self._defines_kernel)
        self._defines_kernel.append(False)

    def leave_FunctionDef(self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef) -> cst.FunctionDef:
        if not self._defines_kernel.pop() and not self._delegates(original_node):
            return updated_node
        decorators = [self._factory(old, new) for old, new in zip(original_node.decorators, updated_node.decorators)]
        return updated_node.with_changes(decorators=decorators)

    def _factory(self, original: cst.Decorator, updated: cst.Decorator) -> cst.Decorator:
        """``lru_cache``/``cache`` (any form) -> ``flydeps.cached_factory``; others as they are."""
        names = self._qualified(original.decorator)
        expr = updated.decorator
        if LRU_CACHE in names:
            new: cst.BaseExpression = (
                expr.with_changes(func=_cached_factory()) if isinstance(expr, cst.Call) else _cached_factory()
            )
        elif CACHE in names and not isinstance(expr, cst.Call):
            new = cst.parse_expression("flydeps.cached_factory(maxsize=None)")
        else:
            return updated
        RemoveImportsVisitor.remove_unused_import_by_node(self.context, original.decorator)
        AddImportsVisitor.add_needed_import(self.context, "flydeps")
        return updated.with_changes(decorator=new)

    def leave_Import(self, original_node: cst.Import, updated_node: cst.Import) -> cst.Import:
        aliases = []
        for alias in updated_node.names:
            if get_full_name_for_node(alias.name) == FLYDSL_COMPILER:
                if alias.asname is None:
                    self._warn(
                        original_node,
                        f"`import {FLYDSL_COMPILER}` has no alias, left unchanged; write "
                        f"`import {RUNTIME_FLYC} as flyc` and call `flyc.jit`/`flyc.kernel` through it",
                    )
                elif not self._keep_compiler(original_node):
                    alias = alias.with_changes(name=_runtime_flyc())
            aliases.append(alias)
        return updated_node.with_changes(names=aliases)

    def leave_ImportFrom(
        self, original_node: cst.ImportFrom, updated_node: cst.ImportFrom
    ) -> cst.ImportFrom | cst.Import:
        if updated_node.relative or updated_node.module is None:
            return updated_node
        module = get_full_name_for_node(updated_node.module)
        names = updated_node.names
        if module == FLYDSL_COMPILER:
            imported = [] if isinstance(names, cst.ImportStar) else [a.evaluated_name for a in names]
            missing = [name for name in imported if name not in FACADE_NAMES]
            if missing and len(missing) < len(imported):
                self._warn(
                    original_node,
                    f"left unchanged: {RUNTIME_FLYC} does not export {', '.join(missing)}; import the "
                    f"other names from {RUNTIME_FLYC} in a statement of their own",
                )
            if missing:
                return updated_node
            return updated_node.with_changes(module=_runtime_flyc())
        if module != "flydsl" or isinstance(names, cst.ImportStar):
            return updated_node
        compiler = [a for a in names if a.evaluated_name == "compiler"]
        if not compiler or self._keep_compiler(original_node):
            return updated_node
        if len(names) == 1:
            alias = cst.AsName(cst.Name(compiler[0].evaluated_alias or "compiler"))
            return cst.Import([cst.ImportAlias(_runtime_flyc(), alias)], semicolon=updated_node.semicolon)
        for compiler_alias in compiler:  # `from flydsl import compiler as flyc, expr as fx`: split the statement
            asname = compiler_alias.evaluated_alias or "compiler"
            AddImportsVisitor.add_needed_import(self.context, RUNTIME_FLYC, asname=asname)
        rest = [a for a in names if a.evaluated_name != "compiler"]
        rest[-1] = rest[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
        return updated_node.with_changes(names=rest)


@dataclass(frozen=True)
class FileMigration:
    """One file's outcome: ``result`` is libcst's (success, skip or failure); ``before`` and
    ``after`` are the file's bytes (equal unless it changes); ``problem`` is set on failure."""

    path: str
    result: TransformResult
    before: bytes = b""
    after: bytes = b""
    encoding: str = "utf-8"
    problem: Diagnostic | None = None

    @property
    def changed(self) -> bool:
        return isinstance(self.result, TransformSuccess) and self.after != self.before

    @property
    def warnings(self) -> Sequence[str]:
        return self.result.warning_messages

    @property
    def traceback(self) -> str:
        """The codemod's traceback when it crashed, else empty."""
        return self.result.traceback_str if isinstance(self.result, TransformFailure) else ""

    def diff(self) -> str:
        """A unified diff (``a/path``, ``b/path``), empty when nothing changes."""
        old, new = (_lines(data.decode(self.encoding)) for data in (self.before, self.after))
        hunks = difflib.unified_diff(old, new, f"a/{self.path}", f"b/{self.path}")
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in hunks)

    def write(self) -> Diagnostic | None:
        """Replace the file atomically with ``after``: a temporary file in the same directory
        (of a symlink's target: the link stays a link), the original's permissions, then
        ``os.replace``. A no-op when nothing changes; a Diagnostic when the file changed
        since it was read or cannot be written (it is then left as it was)."""
        if not self.changed:
            return None
        target = os.path.realpath(self.path)
        directory, name = os.path.split(target)
        tmp = None
        try:
            with open(target, "rb") as handle:
                if handle.read() != self.before:
                    return Diagnostic(self.path, 1, "changed while being migrated; not written, rerun flydeps migrate")
            fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".{name}.", suffix=".flydeps-tmp")
            with os.fdopen(fd, "wb") as handle:
                handle.write(self.after)
            os.chmod(tmp, os.stat(target).st_mode & 0o7777)
            os.replace(tmp, target)
        except OSError as exc:
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)
            why = exc.strerror or exc
            return Diagnostic(self.path, 1, f"cannot write: {why}; left unchanged, make it writable and rerun")
        return None


def _lines(text: str) -> list[str]:
    """Lines split on ``\\n`` only (``str.splitlines`` also splits on form feeds)."""
    parts = text.split("\n")
    return [part + "\n" for part in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def _failure(path: str, line: int, message: str, error: Exception) -> FileMigration:
    result = TransformFailure(error=error, traceback_str="", warning_messages=[])
    return FileMigration(path, result, problem=Diagnostic(path, line, message))


def _skip(path: str, data: bytes, why: str) -> FileMigration:
    result = TransformSkip(skip_reason=SkipReason.OTHER, skip_description=why, warning_messages=[])
    return FileMigration(path, result, data, data)


def migrate_source(code: str, path: str = "<string>") -> TransformResult:
    """Run :class:`MigrateCommand` on ``code``; libcst's result object, never an exception."""
    return transform_module(MigrateCommand(CodemodContext(filename=path)), code)


def migrate_file(path: str) -> FileMigration:
    """Read, decode (PEP 263 / BOM) and migrate one file; nothing is written."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        return _failure(path, 1, f"cannot read: {exc.strerror or exc}; check the path and its permissions", exc)
    if b"flydsl" not in data:
        return _skip(path, data, "does not mention flydsl")
    if "flydsl_runtime" in os.path.normpath(os.path.abspath(path)).split(os.sep):
        return _skip(path, data, "part of the flydsl_runtime facade, which wraps flydsl.compiler itself")
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
        text = data.decode(encoding)
    except SyntaxError as exc:  # a bad coding cookie
        return _failure(path, exc.lineno or 1, f"{exc.msg}; fix the coding declaration", exc)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return _failure(
            path,
            line,
            f"cannot decode as {encoding}: {exc.reason} (byte {data[exc.start]:#04x}); "
            f"save the file as {encoding} or declare its encoding in a `# coding:` line",
            exc,
        )
    result = migrate_source(text, path)
    if isinstance(result, TransformFailure):  # kept whole: the traceback is logged with -v
        return FileMigration(path, result, data, data, encoding, Diagnostic(path, *_explain(result.error, text, path)))
    if not isinstance(result, TransformSuccess):
        return FileMigration(path, result, data, data, encoding)
    return FileMigration(path, result, data, result.code.encode(encoding), encoding)


def _explain(error: Exception, text: str, path: str) -> tuple[int, str]:
    """Line and message of a failed transform; syntax errors as CPython words and places
    them (libcst's parser points at the next token), like ``flydeps graph`` does."""
    if not isinstance(error, cst.ParserSyntaxError):
        return 1, f"flydeps migrate failed: {type(error).__name__}: {error}; please report this with the file"
    try:
        compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return exc.lineno or error.raw_line, f"syntax error: {exc.msg}; fix the file"
    version = importlib.metadata.version("libcst")
    return error.raw_line, (
        f"libcst {version} cannot parse this file ({error.message}) although this Python can; "
        "upgrade libcst (pip install -U libcst) or migrate the file by hand"
    )


def migrate_paths(paths: Iterable[str]) -> Iterator[FileMigration]:
    """Every ``.py`` file under ``paths`` (each file once, in order), migrated in memory."""
    tree = FileSystemTree()
    seen: set[str] = set()
    for path in paths:
        if os.path.isdir(path):
            files = tree.python_files(path)
        elif os.path.exists(path):
            files = [path]
        else:
            error = FileNotFoundError(path)
            yield _failure(path, 1, "no such file or directory; check the PATH argument", error)
            continue
        for file in files:
            key = os.path.realpath(file)
            if key not in seen:
                seen.add(key)
                yield migrate_file(file)
