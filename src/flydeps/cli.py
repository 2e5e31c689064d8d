"""The ``flydeps`` command line: ``graph``, ``hash``, ``diff`` and ``migrate`` over source files,
and ``aot build``.

Contract: argument parsing and output only; the analysis lives in :mod:`flydeps.static`
and never imports the user's code. ``aot build`` is the exception by design: it imports
and runs the SPEC it is given, through :mod:`flydsl_runtime.aot.build` (imported only for
that command, so the rest works without FlyDSL). Results go to stdout (or ``-o FILE``); diagnostics go
through the ``flydeps`` logger to stderr as ``path:line: message`` (``path: message`` for
a file as a whole). Exit status: 0 ok, 1 analysis problems (everything readable was still
analysed and reported), 2 usage or configuration errors (a bad argument, a bad
``FLYDEPS_*`` value), 130 interrupted. Whatever goes wrong, the user sees one line per
problem on stderr, never a traceback (``-v`` adds it for an internal error); a closed
stdout (``flydeps graph | head``) ends the command quietly.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .settings import SettingError, validate

__all__ = ["main"]

log = logging.getLogger("flydeps.cli")

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true", help="log what the analyzer does")
    common.add_argument("--no-cache", action="store_true", help="do not read or write the parse cache")
    parser = argparse.ArgumentParser(prog="flydeps", description="What FlyDSL kernels depend on, from source only.")
    parser.add_argument("--version", action="version", version=f"flydeps {_version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    completion = sub.add_parser(
        "completion",
        help='print a shell completion script: eval "$(flydeps completion bash)" (or zsh, tcsh)',
    )
    completion.add_argument("shell", choices=("bash", "zsh", "tcsh"))
    graph = sub.add_parser("graph", parents=[common], help="dependency graph of every factory/kernel/launcher in PATH")
    graph.add_argument(
        "paths", nargs="*", metavar="PATH[::QUALNAME]", help="files or directories (default: the current directory)"
    )
    _add_root(graph)
    from .static.report import FORMATS

    graph.add_argument("--format", choices=sorted(FORMATS), default="tree")
    graph.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    graph.add_argument(
        "--externals",
        nargs="?",
        const="show",
        choices=("show", "collapse", "hide"),
        help="library leaves: show each (tree: one per line), collapse them (the default: one line in the tree, "
        "one node per library in dot/mermaid) or hide them (--externals alone: show)",
    )
    graph.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    graph.add_argument("--legend", action="store_true", help="end the tree with what each column and marker means")
    graph.add_argument(
        "--calls",
        action="store_true",
        help="solve the whole call graph too and mark each use of code (call) or (ref) (tree, json)",
    )
    hash_ = sub.add_parser("hash", parents=[common], help="transitive digest of one function, method or class")
    hash_.add_argument(
        "target",
        nargs="?",
        metavar="PATH::QUALNAME",
        help="e.g. kernels/x.py::compile_x (after -- if PATH starts with -)",
    )
    _add_root(hash_)
    diff = sub.add_parser("diff", parents=[common], help="factories/kernels whose digest differs between git revisions")
    diff.add_argument("revs", nargs="+", metavar="REV", help="REV (vs the working tree) or REV REV2; then -- PATH...")
    diff.add_argument("--format", choices=("text", "json"), default="text")
    diff.add_argument(
        "--exit-code",
        action="store_true",
        help="exit 1 when any root changed, 0 when none did (as git diff --exit-code: a CI step for "
        "'which AOT entries must be rebuilt')",
    )
    _add_root(diff)
    migrate = sub.add_parser("migrate", help="rewrite lru_cache compile factories and flydsl.compiler imports (libcst)")
    migrate.add_argument("paths", nargs="*", metavar="PATH", help="files or directories (at least one)")
    migrate.add_argument("--write", action="store_true", help="rewrite the files (default: print a unified diff)")
    migrate.add_argument("--check", action="store_true", help="exit 1 when any file would change (for CI)")
    migrate.add_argument(
        "--skip-delegating",
        action="store_true",
        help="keep lru_cache on delegating factories (they only call a kernel builder of the module), with a warning",
    )
    migrate.add_argument("-v", "--verbose", action="store_true", help="log each file's outcome")
    aot = sub.add_parser("aot", help="ahead-of-time builds of FlyDSL kernels (imports and runs SPEC; needs FlyDSL)")
    aot_sub = aot.add_subparsers(dest="aot_command", required=True)
    aot_build = aot_sub.add_parser(
        "build", help="compile every specialization SPEC yields, for each arch, into one shippable directory"
    )
    aot_build.add_argument(
        "spec", metavar="SPEC", nargs="?", help="package.module:function or path/to/file.py:function (or --manifest M)"
    )
    aot_build.add_argument(
        "--manifest", metavar="M", help="build what an AOT manifest lists (flydeps aot record) instead of a SPEC"
    )
    aot_build.add_argument("--arch", required=True, help="comma-separated arches, e.g. gfx942,gfx950")
    aot_build.add_argument("--out", required=True, metavar="DIR", help="the directory to build into (and reuse)")
    aot_build.add_argument(
        "--jobs",
        type=int,
        default=None,
        help="local worker processes (default: one per usable CPU, within the affinity and a cgroup's quota, "
        "as many as the available memory holds at 1 GiB each)",
    )
    aot_build.add_argument(
        "--executor",
        default="local",
        metavar="local|dask://HOST:PORT",
        help="where the builds run: a local process pool (default) or a Dask distributed scheduler",
    )
    aot_build.add_argument(
        "--prune",
        action="store_true",
        help="afterwards, delete from DIR the index rows and FlyDSL artifacts this build does not use "
        "(left by earlier builds: edited helpers, dropped specializations); nothing when one failed",
    )
    aot_build.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    aot_build.add_argument("-v", "--verbose", action="store_true", help="log what the build does")
    aot_record = aot_sub.add_parser(
        "record", help="run a command, appending every specialization its launchers call to an AOT manifest"
    )
    aot_record.add_argument(
        "--manifest",
        metavar="M",
        default="aot-manifest.jsonl",
        help="the manifest to append to (default: ./aot-manifest.jsonl; made when missing)",
    )
    aot_record.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command to run and record")
    aot_record.set_defaults(paths=[])  # what follows ``--``: the command
    aot_merge = aot_sub.add_parser("merge", help="merge AOT manifests into one (union, duplicates dropped, checked)")
    aot_merge.add_argument("inputs", nargs="*", metavar="MANIFEST", help="manifests to merge (at least one)")
    aot_merge.add_argument("-o", "--output", required=True, metavar="M", help="the merged manifest (may be an input)")
    aot_merge.set_defaults(paths=[])  # what follows ``--``: more manifests
    aot_list = aot_sub.add_parser("list", help="the specializations a built directory holds (reads only)")
    aot_list.add_argument("dir", metavar="DIR", help="a directory an aot build wrote (its --out)")
    aot_list.add_argument("--format", choices=("text", "json"), default="text")
    aot_list.add_argument(
        "--no-artifacts", action="store_true", help="do not look for each row's FlyDSL artifact (faster)"
    )
    aot_list.add_argument("-v", "--verbose", action="store_true", help="log what the listing does")
    aot_plan = aot_sub.add_parser(
        "plan", help="which manifest entries a built directory holds, which the tree invalidates (static; reads only)"
    )
    aot_plan.add_argument("--manifest", required=True, metavar="M", help="the AOT manifest (JSON lines) to plan")
    aot_plan.add_argument("--out", required=True, metavar="DIR", help="the directory an aot build wrote (its --out)")
    aot_plan.add_argument(
        "--since", metavar="REV", help="report what the commits since REV (to the working tree) change"
    )
    aot_plan.add_argument("--arch", help="comma-separated arches to plan for (default: those DIR holds)")
    aot_plan.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="DIR",
        help="a source root the launchers' modules are under (repeatable; default: the current directory)",
    )
    aot_plan.add_argument("--exit-code", action="store_true", help="exit 1 when anything must be (re)built")
    aot_plan.add_argument("--format", choices=("text", "json"), default="text")
    aot_plan.add_argument("-v", "--verbose", action="store_true", help="log what the plan does")
    _add_cache_parser(sub)
    return parser


def _version() -> str:
    """The installed distribution's version (the package's own when run from a checkout)."""
    from importlib import metadata

    try:
        return metadata.version("flydeps")
    except metadata.PackageNotFoundError:
        from . import __version__

        return f"{__version__} (not installed)"


def _add_root(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="DIR",
        help="directory on which modules are resolved (repeatable; default: detected)",
    )


def _setup_logging(verbose: bool) -> None:
    """The command's messages on stderr (``-v``: debug too), for the command's duration:
    :func:`main` puts the ``flydeps`` logger back as it found it when the command ends."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("flydeps")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False


