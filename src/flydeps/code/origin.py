"""Where code comes from: the user's own code (walked) or a leaf (stdlib, third party).

Contract: classifies module names and module objects; reads ``sys.modules`` entries'
``__file__``, ``sysconfig`` paths and installed distribution metadata (the index of
distributions is remembered on disk under ``FLYDEPS_CACHE_DIR``, or where that cannot be
written under the user cache directory too: a new process checks one ``stat`` per
``sys.path`` entry, and the metadata files' sizes, times and inodes of each
distribution it uses, when it first uses it). Never imports a package to classify it. A
kernel library installed into site-packages (not editable) is a leaf unless its top-level
package is named in ``FLYDEPS_USER_PACKAGES`` (comma-separated, read at import): then its
code is walked like the user's own. A leaf's digest stands for its detail string
(``torch==2.13.0``, ``python==3.11.7``) and for what the distribution installed, by its
``RECORD`` (the path and hash of each file it put in the installation, :func:`_installed`,
read once per machine and remembered by the file's metadata, :func:`_installed_memo`):
an upgrade of a dependency, or a reinstall of the same version with other files (a library
of one's own, ``pip install .`` after an edit), changes every fingerprint that reaches it,
and nothing else about the machine does (the same wheel installs the same files anywhere).
"""

from __future__ import annotations

import csv
import functools
import importlib.machinery
import importlib.metadata
import marshal
import os
import site
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import ModuleType

from blake3 import blake3

from .. import settings
from ..store import fsmeta as _fsmeta
from ..store import memofile as _memofile

__all__ = ["external_detail", "external_digest", "external_installed", "is_external_module", "PYTHON_DETAIL"]

PYTHON_DETAIL = "python=={}.{}.{}".format(*sys.version_info[:3])
# Our own packages are leaves too: their code is versioned with the distribution.
_OWN = frozenset({"flydeps", "flydsl_runtime"})


@functools.lru_cache(maxsize=None)
def _stdlib_names() -> frozenset[str]:
    names = getattr(sys, "stdlib_module_names", None)
    if names is None:  # pragma: no cover - Python 3.10 has it; kept for other implementations
        names = ()
    return frozenset(names) | frozenset(sys.builtin_module_names)


def _library_dirs() -> tuple[str, ...]:
    """Where library code lives (stdlib, site-packages, the user site), resolved, each
    ending with a separator: remembered with the distribution index (``sysconfig``'s
    first use costs milliseconds per process)."""
    return _indexed().library_dirs


def _find_library_dirs() -> tuple[str, ...]:
    import sysconfig  # ~1 ms to import: only where the distribution index is scanned

    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            dirs.add(os.path.realpath(path))
    for path in [*getattr(site, "getsitepackages", lambda: [])(), site.getusersitepackages()]:
        dirs.add(os.path.realpath(path))
    return tuple(sorted(d.rstrip(os.sep) + os.sep for d in dirs))


def _distributions() -> dict[str, list[str]]:
    """Top-level import name -> names of the installed distributions providing it: what
    ``importlib.metadata.packages_distributions()`` answers, read without its costs (it
    parses every distribution's metadata with the ``email`` package and builds a
    ``pathlib`` path per installed file: tens of milliseconds, paid by the first
    fingerprint of every process). Distribution versions are collected on the way. Not
    checked against the files: read a name's distributions with :func:`_providers`."""
    return _indexed().packages


@dataclass(frozen=True)
class _Index:
    packages: dict[str, list[str]]  # top-level name -> distributions
    versions: dict[str, str]  # distribution -> version (the first on sys.path)
    library_dirs: tuple[str, ...]
    metadata: dict[str, list[list]]  # distribution -> [[its metadata path, _meta_state()], ...]
    installed: dict[str, str]  # distribution -> _installed() of its RECORD (the first on sys.path)


_METADATA_FILES = frozenset({"METADATA", "PKG-INFO", "top_level.txt", "RECORD"})
_META_SUFFIXES = (".dist-info", ".egg-info")
_INDEX_FORMAT = 6
_loaded: _Index | None = None
_checked: set[str] = set()  # distributions whose metadata was found as remembered


