"""Project layout: where sources are read from, the roots, and module name <-> path.

Contract: no parsing and no imports of user code. A :class:`SourceTree` reads bytes (the
working tree on disk, or a git revision in :mod:`flydeps.static.diff`); a
:class:`Project` maps module names to files under its roots the way ``sys.path`` would
(first root wins; ``pkg/__init__.py`` or a namespace directory is a package). Roots are
given (``--root``) or detected: the directory above the top-most package (the first
parent without ``__init__.py``).

Paths inside a tree are POSIX strings; a node's :class:`~flydeps.graph.Location` path is
relative to its root so that digests and golden outputs never hold absolute paths.
"""

from __future__ import annotations

import configparser
import errno
import os
import posixpath
import stat
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from importlib.machinery import EXTENSION_SUFFIXES
from typing import Protocol

__all__ = [
    "Diagnostic",
    "FileSystemTree",
    "ModuleFile",
    "Project",
    "SourceTree",
    "declared_roots",
    "detect_root",
    "is_library_dir",
    "one_line",
    "resolve_relative",
]


@dataclass(frozen=True, slots=True, order=True)
class Diagnostic:
    """A problem with one input, reported as ``path:line: message``; analysis goes on.
    ``line`` 0 means the file as a whole (missing, unreadable, not Python): it is reported
    as ``path: message``, with no made-up line. A ``note`` is information (a script
    outside the declared packages, skipped), not a problem: it does not change the exit
    status. The text is always one line (see :func:`one_line`)."""

    path: str
    line: int
    message: str
    note: bool = False

    def __str__(self) -> str:
        where = f"{one_line(self.path)}:{self.line}" if self.line > 0 else one_line(self.path)
        return f"{where}: {'note: ' if self.note else ''}{one_line(self.message)}"