def _logging_state() -> tuple[list[logging.Handler], int, bool]:
    root = logging.getLogger("flydeps")
    return list(root.handlers), root.level, root.propagate


def _restore_logging(state: tuple[list[logging.Handler], int, bool]) -> None:
    handlers, level, propagate = state
    root = logging.getLogger("flydeps")
    root.handlers[:] = handlers
    root.setLevel(level)
    root.propagate = propagate


def _report(diagnostics: Sequence[object]) -> int:
    """Log each diagnostic once; notes (``note=True``) are information, not problems."""
    problems = 0
    for diagnostic in dict.fromkeys(diagnostics):
        if getattr(diagnostic, "note", False):
            log.info("%s", diagnostic)
        else:
            problems += 1
            log.error("%s", diagnostic)
    return EXIT_PROBLEMS if problems else EXIT_OK


def _write(text: str, output: str | None) -> bool:
    """Write the report; False (after logging why) when ``-o FILE`` cannot be written."""
    if not output:
        sys.stdout.write(text)
        return True
    try:
        Path(output).write_text(text, encoding="utf-8", errors="surrogateescape")
    except OSError as exc:
        log.error("flydeps: cannot write %s: %s; choose another -o FILE", _shown(output), exc.strerror or exc)
        return False
    return True


def _cmd_graph(args: argparse.Namespace) -> int:
    from .static.analyze import analyze
    from .static.report import ReportOptions, format_graph

    paths = args.paths or ["."]  # as ruff and pytest do: the current directory
    if args.legend and args.format != "tree":
        raise _UsageError(f"flydeps graph: --legend explains the tree format, not {args.format}; drop one of them")
    if args.calls and args.format in ("dot", "mermaid"):
        raise _UsageError(f"flydeps graph: --calls labels the tree and json, not {args.format}; drop one of them")
    _check_targets("graph", paths)
    calls = args.format == "pycg" or args.calls
    result = analyze(paths, roots=args.root, use_cache=not args.no_cache, calls=calls)
    colour = args.color == "always" or (
        args.color == "auto" and not args.output and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    )
    externals = args.externals or "collapse"
    options = ReportOptions(
        colour=colour,
        expand_external=externals == "show",
        legend=args.legend,
        calls=result.calls,
        externals=externals,
    )
    text = format_graph(args.format, result.graph, result.digests, result.diagnostics, options)
    if not _write(text, args.output):
        return EXIT_USAGE
    return _report(result.diagnostics)