def _places() -> str:
    """A digest of what decides where distributions and library directories are found: the
    interpreter, its prefixes and ``platlibdir``, the home and user base the user site
    follows, the import finders and ``sys.path`` itself (no file is read)."""
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
        [entry or os.getcwd() for entry in sys.path],
    )
    return blake3(repr(places).encode("utf-8", "surrogatepass")).hexdigest()


def _entry_state(entry: str) -> list:
    """A ``sys.path`` entry by metadata: a directory by its time and inode (both move when
    an entry is added, removed or renamed in it: any install or uninstall), a file (zip,
    egg) by its size, time and inode."""
    try:
        st = os.stat(entry or os.getcwd())
    except OSError:
        return ["missing"]
    if stat.S_ISDIR(st.st_mode):
        return ["dir", st.st_mtime_ns, st.st_ino]
    return ["file", st.st_size, st.st_mtime_ns, st.st_ino]


def _meta_names(entry: str) -> list[str]:
    """The ``*.dist-info`` / ``*.egg-info`` names in a directory entry, sorted."""
    try:
        with os.scandir(entry or os.getcwd()) as entries:
            return sorted(e.name for e in entries if e.name.endswith(_META_SUFFIXES))
    except OSError:
        return []


def _meta_state(meta: str) -> list:
    """A distribution's metadata by the size, time and inode of itself and of the files the
    index reads in it."""
    try:
        st = os.stat(meta)
        state: list = [st.st_size, st.st_mtime_ns, st.st_ino]
        if not stat.S_ISDIR(st.st_mode):
            return state
        with os.scandir(meta) as files:  # only the files that exist: no failing stat
            found = sorted((f.name, f.path) for f in files if f.name in _METADATA_FILES)
    except OSError:
        return ["missing"]
    for name, file in found:
        try:
            fst = os.stat(file)
        except OSError:
            continue
        state.append([name, fst.st_size, fst.st_mtime_ns, fst.st_ino])
    return state


def _path_state() -> list[list]:
    """Each ``sys.path`` entry's state and, for a directory, its distributions' names."""
    out = []
    for entry in sys.path:
        head = _entry_state(entry)
        out.append([entry, head, _meta_names(entry) if head[0] == "dir" else []])
    return out


def _path_unchanged(remembered: list) -> tuple[bool, list[list] | None]:
    """``(unchanged, refreshed)``: unchanged when every ``sys.path`` entry is as remembered:
    the same metadata, or a directory whose time moved (a file written beside: a
    ``__pycache__`` made in a script's directory) but holds the same distributions;
    ``refreshed`` is then the path state with those directories' new times (None when no
    time moved), so the memo can be rewritten and the next process stats instead of listing.
    Each directory is stat'ed before it is listed: a change after the listing moves its time
    past the one refreshed."""
    if len(remembered) != len(sys.path):
        return False, None
    refreshed = None
    for i, (entry, (name, head, names)) in enumerate(zip(sys.path, remembered)):
        if name != entry:
            return False, None
        now = _entry_state(entry)
        if now == head:
            continue
        if now[0] != "dir" or head[0] != "dir" or _meta_names(entry) != names:
            return False, None
        if refreshed is None:
            refreshed = [list(item) for item in remembered]
        refreshed[i][1] = now
    return True, refreshed


def _memo_file(places: str) -> str:
    return os.path.join(settings.cache_root(), _memo_name(places))


def _memo_name(places: str) -> str:
    return os.path.join("origin", f"index-{places[:32]}.marshal")


_MEMO_KIND = f"distribution index {_INDEX_FORMAT}"


def _index() -> tuple[dict[str, list[str]], dict[str, str]]:
    """Top-level name -> distributions, and distribution -> version (:func:`_scan`), as
    remembered (not checked against the files)."""
    index = _indexed()
    return index.packages, index.versions


