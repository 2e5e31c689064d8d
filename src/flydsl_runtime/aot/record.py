"""``flydeps aot record`` and ``flydeps aot merge``: AOT manifests from what real runs call.

Contract
--------
:func:`run_record` runs a command (a server, a test suite) with ``FLYDEPS_RECORD`` naming a
manifest (``--manifest M``, default ``./aot-manifest.jsonl``, made with its header when
missing), so every specialization its flydsl_runtime launchers store is appended once
(:mod:`flydsl_runtime.persist.manifest`); it returns the command's exit status (a command
killed by a signal: 128 + the signal's number, as a shell says; a command that cannot be
started: 127) and says on stderr how many entries the manifest holds and how many are new.
Ctrl-C reaches the command (it is in the same process group) and is not this process's:
the command's own status is returned.

:func:`run_merge` writes the union of manifests (``-o M``; first-occurrence order,
duplicates dropped, schema checked): each bad line is one line on stderr, ``file:line:
what``, exit 2, and nothing is written.

Each command is an ``add_*_arguments(parser)`` / ``run_*(args) -> int`` pair the ``flydeps``
CLI wires (the parser lines are copied there: importing this package imports FlyDSL);
:func:`main` runs them as ``python -m flydsl_runtime.aot.record record|merge ...``. Errors
are one line naming the file, line or argument (exit 2); messages go to the ``flydeps.aot``
logger, which the CLI prints on stderr.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from ..persist import manifest

__all__ = ["add_merge_arguments", "add_record_arguments", "main", "run_merge", "run_record"]

log = logging.getLogger("flydeps.aot")

EXIT_OK, EXIT_USAGE, EXIT_NOT_FOUND = 0, 2, 127


def add_record_arguments(parser: argparse.ArgumentParser) -> None:
    """``flydeps aot record [--manifest M] -- COMMAND ...``."""
    parser.add_argument(
        "--manifest",
        metavar="M",
        default=manifest.DEFAULT_NAME,
        help=f"the manifest to append to (default: ./{manifest.DEFAULT_NAME}; made when missing)",
    )
    parser.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND", help="the command to run and record")
    parser.set_defaults(paths=[])  # what the CLI finds after ``--``: the command


def add_merge_arguments(parser: argparse.ArgumentParser) -> None:
    """``flydeps aot merge A.jsonl B.jsonl ... -o M.jsonl``."""
    parser.add_argument("inputs", nargs="*", metavar="MANIFEST", help="manifests to merge (at least one)")
    parser.add_argument("-o", "--output", required=True, metavar="M", help="the merged manifest (may be an input)")
    parser.set_defaults(paths=[])  # what the CLI finds after ``--``: more manifests


def _count(path: Path) -> tuple[int, int] | None:
    """(entries, unnamed entries) of a manifest, duplicates dropped; None when unreadable."""
    entries, problems = manifest.check(path)
    if problems:
        return None
    unique = {e.identity: e for e in entries}
    return len(unique), sum(1 for e in unique.values() if e.unnamed is not None)


def _start_manifest(path: Path) -> str | None:
    """Make ``path`` a manifest (its header) when missing or empty; why it cannot be one, else None."""
    import fcntl

    if path.is_dir():
        return f"--manifest {path} is a directory; name a file"
    try:
        fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        return f"--manifest {path}: cannot be made ({exc.strerror or exc}); name a file in a directory you can write"
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_size == 0:
            os.write(fd, (manifest.HEADER + "\n").encode("utf-8"))
            return None
    finally:
        os.close(fd)
    _entries, problems = manifest.check(path)
    if problems and problems[0].line <= 1:  # not a manifest at all: refused before the command runs
        return f"--manifest {problems[0].text()}"
    return None


def run_record(args: argparse.Namespace) -> int:
    """Run ``args.cmd`` (plus what followed ``--``) with ``FLYDEPS_RECORD`` set; its exit status."""
    command = [*args.cmd, *getattr(args, "paths", [])]
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        log.error("aot record: give the command to run after --, e.g. flydeps aot record -- python serve.py")
        return EXIT_USAGE
    path = Path(args.manifest).absolute()
    problem = _start_manifest(path)
    if problem is not None:
        log.error("aot record: %s", problem)
        return EXIT_USAGE
    before = _count(path)
    env = {**os.environ, "FLYDEPS_RECORD": str(path)}
    try:
        child = subprocess.Popen(command, env=env)
    except OSError as exc:
        log.error("aot record: cannot run %s: %s", command[0], exc.strerror or exc)
        return EXIT_NOT_FOUND
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the command's to handle
    try:
        code = child.wait()
    finally:
        signal.signal(signal.SIGINT, previous)
    after = _count(path)
    if after is None:
        log.error("aot record: %s has bad lines now (flydeps aot merge %s -o ... names them)", path, path)
    else:
        new = after[0] - (before[0] if before is not None else 0)
        unnamed = f", {after[1]} unnamed (listed there with the reason)" if after[1] else ""
        log.info("aot record: %s holds %d specializations (%d new%s)", path, after[0], new, unnamed)
    return 128 - code if code < 0 else code


def run_merge(args: argparse.Namespace) -> int:
    """Merge ``args.inputs`` into ``args.output``; 2 (nothing written) when a line is bad."""
    inputs = [*args.inputs, *getattr(args, "paths", [])]
    if not inputs:
        log.error("aot merge: give at least one MANIFEST to merge, e.g. flydeps aot merge a.jsonl b.jsonl -o m.jsonl")
        return EXIT_USAGE
    try:
        result = manifest.merge(inputs, args.output)
    except manifest.ManifestError as exc:
        for problem in exc.problems:
            log.error("%s", problem.text())
        log.error("aot merge: nothing written to %s", args.output)
        return EXIT_USAGE
    unnamed = f", {result.unnamed} unnamed" if result.unnamed else ""
    sys.stdout.write(
        f"aot merge into {result.out}: {result.entries} specializations from {len(inputs)} manifests "
        f"({result.duplicates} duplicates dropped{unnamed})\n"
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m flydsl_runtime.aot.record record|merge ...`` (the CLI's commands, standalone)."""
    parser = argparse.ArgumentParser(prog="flydsl_runtime.aot.record")
    sub = parser.add_subparsers(dest="what", required=True)
    add_record_arguments(sub.add_parser("record"))
    add_merge_arguments(sub.add_parser("merge"))
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    saved = log.propagate, log.level
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False
    try:
        args = parser.parse_args(argv)
        return run_record(args) if args.what == "record" else run_merge(args)
    finally:
        log.removeHandler(handler)
        log.propagate, log.level = saved


if __name__ == "__main__":
    raise SystemExit(main())