def _cmd_hash(args: argparse.Namespace) -> int:
    from .static.analyze import analyze, split_target

    _check_targets("hash", [args.target])
    if not split_target(args.target)[1]:
        raise _UsageError(
            f"flydeps hash: {args.target!r} names no function; give PATH::QUALNAME, "
            "e.g. kernels/attention/flash.py::compile_flash_attention"
        )
    result = analyze([args.target], roots=args.root, use_cache=not args.no_cache)
    if not result.graph.roots:
        return _report(result.diagnostics) or EXIT_PROBLEMS
    sys.stdout.write(result.digests[result.graph.roots[0]] + "\n")
    return _report(result.diagnostics)


class _UsageError(Exception):
    """A bad argument: its one-line message is printed and the exit status is 2."""


def _check_targets(command: str, targets: Sequence[str]) -> None:
    """Reject a ``PATH::QUALNAME`` argument with an empty side or an odd qualname before
    any analysis, naming the argument (not ``:1: no such file``)."""
    from .static.analyze import split_target
    from .static.project import one_line

    example = "e.g. kernels/attention/flash.py::compile_flash_attention"
    for target in targets:
        path, qual = split_target(target)
        shown = repr(one_line(target))
        if not path:
            what = "is empty" if not target else "has no PATH before '::'"
            raise _UsageError(f"flydeps {command}: argument {shown} {what}; give PATH or PATH::QUALNAME, {example}")
        if qual is not None and ("::" in qual or not qual.isprintable() or qual != qual.strip()):
            raise _UsageError(
                f"flydeps {command}: {shown} is not PATH::QUALNAME (one '::', then a dotted name), {example}"
            )