def _indexed() -> _Index:
    """The distribution index and the library directories, remembered on disk
    (``$FLYDEPS_CACHE_DIR/origin``, one marshal :mod:`flydeps.store.memofile` per :func:`_places`,
    read back only exactly as written; see ``settings.memo_paths``): a new process with
    the same interpreter reads it back after one ``stat`` per ``sys.path`` entry (a
    directory whose time moved is listed again: same distributions, same index). What a
    distribution's own metadata says is checked only when it is used (:func:`_providers`,
    :func:`_version`): a distribution rewritten since is a new scan. An unreadable or
    foreign file is ignored and rewritten; a directory that cannot be written costs only
    the scan."""
    global _loaded
    if _loaded is None:
        _loaded = _load()
    return _loaded


def _load(*, scan: bool = False) -> _Index:
    places = _places()
    paths = settings.memo_paths(_memo_name(places))  # a read-only cache root: the user's too
    for path in paths if not scan else ():
        payload = _memofile.read(path, _MEMO_KIND)  # exactly as written, or None
        try:
            data = marshal.loads(payload) if payload is not None else None
            if type(data) is not dict or data.get("places") != places:
                continue
            unchanged, refreshed = _path_unchanged(data["path"])
            if unchanged:
                index = _Index(
                    data["packages"], data["versions"], tuple(data["library_dirs"]), data["metadata"], data["installed"]
                )
                if refreshed is not None:  # the same distributions, new directory times
                    data["path"] = refreshed
                    _memofile.write(paths[-1], _MEMO_KIND, marshal.dumps(data))
                return index
        except (EOFError, ValueError, TypeError, KeyError):
            pass
    path = paths[-1]
    # Metadata is stat'ed before it is read: a change while scanning is seen by the next process.
    path_state = _path_state()
    before = {}
    for entry, _head, names in path_state:
        for name in names:
            meta = os.path.abspath(os.path.join(entry or os.getcwd(), name))
            before[meta] = _meta_state(meta)
    packages, versions, metas, installed = _scan_paths()
    metadata = {d: [[m, before[m] if m in before else _meta_state(m)] for m in paths] for d, paths in metas.items()}
    index = _Index(packages, versions, _find_library_dirs(), metadata, installed)
    _checked.update(index.metadata)  # just read from the files
    memo = {
        "places": places,
        "path": path_state,
        "packages": packages,
        "versions": versions,
        "library_dirs": list(index.library_dirs),
        "metadata": index.metadata,
        "installed": installed,
    }
    _memofile.write(path, _MEMO_KIND, marshal.dumps(memo))
    return index


def _forget() -> None:
    """Drop this process's index (the next use reads the memo or scans again)."""
    global _loaded
    _loaded = None
    _checked.clear()
    external_detail.cache_clear()
    external_installed.cache_clear()
    _is_external_name.cache_clear()


def _as_remembered(dists: list[str]) -> bool:
    """True when each distribution's metadata is as the index remembers it (checked once
    per process); a distribution the index has no metadata path for counts as unchanged."""
    index = _indexed()
    for dist in dists:
        if dist in _checked:
            continue
        for meta, state in index.metadata.get(dist, ()):
            if _meta_state(meta) != state:
                return False
        _checked.add(dist)
    return True


def _rescan() -> None:
    """A remembered distribution's metadata changed: scan again and remember the result."""
    global _loaded
    _loaded = _load(scan=True)


def _providers(top_level: str) -> list[str] | None:
    """The distributions providing ``top_level``, their metadata checked (see :func:`_indexed`)."""
    dists = _indexed().packages.get(top_level)
    if dists and not _as_remembered(dists):
        _rescan()
        dists = _indexed().packages.get(top_level)
    return dists


def _scan() -> tuple[dict[str, list[str]], dict[str, str]]:
    packages, versions, _, _ = _scan_paths()
    return packages, versions


