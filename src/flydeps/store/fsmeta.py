"""File-system metadata in bulk: what a new process's first kernel call stats.

Contract: :func:`file_states` gives the stat line of each file of a directory (the bytes
the toolchain key of :mod:`flydsl_runtime.persist.index` hashes), :func:`real_path` a path with its
symbolic links resolved (what the origin of a module is judged by, :mod:`flydeps.code.origin`).
Both run in C (:mod:`flydeps.store._statext`) where it was built, else in Python, and give the
same answer either way: the Python functions here are the specification
(``tests/core/test_fsmeta.py`` holds the two equal). Reads file metadata only, never a
file's content; keeps no state. A first call reads dozens of such files (51 device bitcode
files for FlyDSL's toolchain alone): in Python each costs ~8 µs of interpreted code
around its system call, in C ~1 µs.
"""

from __future__ import annotations

import os

__all__ = ["file_states", "real_path"]


def _file_states_py(directory: str, names: list[str] | tuple[str, ...]) -> bytes:
    """The specification of :func:`file_states`."""
    out = []
    fd = None
    if names and os.stat in os.supports_dir_fd:
        try:
            fd = os.open(directory, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            fd = None
    try:
        for name in names:
            try:
                st = os.stat(name, dir_fd=fd) if fd is not None else os.stat(os.path.join(directory, name))
                out.append(f"{name} {st.st_size} {st.st_mtime_ns} {st.st_ino}\0")
            except OSError as error:  # a dangling link, a file gone: counted as such
                out.append(f"{name} unreadable {error.errno}\0")
    finally:
        if fd is not None:
            os.close(fd)
    return "".join(out).encode("utf-8", "surrogatepass")


def _real_path_py(path: str) -> str:
    """The specification of :func:`real_path`."""
    return os.path.realpath(path)


try:
    from . import _statext  # type: ignore[attr-defined]
except ImportError:  # not built (no compiler, another platform or interpreter)
    _statext = None


def file_states(directory: str, names: list[str] | tuple[str, ...]) -> bytes:
    """``"<name> <size> <mtime_ns> <inode>\\0"`` per name, in order (the file's, through
    symbolic links), or ``"<name> unreadable <errno>\\0"`` where its stat fails; UTF-8 with
    surrogatepass. Each name is stat'ed relative to ``directory``, opened once."""
    if _statext is not None and os.name == "posix":
        return _statext.file_states(directory, names)  # type: ignore[no-any-return]
    return _file_states_py(directory, names)


def real_path(path: str) -> str:
    """``os.path.realpath(path)``: realpath(3) where it resolves the path (every component
    exists), else Python's non-strict answer."""
    if _statext is not None and os.name == "posix":
        resolved = _statext.realpath(path)
        if resolved is not None:
            return resolved  # type: ignore[no-any-return]
    return os.path.realpath(path)