def _cmd_diff(args: argparse.Namespace, paths: list[str]) -> int:
    import json

    from .static.diff import GitError, diff_revisions, render_diff, repo_root

    if len(args.revs) > 2:
        log.error("flydeps diff: at most two revisions (REV [REV2]); put paths after --")
        return EXIT_USAGE
    try:
        repo = repo_root()
        rel = [os.path.relpath(os.path.abspath(p), repo) for p in paths] or ["."]
        roots = [os.path.relpath(os.path.abspath(r), repo) for r in args.root]
        rev2 = args.revs[1] if len(args.revs) > 1 else None
        result = diff_revisions(repo, args.revs[0], rev2, rel, roots=roots, use_cache=not args.no_cache)
    except GitError as exc:
        log.error("flydeps diff: %s", exc)
        return EXIT_USAGE
    if args.format == "json":
        doc = {
            "schema": "flydeps.diff/1",
            "changed": [
                {"root": c.root, "status": c.status, "nodes": [{"id": n, "status": s} for n, s in c.changed]}
                for c in result.changes
            ],
            "unchanged": list(result.unchanged),
        }
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(render_diff(result))
    status = _report(result.diagnostics)
    return 1 if status == 0 and args.exit_code and result.changes else status


def _cmd_migrate(args: argparse.Namespace) -> int:
    from .migrate.memo import Memo
    from .migrate.tree import migrate_paths

    changed: list[str] = []
    diagnostics: list[object] = []
    remaining: list[object] = []
    memo = Memo.open(f"skip_delegating={bool(args.skip_delegating)}")
    progress = _Progress("flydeps migrate") if sys.stderr.isatty() else None
    try:
        for migration in migrate_paths(
            args.paths, skip_delegating=args.skip_delegating, memo=memo, seed=args.write, progress=progress
        ):
            if progress is not None:
                progress.clear()
            for warning in migration.warnings:
                log.warning("%s", warning)
            for note in migration.kept:
                log.info("%s", note)
            for left in migration.remaining:
                (log.error if args.check else log.warning)("%s", left)
                remaining.append(left)
            log.debug("%s: %s", migration.path, "changes" if migration.changed else type(migration.result).__name__)
            if migration.traceback:
                log.debug("%s", migration.traceback)
            problem = migration.problem or (migration.write() if args.write else None)
            if problem is not None:
                diagnostics.append(problem)
            elif migration.changed:
                changed.append(migration.path)
                if args.write:
                    log.info("rewrote %s", migration.path)
                else:
                    sys.stdout.write(migration.diff())
    finally:
        if progress is not None:
            progress.clear()
    if args.write and changed:  # the next --check then finds the analysis of the written files cached
        from .migrate.memo import kernel_reaching_caches

        kernel_reaching_caches(args.paths)
    status = _report(diagnostics)
    files = f"{len(changed)} file{'' if len(changed) == 1 else 's'}"
    log.info("%s %s", files, "changed" if args.write else "would change")
    if remaining:
        log.info(
            "%d cache%s reach%s a kernel or launcher and stay%s lru_cache (listed above)",
            len(remaining),
            *(("", "es", "s") if len(remaining) == 1 else ("s", "", "")),
        )
    log.debug("migrate memo: %d hits, %d misses", memo.hits, memo.misses)
    return status or (EXIT_PROBLEMS if args.check and (changed or remaining) else EXIT_OK)