def _scan_paths() -> tuple[dict[str, list[str]], dict[str, str], dict[str, list[str]], dict[str, str]]:
    """Every installed distribution's top-level names and version, the metadata paths each
    was read from, and what it installed (:func:`_installed`, remembered across scans by
    :func:`_installed_memo`)."""
    packages: dict[str, list[str]] = {}
    versions: dict[str, str] = {}
    metas: dict[str, list[str]] = {}
    installed: dict[str, str] = {}
    remembered = _installed_memo()
    computed: dict[str, list] = {}
    for dist in importlib.metadata.distributions():
        name, version = _name_and_version(dist)
        if not name:
            continue
        meta = getattr(dist, "_path", None)
        if name not in versions:  # the first on sys.path, as importlib.metadata.version()
            versions[name] = version
            installed[name] = _installed_of(dist, meta, remembered, computed)
        if meta is not None:
            metas.setdefault(name, []).append(os.path.abspath(str(meta)))
        for top in (dist.read_text("top_level.txt") or "").split() or _top_level_inferred(dist):
            packages.setdefault(top, []).append(name)
    if computed:
        _remember_installed(remembered, computed)
    return packages, versions, metas, installed


# What distributions installed (:func:`_installed`), by their RECORD file's path, size, time
# and inode, remembered across scans: a scan in a new place (a new directory on sys.path,
# another environment) reads torch's 15,000-row RECORD again only when it changed.
_INSTALLED_NAME = os.path.join("origin", "installed.marshal")
_INSTALLED_KIND = "installed files 1"


def _installed_memo() -> dict[str, list]:
    """RECORD path -> [size, mtime_ns, inode, digest], as earlier scans left it."""
    found: dict[str, list] = {}
    for path in settings.memo_paths(_INSTALLED_NAME):
        payload = _memofile.read(path, _INSTALLED_KIND)
        try:
            data = marshal.loads(payload) if payload is not None else None
        except (EOFError, ValueError, TypeError):
            continue
        if type(data) is dict:
            found.update(data)
    return found


def _installed_of(
    dist: importlib.metadata.Distribution, meta: object, remembered: dict[str, list], computed: dict[str, list]
) -> str:
    """:func:`_installed` of ``dist``'s RECORD, from ``remembered`` when the file is as it was
    then (stat'ed before it is read); what is computed here goes into ``computed``."""
    if meta is None:  # not a directory on sys.path (another finder): read each time
        return _installed(dist.read_text("RECORD"))
    record = os.path.join(os.path.abspath(str(meta)), "RECORD")
    try:
        st = os.stat(record)
    except OSError:
        return ""
    state = [st.st_size, st.st_mtime_ns, st.st_ino]
    known = remembered.get(record)
    if type(known) is list and len(known) == 4 and known[:3] == state and type(known[3]) is str:
        return known[3]
    digest = _installed(dist.read_text("RECORD"))
    computed[record] = [*state, digest]
    return digest


def _remember_installed(remembered: dict[str, list], computed: dict[str, list]) -> None:
    """Write the memo with ``computed`` added; entries whose RECORD is gone are dropped."""
    merged = {path: entry for path, entry in remembered.items() if path not in computed and os.path.exists(path)}
    merged.update(computed)
    _memofile.write(settings.memo_paths(_INSTALLED_NAME)[-1], _INSTALLED_KIND, marshal.dumps(merged))


def _record_rows(record: str) -> Iterator[list[str]]:
    """``RECORD``'s rows: CSV, where only a path with a comma or a quote in it is quoted."""
    lines = record.splitlines()
    return csv.reader(lines) if '"' in record else (line.split(",") for line in lines)


