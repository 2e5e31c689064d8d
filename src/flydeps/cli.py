"""The ``flydeps`` command line: ``graph``, ``hash``, ``diff`` and ``migrate`` over source files.

Contract: argument parsing and output only; the analysis lives in :mod:`flydeps.static`
and never imports the user's code. Results go to stdout (or ``-o FILE``); diagnostics go
through the ``flydeps`` logger to stderr as ``path:line: message``. Exit status: 0 ok,
1 analysis problems (everything readable was still analysed and reported), 2 usage.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]

log = logging.getLogger("flydeps.cli")

EXIT_OK, EXIT_PROBLEMS, EXIT_USAGE = 0, 1, 2
_EXAMPLE = Path("examples") / "kernels"


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="store_true", help="log what the analyzer does")
    common.add_argument("--no-cache", action="store_true", help="do not read or write the parse cache")
    parser = argparse.ArgumentParser(prog="flydeps", description="What FlyDSL kernels depend on, from source only.")
    sub = parser.add_subparsers(dest="command", required=True)
    graph = sub.add_parser("graph", parents=[common], help="dependency graph of every factory/kernel/launcher in PATH")
    graph.add_argument(
        "paths", nargs="*", metavar="PATH[::QUALNAME]", help="files or directories (default: the bundled example)"
    )
    _add_root(graph)
    from .static.report import FORMATS

    graph.add_argument("--format", choices=sorted(FORMATS), default="tree")
    graph.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    graph.add_argument("--externals", action="store_true", help="list library calls one per line in the tree")
    graph.add_argument("--color", choices=("auto", "always", "never"), default="auto")
    hash_ = sub.add_parser("hash", parents=[common], help="transitive digest of one function, method or class")
    hash_.add_argument("target", metavar="PATH::QUALNAME")
    _add_root(hash_)
    diff = sub.add_parser("diff", parents=[common], help="factories/kernels whose digest differs between git revisions")
    diff.add_argument("revs", nargs="+", metavar="REV", help="REV (vs the working tree) or REV REV2; then -- PATH...")
    diff.add_argument("--format", choices=("text", "json"), default="text")
    _add_root(diff)
    migrate = sub.add_parser("migrate", help="rewrite lru_cache compile factories and flydsl.compiler imports (libcst)")
    migrate.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    migrate.add_argument("--write", action="store_true", help="rewrite the files (default: print a unified diff)")
    migrate.add_argument("--check", action="store_true", help="exit 1 when any file would change (for CI)")
    migrate.add_argument("-v", "--verbose", action="store_true", help="log each file's outcome")
    return parser


def _add_root(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--root",
        action="append",
        default=[],
        metavar="DIR",
        help="directory on which modules are resolved (repeatable; default: detected)",
    )


def _setup_logging(verbose: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    root = logging.getLogger("flydeps")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.INFO)
    root.propagate = False


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


def _default_paths() -> list[str] | None:
    for base in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (base / _EXAMPLE).is_dir():
            return [os.path.relpath(base / _EXAMPLE)]
    return None


def _write(text: str, output: str | None) -> bool:
    """Write the report; False (after logging why) when ``-o FILE`` cannot be written."""
    if not output:
        sys.stdout.write(text)
        return True
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        log.error("flydeps: cannot write %s: %s; choose another -o FILE", output, exc.strerror or exc)
        return False
    return True


def _cmd_graph(args: argparse.Namespace) -> int:
    from .static.analyze import analyze
    from .static.report import ReportOptions, format_graph

    paths = args.paths or _default_paths()
    if not paths:
        log.error("flydeps graph: no PATH given and no bundled example found; pass a file or directory")
        return EXIT_USAGE
    result = analyze(paths, roots=args.root, use_cache=not args.no_cache)
    colour = args.color == "always" or (
        args.color == "auto" and not args.output and sys.stdout.isatty() and "NO_COLOR" not in os.environ
    )
    options = ReportOptions(colour=colour, expand_external=args.externals)
    if not _write(format_graph(args.format, result.graph, result.digests, result.diagnostics, options), args.output):
        return EXIT_USAGE
    return _report(result.diagnostics)


def _cmd_hash(args: argparse.Namespace) -> int:
    from .static.analyze import analyze, split_target

    path, qual = split_target(args.target)
    if not qual:
        log.error("flydeps hash: give PATH::QUALNAME, e.g. kernels/attention/flash.py::compile_flash_attention")
        return EXIT_USAGE
    result = analyze([args.target], roots=args.root, use_cache=not args.no_cache)
    if not result.graph.roots:
        return _report(result.diagnostics) or EXIT_PROBLEMS
    sys.stdout.write(result.digests[result.graph.roots[0]] + "\n")
    return _report(result.diagnostics)


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
    return _report(result.diagnostics)


def _cmd_migrate(args: argparse.Namespace) -> int:
    from .static.migrate import migrate_paths

    changed: list[str] = []
    diagnostics: list[object] = []
    for migration in migrate_paths(args.paths):
        for warning in migration.warnings:
            log.warning("%s", warning)
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
    status = _report(diagnostics)
    files = f"{len(changed)} file{'' if len(changed) == 1 else 's'}"
    log.info("%s %s", files, "changed" if args.write else "would change")
    return status or (EXIT_PROBLEMS if args.check and changed else EXIT_OK)


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
    """Entry point of the ``flydeps`` console script and ``python -m flydeps``."""
    argv = list(sys.argv[1:] if argv is None else argv)
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
    _setup_logging(args.verbose)
    if after and args.command != "diff":
        args.paths = [*getattr(args, "paths", []), *after]
    if args.command == "graph":
        return _cmd_graph(args)
    if args.command == "hash":
        return _cmd_hash(args)
    if args.command == "migrate":
        return _cmd_migrate(args)
    return _cmd_diff(args, after)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
