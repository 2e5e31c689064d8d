"""``flydeps migrate``: the libcst codemod that moves a kernel repository onto flydeps.

Contract: :func:`migrate_paths` yields one :class:`FileMigration` per ``.py`` file under
the given paths (a file, or every module below a directory), in path order, and never
raises for bad input: a missing path, undecodable bytes, a file libcst cannot parse, one
too large or too deeply nested for it, or one whose parse crashed or ran out of time is a
``path:line: message`` :class:`~flydeps.static.project.Diagnostic` on that file's record,
and the other files are still migrated; a FIFO or device is skipped with a note. Nothing
is written unless the caller asks (:meth:`FileMigration.write`: a temporary file in the
same directory, then ``os.replace``; unchanged files are never touched). Rewrites, done by
:class:`~.codemod.MigrateCommand` (names resolved through any import alias):

1. A compile factory -- a function decorated with ``functools.lru_cache`` (any call form)
   or ``functools.cache`` whose body defines, at any depth, a function decorated with
   FlyDSL's ``kernel`` or ``jit`` -- is decorated with ``flydeps.cached_factory`` instead,
   with the same arguments (``cache`` becomes ``cached_factory(maxsize=None)``). So is a
   *delegating factory*, one whose body defines no kernel but calls a function of the same
   module that does (``@lru_cache def _build_x(...): return build_x(...)``): its cache
   would keep returning the first build after ``build_x`` changes. ``skip_delegating``
   (``--skip-delegating``) keeps their ``lru_cache`` with a warning instead. ``import
   flydeps`` is added once and a ``functools`` import nothing else uses is removed.
   :func:`migrate_paths` also runs the whole-tree static analysis once
   (:mod:`.memo`): a cache whose graph node reaches a node tagged ``kernel`` or
   ``launcher`` -- e.g. one importing a builder of another module inside its body -- is
   converted too (a delegating factory for ``--skip-delegating``). Every other cache keeps
   ``lru_cache`` and is listed with why (:attr:`FileMigration.kept`, ``path:line``); a
   kernel-reaching cache that stays one (its decorator is ``lru_cache`` only through
   another module, or the file could not be migrated) is :attr:`FileMigration.remaining`.
2. ``import flydsl.compiler as X`` and ``from flydsl import compiler as X`` become
   ``import flydsl_runtime.flyc as X``; ``from flydsl.compiler import a, b`` becomes
   ``from flydsl_runtime.flyc import a, b`` -- only when every name imported (or used as
   ``X.name``) is one the facade exports (:data:`FACADE_NAMES`), so no import breaks.

Added and rewritten imports go where isort/ruff ``I`` put them (:mod:`.imports`).
Everything else is kept byte for byte (libcst's lossless round trip; the file's encoding,
BOM and line endings -- each line's own, a final lone CR included -- kept; an added line
takes the file's first line ending), so running it twice changes nothing the second time.

Speed and safety: a file whose bytes cannot match either rewrite (:func:`may_change`: no
``flydsl``, or neither ``compiler`` nor ``functools`` + a cache + a kernel decorator) is
skipped unparsed, as are the files of a ``flydsl_runtime`` package (the facade wraps
``flydsl.compiler``). The rest is pre-checked (size, :func:`~.isolate.precheck`) and then
parsed in worker processes (:func:`~.isolate.run_isolated`), one file at a time, largest
first, so that a libcst crash or stall costs that file only. :func:`migrate_file` does the
same in-process (per-file rules only). A file whose outcome the no-change memo holds
(:class:`~.memo.Memo`) is not parsed, unless a kernel-reaching line of the graph
falls on one of its caches.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib.metadata
import io
import logging
import os
import stat
import tempfile
import tokenize
import traceback
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.codemod import (
    CodemodContext,
    SkipFile,
    SkipReason,
    TransformExit,
    TransformFailure,
    TransformResult,
    TransformSkip,
    TransformSuccess,
)

from ..static.parse import max_file_bytes
from ..static.project import Diagnostic, FileSystemTree
from .codemod import FACADE_NAMES, KEPT_NO_GRAPH, KEPT_NO_KERNEL, MigrateCommand, source_facts
from .isolate import Crashed, precheck, run_isolated
from .memo import Memo, MemoRecord, cached_factory_lines, kernel_reaching_caches

__all__ = [
    "FACADE_NAMES",
    "MAX_MIGRATE_BYTES",
    "FileMigration",
    "MigrateCommand",
    "may_change",
    "migrate_bytes",
    "migrate_file",
    "migrate_paths",
    "migrate_source",
]

log = logging.getLogger("flydeps.static")

#: A cache the per-file rules keep (its reason depends on whether a graph covered the file).
_UNREASONED = frozenset({KEPT_NO_KERNEL, KEPT_NO_GRAPH})


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
    #: ``(def line, name, why kept)`` of each ``lru_cache``/``cache`` function the codemod
    #: saw; ``why`` is empty for a converted one.
    caches: tuple[tuple[int, str, str], ...] = ()
    #: Notes: each cache kept, with why (``path:line``).
    kept: tuple[Diagnostic, ...] = ()
    #: A cache that reaches a kernel or launcher (whole-tree graph) and stays a cache.
    remaining: tuple[Diagnostic, ...] = ()
    #: What migrating ``after`` again found (``--write`` seeds the memo with it), if known.
    again: MemoRecord | None = None

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


def _failure(path: str, line: int, message: str, error: Exception, data: bytes = b"") -> FileMigration:
    result = TransformFailure(error=error, traceback_str="", warning_messages=[])
    return FileMigration(path, result, data, data, problem=Diagnostic(path, line, message))


def _skip(path: str, data: bytes, why: str) -> FileMigration:
    result = TransformSkip(skip_reason=SkipReason.OTHER, skip_description=why, warning_messages=[])
    return FileMigration(path, result, data, data)


def may_change(data: bytes) -> bool:
    """False when no rewrite can apply to a file with these bytes, decided without parsing:
    every rewrite names ``flydsl`` (the kernel decorators and the compiler both live there),
    an import rewrite names ``compiler``, a factory rewrite names ``functools``, a cache
    decorator (``lru_cache``/``cache``) and a kernel decorator (``kernel``/``jit``)."""
    if b"flydsl" not in data:
        return False
    if b"compiler" in data:
        return True
    return b"functools" in data and b"cache" in data and (b"kernel" in data or b"jit" in data)


def migrate_source(
    code: str, path: str = "<string>", *, skip_delegating: bool = False, reaching: Mapping[int, str] | None = None
) -> TransformResult:
    """Run :class:`MigrateCommand` on ``code``; libcst's result object, never an exception.
    Line endings come back as they were (libcst drops a file's final lone ``\\r``).
    ``reaching``: ``def`` line -> kernel for the caches the whole-tree graph shows reaching one."""
    return _run(code, path, skip_delegating, reaching)[0]


def transform_module(command: MigrateCommand, code: str) -> TransformResult:
    """libcst's ``transform_module`` (same results, never an exception) that hands the
    command the text it parsed and takes the result's code from the command when it has it
    (:attr:`MigrateCommand.text`): no code generation for a file that does not change, no
    re-parse of the project's tool's output (issue 38)."""
    try:
        command.source = code
        tree = cst.parse_module(code)
        output = command.transform_module(tree)
        text = command.text if command.text is not None else output.code
        return TransformSuccess(code=text, warning_messages=command.context.warnings)
    except KeyboardInterrupt:
        return TransformExit()
    except SkipFile as exc:
        return TransformSkip(
            skip_description=str(exc), skip_reason=SkipReason.OTHER, warning_messages=command.context.warnings
        )
    except Exception as exc:
        return TransformFailure(
            error=exc, traceback_str=traceback.format_exc(), warning_messages=command.context.warnings
        )


def _run(
    code: str, path: str, skip_delegating: bool, reaching: Mapping[int, str] | None
) -> tuple[TransformResult, tuple[tuple[int, str, str], ...]]:
    command = MigrateCommand(CodemodContext(filename=path), skip_delegating=skip_delegating, reaching=reaching)
    facts = source_facts(code)
    if facts is not None and facts.inert:  # nothing to rewrite or report: libcst's result, without libcst
        return TransformSuccess(code=code, warning_messages=[]), ()
    command.preset(facts)
    result = transform_module(command, code)
    caches = tuple(command.cache_functions)
    if isinstance(result, TransformSuccess) and code.endswith("\r") and not code.endswith("\r\n"):
        # libcst 1.9's tokenizer drops exactly one final lone CR, whatever precedes it
        return TransformSuccess(warning_messages=result.warning_messages, code=result.code + "\r"), caches
    return result, caches


def migrate_file(path: str, *, skip_delegating: bool = False) -> FileMigration:
    """Read, screen (:func:`may_change`), decode (PEP 263 / BOM), pre-check and migrate one
    file in this process with the per-file rules only (no whole-tree graph); nothing is
    written. :func:`migrate_paths` runs the parse in worker processes instead, so that a
    crash of libcst cannot end the caller."""
    data = _read(path)
    if isinstance(data, FileMigration):
        return data
    record = _screen(path, data) or migrate_bytes(path, data, max_bytes(), skip_delegating=skip_delegating)
    return _judge(record, None)


#: libcst parses about 1,000 lines a second and needs ~30x the file's size in memory.
MAX_MIGRATE_BYTES = 4 << 20


def max_bytes() -> int:
    """Files above this size are reported, not parsed: the smaller of ``FLYDEPS_MAX_FILE_BYTES``
    and :data:`MAX_MIGRATE_BYTES`."""
    return min(max_file_bytes(), MAX_MIGRATE_BYTES)


def _read(path: str) -> bytes | FileMigration:
    """The bytes of a regular file; a FIFO or device is reported, never opened for reading
    in blocking mode (it would hang)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                skipped = _skip(path, b"", "not a regular file")
                note = Diagnostic(path, 1, "not a regular file (a FIFO, socket or device); skipped", note=True)
                return dataclasses.replace(skipped, problem=note)
            return handle.read()
    except OSError as exc:
        return _failure(path, 1, f"cannot read: {exc.strerror or exc}; check the path and its permissions", exc)


def _screen(path: str, data: bytes, *, parse: bool = False) -> FileMigration | None:
    """A skip record for a file no rewrite can touch, else None (it must be parsed);
    ``parse``: the graph has a cache in this file, so parse it anyway (to convert or report it)."""
    if not parse and not may_change(data):
        return _skip(path, data, "names nothing a rewrite applies to (flydsl.compiler, a cached kernel builder)")
    if "flydsl_runtime" in os.path.normpath(os.path.abspath(path)).split(os.sep):
        return _skip(path, data, "part of the flydsl_runtime facade, which wraps flydsl.compiler itself")
    return None


def migrate_bytes(
    path: str,
    data: bytes,
    limit: int,
    *,
    skip_delegating: bool = False,
    reaching: Mapping[int, str] | None = None,
    again: bool = False,
) -> FileMigration:
    """Decode, pre-check (:func:`~.isolate.precheck`) and migrate a file's bytes; ``again``:
    when the file changes, migrate the result too (``reaching={}``) and keep what that
    found when it changes nothing (:attr:`FileMigration.again`, the memo's seed)."""
    if len(data) > limit:
        error = ValueError(f"{len(data)} bytes")
        why = f"too large to migrate ({len(data) / 1e6:.1f} MB > {limit / 1e6:.1f} MB); migrate it by hand"
        return _failure(path, 1, why, error, data)
    try:
        encoding = tokenize.detect_encoding(io.BytesIO(data).readline)[0]
        text = data.decode(encoding)
    except SyntaxError as exc:  # a bad coding cookie
        return _failure(path, exc.lineno or 1, f"{exc.msg}; fix the coding declaration", exc, data)
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        return _failure(
            path,
            line,
            f"cannot decode as {encoding}: {exc.reason} (byte {data[exc.start]:#04x}); "
            f"save the file as {encoding} or declare its encoding in a `# coding:` line",
            exc,
            data,
        )
    too_deep = precheck(text)
    if too_deep is not None:
        return _failure(path, *too_deep, RecursionError(too_deep[1]), data)
    result, caches = _run(text, path, skip_delegating, reaching)
    if isinstance(result, TransformFailure):  # kept whole: the traceback is logged with -v
        problem = Diagnostic(path, *_explain(result.error, text, path))
        return FileMigration(path, result, data, data, encoding, problem, caches)
    if not isinstance(result, TransformSuccess):
        return FileMigration(path, result, data, data, encoding, caches=caches)
    after = result.code.encode(encoding)
    seed = None
    if again and after != data:
        second, second_caches = _run(result.code, path, skip_delegating, {})
        if isinstance(second, TransformSuccess) and second.code == result.code:
            seed = _memo_record(second.warning_messages, second_caches)
    return FileMigration(path, result, data, after, encoding, caches=caches, again=seed)


def _memo_record(warnings: Sequence[str], caches: Sequence[tuple[int, str, str]]) -> MemoRecord:
    """The memo's form: the per-file rules' reason stored as ``none`` (worded at replay)."""
    rows = tuple((line, name, "none" if why in _UNREASONED else why) for line, name, why in caches)
    return MemoRecord(tuple(warnings), rows)


def _judge(record: FileMigration, reaching: Mapping[int, str] | None) -> FileMigration:
    """Add the notes on kept caches and the kernel-reaching caches left (see the contract)."""
    path = record.path
    kept = tuple(
        Diagnostic(path, line, f"kept functools.lru_cache on {name}: {why}", note=True)
        for line, name, why in record.caches
        if why
    )
    remaining: list[Diagnostic] = []
    if reaching:
        seen = {line: why for line, _, why in record.caches}
        done = cached_factory_lines(record.before) if set(reaching) - set(seen) else frozenset()
        for line, kernel in sorted(reaching.items()):
            why = seen.get(line)
            if why == "" or (why or "").startswith("--skip-delegating") or (why is None and line in done):
                continue
            if why is None:
                why = (
                    f"the file was not migrated ({record.problem.message})"
                    if record.problem is not None
                    else "its cache decorator is not functools.lru_cache/functools.cache by name in this file "
                    "(imported through another module?)"
                )
            remaining.append(
                Diagnostic(
                    path,
                    line,
                    f"this cache reaches {kernel} but stays a cache: {why}; decorate it with "
                    "flydeps.cached_factory (same arguments) by hand",
                )
            )
    return dataclasses.replace(record, kept=kept, remaining=tuple(remaining))


def _explain(error: Exception, text: str, path: str) -> tuple[int, str]:
    """Line and message of a failed transform; syntax errors as CPython words and places
    them (libcst's parser points at the next token), like ``flydeps graph`` does."""
    if isinstance(error, SyntaxError):  # CPython's parser (the codemod's ast pass) refused what libcst took
        return error.lineno or 1, f"syntax error: {error.msg}; fix the file"
    if not isinstance(error, cst.ParserSyntaxError):
        return 1, f"flydeps migrate failed: {type(error).__name__}: {error}; please report this with the file"
    try:
        compile(text, path, "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, RecursionError, MemoryError) as exc:
        if not isinstance(exc, SyntaxError):
            return error.raw_line, f"syntax error: {type(exc).__name__} in CPython's parser; fix the file"
        return exc.lineno or error.raw_line, f"syntax error: {exc.msg}; fix the file"
    version = importlib.metadata.version("libcst")
    return error.raw_line, (
        f"libcst {version} cannot parse this file ({error.message}) although this Python can; "
        "upgrade libcst (pip install -U libcst) or migrate the file by hand"
    )


def _python_files(paths: Iterable[str]) -> Iterator[str | FileMigration]:
    """Every ``.py`` file under ``paths`` once (by real path), in order; a failure record
    for a missing path."""
    tree = FileSystemTree()
    seen: set[str] = set()
    for path in paths:
        if os.path.isdir(path):
            files = tree.python_files(path)
        elif os.path.lexists(path):
            files = [path]
        else:
            yield _failure(path, 1, "no such file or directory; check the PATH argument", FileNotFoundError(path))
            continue
        for file in files:
            key = os.path.realpath(file)
            if key not in seen:
                seen.add(key)
                yield file


def migrate_paths(
    paths: Iterable[str],
    *,
    skip_delegating: bool = False,
    workers: int | None = None,
    graph: bool = True,
    memo: Memo | None = None,
    seed: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Iterator[FileMigration]:
    """Every ``.py`` file under ``paths`` (each file once, in order), migrated in memory.

    ``graph``: run the whole-tree static analysis once (:func:`.memo.kernel_reaching_caches`)
    so that every cache reaching a kernel or launcher is converted, and each record says
    which caches were kept and why (:attr:`FileMigration.kept`) and which reaching one
    stays (:attr:`FileMigration.remaining`). ``memo``: answer a file from the no-change memo
    when it may (see :mod:`.memo`) and store each unchanged file's outcome;
    ``seed``: also store the outcome of migrating each changed file's result (for a
    ``--write`` run, so the next ``--check`` finds it). ``progress(done, total)`` is called
    as files are decided.

    Files :func:`may_change` rules out (and the graph has no cache in) are never parsed;
    the others are parsed in up to ``workers`` (default: the usable CPUs) worker
    processes, largest first, where a libcst crash or a parse that outlives its time
    becomes that file's ``path:line: message``."""
    paths = list(paths)
    reach = kernel_reaching_caches(paths) if graph else None
    records: list[FileMigration | None] = []
    jobs: list[_Job] = []
    slots: list[int] = []  # jobs[i] fills records[slots[i]]
    reaches: list[Mapping[int, str] | None] = []  # per record
    limit = max_bytes()
    for file in _python_files(paths):
        read = file if isinstance(file, FileMigration) else _read(file)
        reaching = reach.of(str(file)) if reach is not None else None
        reaches.append(reaching)
        parse = reach is not None and os.path.realpath(str(file)) in reach.factories
        record = _screen(str(file), read, parse=parse) if isinstance(read, bytes) else read
        if record is None and isinstance(read, bytes):
            hit = memo.get(str(file), read) if memo is not None else None
            if hit is not None and not set(reaching or ()) & {line for line, _, _ in hit.caches}:
                record = _replay(str(file), read, hit, reaching)
            else:
                slots.append(len(records))
                jobs.append(_Job(str(file), read, limit, skip_delegating, reaching, seed))
        records.append(record)
    total, decided = len(records), len(records) - len(jobs)
    if progress is not None:
        progress(decided, total)
    order = sorted(range(len(jobs)), key=lambda i: -len(jobs[i].data))  # the largest first: no long tail
    queue = [jobs[i] for i in order]
    done = 0
    count = min(workers if workers is not None else _usable_cpus(), len(jobs))
    for index, outcome in run_isolated(_migrate_job, queue, workers=count, timeout=_deadline):
        job = queue[index]
        slot = slots[order[index]]
        record = outcome if isinstance(outcome, FileMigration) else _crashed(job, outcome)
        if memo is not None:
            _remember(memo, record, job.reaching)
        records[slot] = record
        decided += 1
        if progress is not None:
            progress(decided, total)
        while done < len(records) and records[done] is not None:
            yield _judge(records[done], reaches[done])  # type: ignore[arg-type]
            done += 1
    for rest in range(done, len(records)):
        yield _judge(records[rest], reaches[rest])  # type: ignore[arg-type]


def _replay(path: str, data: bytes, hit: MemoRecord, reaching: Mapping[int, str] | None) -> FileMigration:
    """A memo hit as a record: nothing changes, the same warnings and kept caches."""
    kept = KEPT_NO_GRAPH if reaching is None else KEPT_NO_KERNEL
    caches = tuple((line, name, kept if why == "none" else why) for line, name, why in hit.caches)
    result = TransformSkip(
        skip_reason=SkipReason.OTHER,
        skip_description="unchanged since an earlier run (migrate memo)",
        warning_messages=list(hit.warnings),
    )
    return FileMigration(path, result, data, data, caches=caches)


def _remember(memo: Memo, record: FileMigration, reaching: Mapping[int, str] | None) -> None:
    """Store an unchanged file's outcome, or the seed of a changed one; never one the graph
    decided (a cache at a kernel-reaching line) nor a failure."""
    if record.problem is not None or not isinstance(record.result, TransformSuccess):
        return
    if record.changed:
        if record.again is not None:
            memo.put(record.path, record.after, record.again)
        return
    if set(reaching or ()) & {line for line, _, _ in record.caches}:
        return
    memo.put(record.path, record.before, _memo_record(record.warnings, record.caches))


@dataclass(frozen=True)
class _Job:
    """One file for a worker: its bytes, the size limit and the options."""

    path: str
    data: bytes
    limit: int
    skip_delegating: bool
    reaching: Mapping[int, str] | None = None
    again: bool = False


def _usable_cpus() -> int:
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


def _deadline(job: _Job) -> float:
    """Seconds a file may take: generous for libcst's ~1,000 lines a second on a busy machine."""
    return 120.0 + len(job.data) / 2_000


def _migrate_job(job: _Job) -> FileMigration:
    """The worker side of :func:`migrate_paths`: one file's bytes to a picklable record."""
    path, data = job.path, job.data
    migration = migrate_bytes(
        path, data, job.limit, skip_delegating=job.skip_delegating, reaching=job.reaching, again=job.again
    )
    if isinstance(migration.result, TransformFailure):  # libcst's exceptions may not unpickle
        error = RuntimeError(f"{type(migration.result.error).__name__}: {migration.result.error}")
        result = TransformFailure(error=error, traceback_str=migration.traceback, warning_messages=[])
        migration = dataclasses.replace(migration, result=result)
    return migration


def _crashed(job: _Job, crash: Crashed) -> FileMigration:
    version = importlib.metadata.version("libcst")
    message = (
        f"libcst {version} {crash.reason} while migrating this file; nothing was changed, "
        "migrate it by hand (and please report the file)"
    )
    return _failure(job.path, 1, message, RuntimeError(crash.reason), job.data)