class _Progress:
    """``label: done/total files`` on stderr (a terminal), redrawn with a carriage return,
    shown once the run has taken more than two seconds."""

    def __init__(self, label: str, delay: float = 2.0) -> None:
        import time

        self.clock = time.monotonic
        self.label, self.start, self.delay, self.shown = label, self.clock(), delay, False

    def __call__(self, done: int, total: int) -> None:
        if self.clock() - self.start < self.delay or total == 0:
            return
        sys.stderr.write(f"\r{self.label}: {done}/{total} files ({100 * done // total}%)")
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[K")
            sys.stderr.flush()
            self.shown = False


def _options_after(parser: argparse.ArgumentParser, command: str, after: list[str]) -> tuple[list[str], list[str]]:
    """Split what follows ``--`` into the command's own options and paths, so that
    ``flydeps diff HEAD -- src --format json`` works. A path that starts with ``-`` and is
    also an option name must be written ``./-name``."""
    sub = next(a for a in parser._subparsers._group_actions if isinstance(a, argparse._SubParsersAction))  # type: ignore[union-attr]
    known = sub.choices[command]._option_string_actions
    options: list[str] = []
    paths: list[str] = []
    tokens = iter(after)
    for token in tokens:
        action = known.get(token.partition("=")[0])
        if action is None or action.option_strings == ["-h", "--help"]:
            paths.append(token)
            continue
        options.append(token)
        value = next(tokens, None) if action.nargs is None and "=" not in token else None
        if value is not None:  # an option with a value: take it too (argparse reports a missing one)
            options.append(value)
    return options, paths


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``flydeps`` console script and ``python -m flydeps``. Called from
    Python (a build script, a notebook, a test), it leaves the ``flydeps`` logger's
    handlers, level and propagation as they were: its stderr handler, bound to the
    ``sys.stderr`` of the call, never outlives the command."""
    saved = _logging_state()
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    finally:
        _restore_logging(saved)


def _main(argv: list[str]) -> int:
    verbose = "-v" in argv or "--verbose" in argv
    failure = "internal error"
    try:
        _setup_logging(verbose)
        _tolerate_odd_bytes()
        status = _run(argv)
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return status
    except _UsageError as exc:
        log.error("%s", exc)
        return EXIT_USAGE
    except SettingError as exc:
        log.error("flydeps: %s", exc)
        return EXIT_USAGE
    except KeyboardInterrupt:
        log.error("flydeps: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        _silence_stdout()
        return EXIT_PROBLEMS
    except MemoryError:
        failure = "out of memory"  # reported below, once the failed frames are freed
    except RecursionError:
        failure = "nesting too deep"
    except OSError as exc:
        where = f"{_shown(exc.filename)}: " if exc.filename is not None else ""
        log.error("flydeps: %s%s", where, exc.strerror or exc)
        return EXIT_PROBLEMS
    except Exception as exc:  # a bug: one line for the user, the traceback with -v
        log.debug("flydeps: internal error", exc_info=True)
        failure = f"internal error ({type(exc).__name__}: {_shown(str(exc))[:200]}); rerun with -v and report it"
    log.error("flydeps: %s while analysing %s", failure, _shown(" ".join(_paths_in(argv))) or "the arguments")
    return EXIT_PROBLEMS


def _run(argv: list[str]) -> int:
    validate()  # every FLYDEPS_* value, whether or not this command reads it: exit 2 on a bad one
    after: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, after = argv[:cut], argv[cut + 1 :]
    parser = _parser()
    try:
        args = parser.parse_args(argv)
        options, after = _options_after(parser, args.command, after)
        if options:
            args = parser.parse_args([*argv, *options])
    except SystemExit as exc:
        return int(exc.code or 0) and EXIT_USAGE
    _setup_logging(getattr(args, "verbose", False))
    if args.command == "hash":
        targets = [*([args.target] if args.target is not None else []), *after]
        if len(targets) != 1:
            raise _UsageError("flydeps hash: give exactly one PATH::QUALNAME (after -- if PATH starts with -)")
        args.target = targets[0]
    elif after and args.command not in ("diff", "completion"):
        args.paths = [*args.paths, *after]
    if args.command == "migrate" and not args.paths:
        raise _UsageError("flydeps migrate: give at least one PATH (a file or a directory)")
    if args.command == "completion":
        return _cmd_completion(args, parser)
    if args.command == "graph":
        return _cmd_graph(args)
    if args.command == "hash":
        return _cmd_hash(args)
    if args.command == "migrate":
        return _cmd_migrate(args)
    if args.command == "aot":
        if args.aot_command in ("record", "merge"):
            return _cmd_aot_record_merge(args)
        if args.aot_command == "plan":
            return _cmd_aot_plan(args)
        return _cmd_aot_list(args) if args.aot_command == "list" else _cmd_aot_build(args)
    if args.command == "cache":
        return _cmd_cache(args)
    return _cmd_diff(args, after)


def _cmd_completion(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The completion script for ``args.shell``, generated from this parser by shtab (so it
    never lags behind the commands and options)."""
    import shtab

    sys.stdout.write(shtab.complete(parser, shell=args.shell))
    return EXIT_OK


def _cmd_aot_plan(args: argparse.Namespace) -> int:
    """``flydeps aot plan``: the plan on stdout; 1 with --exit-code when anything must be
    (re)built, 2 on bad input."""
    try:
        from flydsl_runtime.aot.plan import run
    except ImportError as exc:
        raise _UsageError(f"flydeps aot plan needs FlyDSL (pip install 'flydeps[flydsl]'): {exc}") from None
    return run(args)


def _cmd_aot_record_merge(args: argparse.Namespace) -> int:
    """``flydeps aot record -- COMMAND`` (the command's exit status) and ``flydeps aot merge``
    (2 when a line is bad: each named ``file:line``, nothing written)."""
    try:
        from flydsl_runtime.aot import record
    except ImportError as exc:
        needs = f"flydeps aot {args.aot_command} needs FlyDSL (pip install 'flydeps[flydsl]'): {exc}"
        raise _UsageError(needs) from None
    return record.run_record(args) if args.aot_command == "record" else record.run_merge(args)


def _cmd_aot_build(args: argparse.Namespace) -> int:
    """``flydeps aot build``: the summary on stdout; 1 when a specialization failed or
    ``--prune`` could not prune."""
    if args.jobs is not None and args.jobs < 1:
        raise _UsageError(f"flydeps aot build: --jobs must be at least 1, got {args.jobs}")
    if (args.spec is None) == (args.manifest is None):
        raise _UsageError("flydeps aot build: give SPEC or --manifest M, exactly one of them")
    try:
        from flydsl_runtime.aot.build import BuildInterrupted, SpecError, build
    except ImportError as exc:
        raise _UsageError(f"flydeps aot build needs FlyDSL (pip install 'flydeps[flydsl]'): {exc}") from None
    arches = [a.strip() for a in args.arch.split(",") if a.strip()]
    try:
        summary = build(
            args.spec,
            arches,
            Path(args.out),
            jobs=args.jobs,
            progress=not args.no_progress,
            executor=args.executor,
            prune=args.prune,
            manifest=args.manifest,
            reuse_here=True,  # this process imported nothing of the spec before: its probes are a new worker's
        )
    except (SpecError, ValueError) as exc:
        raise _UsageError(_shown(str(exc))) from None
    except BuildInterrupted as stopped:
        log.error("flydeps: %s", _shown(str(stopped)))
        return EXIT_INTERRUPTED
    sys.stdout.write("\n".join(summary.lines()) + "\n")
    unpruned = summary.pruned is not None and bool(summary.pruned.skipped)  # asked for, not done
    return EXIT_PROBLEMS if summary.failed or unpruned else EXIT_OK


def _cmd_aot_list(args: argparse.Namespace) -> int:
    """``flydeps aot list DIR``: one line per specialization (or JSON); each row it cannot
    list (damaged, or not written by a build) one line on stderr naming it; 1 when an
    artifact is missing (a runtime would trace that specialization) or a row is bad, 2 when
    DIR has no readable index."""
    try:
        from flydsl_runtime.persist.index import INDEX_NAME, IndexReadError
        from flydsl_runtime.persist.strict import listing, toolchain_here
    except ImportError as exc:
        raise _UsageError(f"flydeps aot list needs FlyDSL (pip install 'flydeps[flydsl]'): {exc}") from None
    try:
        found = listing(Path(args.dir), check_artifacts=not args.no_artifacts)
    except IndexReadError as exc:
        raise _UsageError(f"flydeps aot list: {_shown(str(exc))}") from None
    for bad in found.bad:
        log.error("%s: %s", _shown(str(Path(args.dir) / INDEX_NAME)), _shown(bad.line()))
    rows = found.rows
    missing = sum(r.artifact is False for r in rows)
    if args.format == "json":
        import dataclasses
        import json

        sys.stdout.write(json.dumps([dataclasses.asdict(r) for r in rows], indent=2) + "\n")
    else:
        from .static.report import _plural

        launchers = len({r.launcher for r in rows})
        head = f"{args.dir}: {_plural(len(rows), 'specialization')} of {_plural(launchers, 'launcher')}"
        head += f", {missing} without their artifact" if missing else ""
        elsewhere = sum(r.other_toolchain for r in rows)
        if elsewhere:  # this process's toolchain is not the build's: say which one it is
            head += f": {elsewhere} of them have it for another FlyDSL toolchain than this process's"
            head += f" ({toolchain_here()})"
        head += f"; {_plural(len(found.bad), 'bad row')} not listed (named on stderr)" if found.bad else ""
        sys.stdout.write("\n".join([head, *(r.line() for r in rows)]) + "\n")
    return EXIT_PROBLEMS if missing or found.bad else EXIT_OK


if TYPE_CHECKING:
    from .store.caches import CacheStats


def _add_cache_parser(sub: argparse._SubParsersAction) -> None:
    """``flydeps cache stats|clear|prune`` (:mod:`flydeps.store.caches`)."""
    from .store.caches import NAMES

    cache = sub.add_parser("cache", help="show, clear or prune flydeps' caches (as ccache -s, -C, -M)")
    cache_sub = cache.add_subparsers(dest="cache_command", metavar="{stats,clear,prune}", required=True)
    names = f"caches to act on: {', '.join(NAMES)} (default: all)"
    stats = cache_sub.add_parser("stats", help="each cache's location, entries, bytes, limit, oldest and newest use")
    stats.add_argument("--json", action="store_true", help="one JSON document (schema flydeps.cache-stats/1)")
    clear = cache_sub.add_parser("clear", help="delete every entry (safe while other processes use the caches)")
    prune = cache_sub.add_parser("prune", help="delete least recently used entries until each cache is within limit")
    prune.add_argument(
        "--max-size", metavar="SIZE", help="the limit for each cache named, e.g. 500M or 2G (default: its setting)"
    )
    for parser in (stats, clear, prune):
        parser.add_argument("names", nargs="*", metavar="NAME", help=names)
        parser.add_argument("-v", "--verbose", action="store_true", help="log what is deleted and kept")
        parser.set_defaults(paths=[])  # what follows ``--``: more names


def _cmd_cache(args: argparse.Namespace) -> int:
    """``flydeps cache``: stats (text or JSON), or what clear/prune deleted, on stdout; 2 for
    a bad name or size or an untrusted cache directory (nothing deleted), 1 when a cache
    could not be read (stats) or an entry had to be kept (in use)."""
    from .store import caches

    names = [*args.names, *args.paths]
    try:
        if args.cache_command == "stats":
            found = caches.stats(names)
            for s in found:
                if s.problem is not None:
                    log.error("flydeps cache: %s: %s", s.name, _shown(s.problem))
            if args.json:
                import json

                sys.stdout.write(json.dumps(caches.stats_document(found), indent=2) + "\n")
            else:
                sys.stdout.write(_cache_table(found))
            return EXIT_PROBLEMS if any(s.problem for s in found) else EXIT_OK
        if args.cache_command == "clear":
            removed = caches.clear(names)
        else:
            size = None if args.max_size is None else caches.parse_size(args.max_size)
            removed = caches.prune(names, size)
    except caches.CacheError as exc:
        raise _UsageError(f"flydeps cache {args.cache_command}: {_shown(str(exc))}") from None
    for r in removed:
        sys.stdout.write(f"{r.name}: {r.entries} entries, {_bytes(r.bytes)} deleted\n")
        for note in r.notes:
            log.warning("flydeps cache: %s: %s", r.name, _shown(note))
        for problem in r.problems:
            log.error("flydeps cache: %s: kept %s", r.name, _shown(problem))
    return EXIT_PROBLEMS if any(r.problems for r in removed) else EXIT_OK


def _cache_table(found: Sequence[CacheStats]) -> str:
    import time

    def when(t: float | None) -> str:
        return "-" if t is None else time.strftime("%Y-%m-%d %H:%M", time.localtime(t))

    lines = []
    for s in found:
        lines.append(f"{s.name}: {s.what}")
        lines.append(f"  location  {', '.join(s.locations)}")
        lines.append(f"  entries   {s.entries}, {_bytes(s.bytes)} of {_bytes(s.limit)}")
        lines.append(f"  used      {when(s.oldest)} .. {when(s.newest)}")
    lines.append(f"total: {sum(s.entries for s in found)} entries, {_bytes(sum(s.bytes for s in found))}")
    return "\n".join(lines) + "\n"


def _bytes(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size, unit = float(n), "B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024:
            break
    return f"{size:.1f} {unit}"


def _paths_in(argv: Sequence[str]) -> list[str]:
    """The arguments that are not options (the files asked for, roughly), for a message."""
    return [a for a in argv[1:] if not a.startswith("-")][:5]


def _shown(text: object) -> str:
    from .static.project import one_line

    return one_line(os.fsdecode(text) if isinstance(text, bytes) else str(text))


def _tolerate_odd_bytes() -> None:
    """File names that are not UTF-8 reach stdout as the bytes they are (like ``ls``)
    rather than failing the whole command in the encoder."""
    reconfigure = getattr(sys.stdout, "reconfigure", None)
    if reconfigure is not None and getattr(sys.stdout, "errors", "strict") == "strict":
        try:
            reconfigure(errors="surrogateescape")
        except (ValueError, OSError):  # a detached or replaced stream: keep it as it is
            pass


def _silence_stdout() -> None:
    """After EPIPE: point stdout at /dev/null so that the flush at exit is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real descriptor (captured in a test)
        pass


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