def one_line(text: str) -> str:
    """``text`` as one printable line: control characters (a newline in a file name) are
    escaped as in a Python literal and undecodable file-name bytes (the surrogates of
    ``os.fsdecode``) as ``\\xNN``, so a message stays one line and encodes on any stream."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    if 0xDC80 <= code <= 0xDCFF:  # os.fsdecode's stand-in for the byte code - 0xDC00
        return f"\\x{code - 0xDC00:02x}"
    return repr(char)[1:-1]


class SourceTree(Protocol):
    """Read-only access to source files by POSIX path."""

    def read(self, path: str) -> bytes: ...

    def is_file(self, path: str) -> bool: ...

    def is_dir(self, path: str) -> bool: ...

    def python_files(self, directory: str) -> list[str]: ...


class FileSystemTree:
    """Files on disk; paths are relative to ``base`` (default: the current directory)."""

    def __init__(self, base: str = "") -> None:
        self.base = base

    def _real(self, path: str) -> str:
        return os.path.join(self.base, path) if self.base else path

    def read(self, path: str) -> bytes:
        """The bytes of a regular file. Anything else (a FIFO, a device such as a symlink to
        ``/dev/zero``, a socket) raises OSError without being read: reading a FIFO blocks
        for ever and a device never ends. Checked before opening, and again on the opened
        descriptor (opened non-blocking) in case the path was swapped in between."""
        real = self._real(path)
        _regular(os.stat(real).st_mode)
        fd = os.open(real, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
        with os.fdopen(fd, "rb") as handle:
            _regular(os.fstat(fd).st_mode)
            return handle.read()

    def is_file(self, path: str) -> bool:
        return os.path.isfile(self._real(path))

    def is_dir(self, path: str) -> bool:
        return os.path.isdir(self._real(path))

    def lexists(self, path: str) -> bool:
        """Something (a FIFO, a device, a broken symlink) is at ``path``."""
        return os.path.lexists(self._real(path))

    def python_files(self, directory: str) -> list[str]:
        found: list[str] = []
        for base, dirs, files in os.walk(self._real(directory)):
            dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
            rel = os.path.relpath(base, self.base) if self.base else base
            found.extend(_norm(posixpath.join(rel, f)) for f in sorted(files) if f.endswith(".py"))
        return sorted(found)


def _regular(mode: int) -> None:
    if not stat.S_ISREG(mode):
        kind = "a FIFO" if stat.S_ISFIFO(mode) else "a directory" if stat.S_ISDIR(mode) else "a device or socket"
        raise OSError(errno.EINVAL, f"not a regular file ({kind}): skipped")


@dataclass(frozen=True, slots=True)
class ModuleFile:
    """A module found under a root: ``path`` is the tree path, ``location_path`` root-relative."""

    name: str
    path: str
    root: str
    is_package: bool
    location_path: str = ""

    def __post_init__(self) -> None:
        if not self.location_path:
            rel = posixpath.relpath(self.path, self.root) if self.root not in ("", ".") else self.path
            object.__setattr__(self, "location_path", rel)


def _norm(path: str) -> str:
    return posixpath.normpath(path.replace(os.sep, "/"))


def detect_root(tree: SourceTree, path: str) -> str:
    """The directory above the top-most package containing ``path`` (a file or directory)."""
    path = _norm(path)
    directory = path if tree.is_dir(path) else posixpath.dirname(path) or "."
    while tree.is_file(posixpath.join(directory, "__init__.py")):
        parent = posixpath.dirname(directory)
        if parent == directory or directory in ("", "."):
            parent = posixpath.normpath(posixpath.join(directory, ".."))
            if parent == directory:
                break
        directory = parent or "."
    return directory


_METADATA = ("pyproject.toml", "setup.cfg", "setup.py")


def declared_roots(tree: SourceTree, path: str) -> list[str]:
    """The package directories a project declares, when ``path`` is its top directory
    (``flydeps graph .`` in a src-layout repository): pyproject ``[tool.setuptools]``
    ``package-dir``/``packages.find.where``, hatch/poetry package locations, setup.cfg
    ``[options]``, else a ``src/`` directory. Empty when nothing is declared or ``path``
    lies inside a package hierarchy (its detected root then holds)."""
    top = _norm(path)
    if not tree.is_dir(top) or not any(tree.is_file(posixpath.join(top, name)) for name in _METADATA):
        return []
    dirs = _metadata_dirs(tree, top)
    if not dirs and tree.is_dir(posixpath.join(top, "src")):
        dirs = ["src"]
    found = [_norm(posixpath.join(top, d)) for d in dirs]
    return [d for d in dict.fromkeys(found) if tree.is_dir(d) and d != top]


def _metadata_dirs(tree: SourceTree, top: str) -> list[str]:
    dirs: list[str] = []
    try:
        text = tree.read(posixpath.join(top, "pyproject.toml")).decode("utf-8", "replace")
    except OSError:
        text = ""
    dirs += _pyproject_dirs(text)
    try:
        cfg = tree.read(posixpath.join(top, "setup.cfg")).decode("utf-8", "replace")
    except OSError:
        cfg = ""
    return dirs + _setup_cfg_dirs(cfg)


def _pyproject_dirs(text: str) -> list[str]:
    if not text:
        return []
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # Python 3.10: tomli, a dependency there (what tomllib became)
        import tomli as tomllib
    try:
        tool = tomllib.loads(text).get("tool", {})
    except tomllib.TOMLDecodeError:
        return []
    setuptools = tool.get("setuptools", {})
    dirs = []
    for package, where in dict(setuptools.get("package-dir", {})).items():
        dirs.append(where if not package else posixpath.dirname(where.rstrip("/")) or ".")
    find = setuptools.get("packages", {})
    dirs += list(find.get("find", {}).get("where", [])) if isinstance(find, dict) else []
    wheel = tool.get("hatch", {}).get("build", {}).get("targets", {}).get("wheel", {})
    dirs += [posixpath.dirname(p.rstrip("/")) or "." for p in wheel.get("packages", [])]
    dirs += [p["from"] for p in tool.get("poetry", {}).get("packages", []) if isinstance(p, dict) and "from" in p]
    return [d for d in dirs if isinstance(d, str)]


def _setup_cfg_dirs(text: str) -> list[str]:
    if not text:
        return []
    parser = configparser.ConfigParser()
    try:
        parser.read_string(text)
    except configparser.Error:
        return []
    dirs = []
    for line in parser.get("options", "package_dir", fallback="").splitlines():
        name, sep, where = line.partition("=")
        if sep and not name.strip():
            dirs.append(where.strip())
    where = parser.get("options.packages.find", "where", fallback="").strip()
    return dirs + ([where] if where else [])


def is_library_dir(path: str) -> bool:
    """True for site-packages / dist-packages and the standard library directory."""
    if posixpath.basename(posixpath.normpath(path)) in ("site-packages", "dist-packages"):
        return True
    stdlib = sysconfig.get_paths().get("stdlib", "")
    return bool(stdlib) and os.path.realpath(path) == os.path.realpath(stdlib)


def resolve_relative(module: str, is_package: bool, target: str, level: int) -> str | None:
    """Absolute module name of ``from <level dots><target> import ...`` inside ``module``."""
    if level == 0:
        return target
    parts = module.split(".") if is_package else module.split(".")[:-1]
    if level - 1 > len(parts) or (level - 1 == len(parts) and not target):
        return None
    base = parts[: len(parts) - (level - 1)]
    return ".".join([*base, target] if target else base) or None


class Project:
    """Roots plus a tree: answers which file holds a module and which module a file is."""

    def __init__(self, tree: SourceTree, roots: Iterable[str], *, confine: Iterable[str] = ()) -> None:
        """``confine``: top-level package names; under a root that is a library directory
        (site-packages, the stdlib) only these are project code, the other installed
        packages stay external leaves (``flydeps graph site-packages/flydsl``)."""
        self.tree = tree
        self.roots: tuple[str, ...] = tuple(dict.fromkeys(_norm(r) for r in roots))
        self._confine = frozenset(confine)
        self._by_name: dict[str, ModuleFile | None] = {}
        self._namespaces: dict[str, bool] = {}
        self._extensions: dict[str, bool] = {}

    def module_for_path(self, path: str) -> ModuleFile | None:
        """The module a ``.py`` file is, under the first root containing it; None if outside."""
        path = _norm(path)
        for root in self.roots:
            if posixpath.isabs(path) != posixpath.isabs(root):  # `--root src` with /abs/src/pkg/m.py
                rel = _norm(os.path.relpath(os.path.abspath(path), os.path.abspath(root)))
            else:
                rel = posixpath.relpath(path, root) if root != "." else path
            if rel.startswith("../") or rel == ".." or posixpath.isabs(rel):
                continue
            parts = rel[:-3].split("/") if rel.endswith(".py") else []
            if not parts or not all(p.isidentifier() for p in parts[:-1]):
                continue
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            if name:
                return ModuleFile(name, path, root, is_package)
        return None

    def find(self, name: str) -> ModuleFile | None:
        """The file of module ``name`` (``a/b.py`` or ``a/b/__init__.py``) under the roots."""
        if name in self._by_name:
            return self._by_name[name]
        found = None
        rel = name.replace(".", "/")
        for root in self._roots_for(name):
            base = posixpath.join(root, rel) if root != "." else rel
            # As Python's path finder: a package directory (a/b/__init__.py) wins over a/b.py.
            if self.tree.is_file(posixpath.join(base, "__init__.py")):
                found = ModuleFile(name, posixpath.join(base, "__init__.py"), root, True)
            elif self.tree.is_file(base + ".py"):
                found = ModuleFile(name, base + ".py", root, False)
            if found:
                break
        self._by_name[name] = found
        return found

    def is_extension(self, name: str) -> bool:
        """A compiled extension module (``name.cpython-311-x86_64-linux-gnu.so``) under a
        root, or a submodule of one (``_mlir.ir`` inside ``_mlir.*.so``)."""
        found = self._extensions.get(name)
        if found is None:
            rel = name.replace(".", "/")
            found = any(
                self.tree.is_file(posixpath.join(root, rel) + suffix)
                for root in self._roots_for(name)
                for suffix in EXTENSION_SUFFIXES
            )
            parent = name.rpartition(".")[0]
            found = self._extensions[name] = found or bool(parent) and self.is_extension(parent)
        return found

    def is_namespace(self, name: str) -> bool:
        """A directory without ``__init__.py`` under a root (PEP 420 namespace package)."""
        found = self._namespaces.get(name)
        if found is None:
            rel = name.replace(".", "/")
            roots = self._roots_for(name)
            found = self._namespaces[name] = any(self.tree.is_dir(posixpath.join(root, rel)) for root in roots)
        return found

    def in_library_root(self, top: str) -> bool:
        """A top-level module installed in a root that is a library directory (the other
        packages of ``flydeps graph site-packages/mylib``): a library, not a missing module."""
        return any(
            is_library_dir(r)
            and (self.tree.is_file(posixpath.join(r, top + ".py")) or self.tree.is_dir(posixpath.join(r, top)))
            for r in self.roots
        )

    def _roots_for(self, name: str) -> list[str]:
        top = name.partition(".")[0]
        return [r for r in self.roots if not self._confine or top in self._confine or not is_library_dir(r)]

    def probed(self) -> dict[str, ModuleFile | None]:
        """Every module name looked up so far and what was found (for the result cache)."""
        return dict(self._by_name)

    def namespace_probes(self) -> dict[str, bool]:
        return dict(self._namespaces)

    def extension_probes(self) -> dict[str, bool]:
        return dict(self._extensions)

    def files_under(self, path: str) -> Iterator[str]:
        """``path`` itself if a file, else every ``.py`` file below the directory."""
        path = _norm(path)
        if self.tree.is_dir(path):
            yield from self.tree.python_files(path)
        else:
            yield path
