"""Where code comes from: the user's own code (walked) or a leaf (stdlib, third party).

Contract: classifies module names and module objects; reads ``sys.modules`` entries'
``__file__``, ``sysconfig`` paths and installed distribution metadata (the index of
distributions is remembered on disk under ``FLYDEPS_CACHE_DIR``, keyed by the metadata
files' sizes, times and inodes). Never imports a package to classify it. A kernel library
installed into site-packages (not editable) is a leaf unless its top-level package is
named in ``FLYDEPS_USER_PACKAGES`` (comma-separated, read at import): then its code is
walked like the user's own. The detail string of a leaf (``torch==2.13.0``,
``python==3.11.7``) is what its digest stands for, so an upgrade of a dependency changes
every fingerprint that reaches it, and nothing else about the machine does.
"""

from __future__ import annotations

import csv
import functools
import importlib.metadata
import json
import os
import site
import sys
import sysconfig
from types import ModuleType

from blake3 import blake3

from . import settings

__all__ = ["external_detail", "external_digest", "is_external_module", "PYTHON_DETAIL"]

PYTHON_DETAIL = "python=={}.{}.{}".format(*sys.version_info[:3])
# Our own packages are leaves too: their code is versioned with the distribution.
_OWN = frozenset({"flydeps", "flydsl_runtime"})


@functools.lru_cache(maxsize=None)
def _stdlib_names() -> frozenset[str]:
    names = getattr(sys, "stdlib_module_names", None)
    if names is None:  # pragma: no cover - Python 3.10 has it; kept for other implementations
        names = ()
    return frozenset(names) | frozenset(sys.builtin_module_names)


@functools.lru_cache(maxsize=None)
def _library_dirs() -> tuple[str, ...]:
    """Where library code lives (stdlib, site-packages, the user site), resolved, each
    ending with a separator: remembered with the distribution index (``sysconfig``'s
    first use costs milliseconds per process)."""
    return _indexed()[2]


def _find_library_dirs() -> tuple[str, ...]:
    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(os.path.realpath(path))
    for path in [*getattr(site, "getsitepackages", lambda: [])(), site.getusersitepackages()]:
        dirs.add(os.path.realpath(path))
    return tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs))


@functools.lru_cache(maxsize=None)
def _distributions() -> dict[str, list[str]]:
    """Top-level import name -> names of the installed distributions providing it: what
    ``importlib.metadata.packages_distributions()`` answers, read without its costs (it
    parses every distribution's metadata with the ``email`` package and builds a
    ``pathlib`` path per installed file: tens of milliseconds, paid by the first
    fingerprint of every process). Distribution versions are collected on the way."""
    return _index()[0]


_METADATA_FILES = frozenset({"METADATA", "PKG-INFO", "top_level.txt", "RECORD"})
_INDEX_FORMAT = 2


def _metadata_state() -> str:
    """A digest of everything the index is read from: the interpreter and what places its
    library directories (prefixes, ``platlibdir``, the home and user base the user site
    follows), and by metadata each ``sys.path`` entry (a file by its size, time and inode)
    and, in each directory entry, every ``*.dist-info`` / ``*.egg-info`` with the size,
    modification time and inode of itself and of the files the index reads. Installing,
    removing or rewriting a distribution changes it."""
    places = (
        PYTHON_DETAIL,
        sys.executable,
        _INDEX_FORMAT,
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        getattr(sys, "platlibdir", ""),
        site.ENABLE_USER_SITE,
        os.path.expanduser("~"),
        os.environ.get("PYTHONUSERBASE"),
        os.environ.get("_PYTHON_SYSCONFIGDATA_NAME"),
        [type(finder).__qualname__ for finder in sys.meta_path],
    )
    seen: list[object] = [places]
    for entry in sys.path:
        path = entry or os.getcwd()
        try:
            st = os.stat(path)
        except OSError:
            seen.append((entry, None))
            continue
        if not os.path.isdir(path):  # a zip or egg file: by its own metadata
            seen.append((entry, st.st_size, st.st_mtime_ns, st.st_ino))
            continue
        # A directory by its distributions only (its own time moves with any file written there).
        seen.append((entry, "dir"))
        try:
            with os.scandir(path) as entries:
                metas = sorted(e.path for e in entries if e.name.endswith((".dist-info", ".egg-info")))
        except OSError:
            continue
        for meta in metas:
            try:
                st = os.stat(meta)
                seen.append((meta, st.st_size, st.st_mtime_ns, st.st_ino))
                with os.scandir(meta) as files:  # only the files that exist: no failing stat
                    found = sorted((f.name, f.path) for f in files if f.name in _METADATA_FILES)
            except OSError:
                continue
            for name, file in found:
                try:
                    st = os.stat(file)
                except OSError:
                    continue
                seen.append((name, st.st_size, st.st_mtime_ns, st.st_ino))
    return blake3(repr(seen).encode("utf-8", "surrogatepass")).hexdigest()