def _installed(record: str | None) -> str:
    """A digest of the files a distribution installed, by its ``RECORD``: each hashed file's
    row (path, hash, size) under the installation root, sorted. Left out, as they differ
    between two installs of the same files: rows in the ``.dist-info`` directory (who
    installed it, from where), outside the root (``../../bin`` scripts, whose first line
    names the interpreter), without a hash (compiled ``__pycache__`` files, ``RECORD``
    itself), and the path files of an editable install (``.pth`` files, ``__editable__``
    finders: they hold the source tree's absolute path; the code is in that tree). Empty
    without a ``RECORD`` (an ``.egg-info``, a system package): the version alone stands for
    it then. Rows are filtered as text (a scan reads every distribution's ``RECORD``:
    torch's has ~15,000 rows)."""
    if not record:
        return ""
    kept = [
        row
        for row in record.splitlines()
        if ",," not in row
        and not row.startswith("../")
        and ".dist-info/" not in row
        and "__pycache__/" not in row
        and ".pth," not in row
        and "__editable__" not in row
    ]
    kept.sort()
    return blake3("\n".join(kept).encode("utf-8", "surrogatepass")).hexdigest()


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
    """Top-level names of a distribution without ``top_level.txt``, by ``importlib.metadata``'s
    rule of this Python, from ``RECORD`` read as text when there is one. Up to 3.11: the
    ``.py`` files it installed (a file's first path part, or a top-level module's name).
    From 3.12: every file's first path part, or a top-level file's module name by any import
    suffix (a compiled ``x__mypyc.cpython-312-...so`` too), keeping names without a dot."""
    record = dist.read_text("RECORD")
    paths = [row[0] for row in _record_rows(record) if row] if record is not None else None
    if paths is None:
        paths = [str(f.as_posix()) for f in (dist.files or ())]
    tops = set()
    for path in paths:
        head, sep, _ = path.partition("/")
        if sys.version_info >= (3, 12):
            name = head if sep else (_module_name(path) or path)
            if "." not in name and name != "__pycache__":  # compiled files of top-level modules
                tops.add(name)
        elif path.endswith(".py") and path.rsplit("/", 1)[-1] != ".py":
            tops.add(head if sep else path[:-3])
    return tops


def _module_name(filename: str) -> str | None:
    """``inspect.getmodulename`` without importing inspect: the name before the longest
    import suffix the file ends with."""
    for suffix in _SUFFIXES:
        if filename.endswith(suffix) and len(filename) > len(suffix):
            return filename[: -len(suffix)]
    return None


_SUFFIXES = sorted(importlib.machinery.all_suffixes(), key=len, reverse=True)


def _version(dist: str) -> str:
    """``importlib.metadata.version(dist)``, from the index when it has it (its metadata
    checked, see :func:`_indexed`)."""
    if not _as_remembered([dist]):
        _rescan()
    found = _indexed().versions.get(dist)
    return found if found else importlib.metadata.version(dist)


@functools.lru_cache(maxsize=4096)
def external_detail(top_level: str) -> str:
    """``dist==version`` for an installed top-level package, ``python==X.Y.Z`` for stdlib,
    the bare name when neither is known."""
    if top_level in _stdlib_names() or top_level == "builtins":
        return PYTHON_DETAIL
    dists = _providers(top_level)
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


@functools.lru_cache(maxsize=4096)
def external_installed(top_level: str) -> str:
    """What the distributions providing ``top_level`` installed (:func:`_installed` of each,
    by name), the part of a leaf's digest its detail string does not show: empty for the
    standard library and for a name no distribution provides. Read with the versions of
    :func:`external_detail` (the same distributions, their metadata checked)."""
    if top_level in _stdlib_names() or top_level == "builtins":
        return ""
    dists = _providers(top_level)
    if not dists:  # a distribution named like the package, as external_detail() reads it
        if not _as_remembered([top_level]):
            _rescan()
        named = _indexed().installed.get(top_level)
        return f"{top_level}:{named}" if named else ""
    installed = _indexed().installed
    return ",".join(f"{dist}:{installed.get(dist, '')}" for dist in sorted(set(dists)))


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
        return top not in ("__main__", "__mp_main__") and name in sys.modules and bool(_providers(top))
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
    return _fsmeta.real_path(directory)


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
    """``(digest, detail)`` of the library leaf ``external:<dotted>``: the name, the
    distribution version it comes from and what that distribution installed. Both
    front-ends use this, so their leaves agree."""
    top = dotted.partition(".")[0]
    detail = external_detail(top)
    return blake3(f"external\0{dotted}\0{detail}\0{external_installed(top)}".encode()).hexdigest(), detail