def _memo_file(state: str) -> str:
    base = settings.cache_root()
    return os.path.join(base, "origin", f"index-{state[:32]}.json")


@functools.lru_cache(maxsize=None)
def _index() -> tuple[dict[str, list[str]], dict[str, str]]:
    """Top-level name -> distributions, and distribution -> version (:func:`_scan`)."""
    packages, versions, _ = _indexed()
    return packages, versions


@functools.lru_cache(maxsize=None)
def _indexed() -> tuple[dict[str, list[str]], dict[str, str], tuple[str, ...]]:
    """:func:`_scan` and :func:`_find_library_dirs`, remembered on disk
    (``$FLYDEPS_CACHE_DIR/origin``) by :func:`_metadata_state`: a new process with the same
    interpreter and installed distributions reads one small JSON file instead of every
    distribution's metadata. An unreadable or foreign file is ignored and rewritten; a
    directory that cannot be written costs only the scan."""
    state = _metadata_state()
    path = _memo_file(state)
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("state") == state:
            packages = {str(k): [str(d) for d in v] for k, v in data["packages"].items()}
            versions = {str(k): str(v) for k, v in data["versions"].items()}
            dirs = tuple(str(d) for d in data["library_dirs"])
            return packages, versions, dirs
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        pass
    packages, versions = _scan()
    dirs = _find_library_dirs()
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump({"state": state, "packages": packages, "versions": versions, "library_dirs": dirs}, f)
        os.replace(tmp, path)
    except OSError:
        pass
    return packages, versions, dirs


def _scan() -> tuple[dict[str, list[str]], dict[str, str]]:
    packages: dict[str, list[str]] = {}
    versions: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        name, version = _name_and_version(dist)
        if not name:
            continue
        versions.setdefault(name, version)  # the first on sys.path, as importlib.metadata.version()
        for top in (dist.read_text("top_level.txt") or "").split() or _top_level_inferred(dist):
            packages.setdefault(top, []).append(name)
    return packages, versions


def _name_and_version(dist: importlib.metadata.Distribution) -> tuple[str, str]:
    """``Name`` and ``Version`` from the metadata header (the lines before the first blank
    one), as ``dist.metadata`` would give them."""
    text = dist.read_text("METADATA") or dist.read_text("PKG-INFO") or ""
    name = version = ""
    for line in text.partition("\n\n")[0].splitlines():  # the header only, not the description
        if not line:
            break
        key, sep, value = line.partition(":")
        if not sep:
            continue
        key = key.strip().lower()
        if key == "name" and not name:
            name = value.strip()
        elif key == "version" and not version:
            version = value.strip()
    return name, version


def _top_level_inferred(dist: importlib.metadata.Distribution) -> set[str]:
    """Top-level names of a distribution without ``top_level.txt``, from the ``.py`` files it
    installed (``importlib.metadata``'s rule: a file's first path part, or a top-level
    module's name), read from ``RECORD`` as text when there is one."""
    record = dist.read_text("RECORD")
    if record is None:
        return {
            f.parts[0] if len(f.parts) > 1 else f.with_suffix("").name
            for f in (dist.files or ())
            if f.suffix == ".py"
        }
    tops = set()
    # RECORD is CSV; only a path with a comma or a quote in it is quoted.
    rows = csv.reader(record.splitlines()) if '"' in record else (line.split(",", 1) for line in record.splitlines())
    for row in rows:
        path = row[0] if row else ""
        if not path.endswith(".py") or path.rsplit("/", 1)[-1] == ".py":
            continue
        head, sep, _ = path.partition("/")
        tops.add(head if sep else path[:-3])
    return tops


def _version(dist: str) -> str:
    """``importlib.metadata.version(dist)``, from the index when it has it."""
    found = _index()[1].get(dist)
    return found if found else importlib.metadata.version(dist)


@functools.lru_cache(maxsize=4096)
def external_detail(top_level: str) -> str:
    """``dist==version`` for an installed top-level package, ``python==X.Y.Z`` for stdlib,
    the bare name when neither is known."""
    if top_level in _stdlib_names() or top_level == "builtins":
        return PYTHON_DETAIL
    dists = _distributions().get(top_level)
    if dists:
        parts = []
        for dist in sorted(set(dists)):
            try:
                parts.append(f"{dist}=={_version(dist)}")
            except importlib.metadata.PackageNotFoundError:
                parts.append(dist)
        return ",".join(parts)
    try:  # a distribution named like the package (3.10 cannot map packages without top_level.txt)
        return f"{top_level}=={_version(top_level)}"
    except (importlib.metadata.PackageNotFoundError, ValueError):
        return top_level


# Installed (non-editable) packages whose code is the user's own: walked, not leaves.
_USER_PACKAGES = frozenset(settings.names("FLYDEPS_USER_PACKAGES"))


@functools.lru_cache(maxsize=4096)
def _is_external_name(name: str, file: str | None) -> bool:
    top = name.partition(".")[0]
    if top in _USER_PACKAGES:
        return False
    if top in _OWN or top in _stdlib_names():
        return True
    if file is None:
        # Built-in, frozen or namespace modules are library code; ``__main__`` and modules
        # created at run time (exec'd, REPL) have no file and are the user's.
        return top not in ("__main__", "__mp_main__") and name in sys.modules and top in _distributions()
    return _real_path(file).startswith(_library_dirs())


def _real_path(file: str) -> str:
    """``os.path.realpath(file)``, the directory part resolved once per directory (modules
    of one package share it); a file that is itself a symbolic link is resolved whole."""
    head, tail = os.path.split(file)
    if not head or not tail or tail in (".", "..") or os.path.islink(file):
        return os.path.realpath(file)
    return os.path.join(_real_dir(head), tail)


@functools.lru_cache(maxsize=1024)
def _real_dir(directory: str) -> str:
    return os.path.realpath(directory)


def is_external_module(name: str | None, module: ModuleType | None = None) -> bool:
    """True when code of module ``name`` is a leaf: stdlib, site-packages or our own packages."""
    if type(name) is not str or not name:
        return False
    if module is None:
        module = sys.modules.get(name)
    file = _module_file(module)
    if module is not None and file is None and name in sys.builtin_module_names:
        return True
    return _is_external_name(name, file)


_MODULE_DICT = vars(ModuleType)["__dict__"]


def _module_file(module: object) -> str | None:
    """A module's ``__file__`` read from its real namespace (a module subclass's
    ``__getattribute__`` or ``__getattr__`` never runs); None for anything else."""
    if not issubclass(type(module), ModuleType):
        return None
    file = _MODULE_DICT.__get__(module).get("__file__")
    return file if type(file) is str else None


def external_digest(dotted: str) -> tuple[str, str]:
    """``(digest, detail)`` of the library leaf ``external:<dotted>``: the name and the
    distribution version it comes from. Both front-ends use this, so their leaves agree."""
    detail = external_detail(dotted.partition(".")[0])
    return blake3(f"external\0{dotted}\0{detail}".encode()).hexdigest(), detail
