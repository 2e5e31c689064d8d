"""Every ``FLYDEPS_*`` environment variable: one table, one parser, one error type.

Contract
--------
:data:`SETTINGS` lists each variable flydeps and flydsl_runtime read (name, kind, default,
accepted values, one-line meaning, when it is read); the "Configuration" section of
``docs/guarantees.md`` is checked against it by ``tests/core/test_settings.py``, and no
module reads a ``FLYDEPS_*`` variable that is not in it.

The readers take the variable's name and default and return a parsed value:

* :func:`flag`: ``1/0/true/false/yes/no/on/off`` (case-insensitive, surrounding whitespace
  ignored); unset or empty gives the default.
* :func:`integer`: a decimal integer ``>= minimum`` (no silent clamping).
* :func:`choice`: one of a fixed set of words (case-insensitive).
* :func:`names`: a comma-separated list (``;`` accepted too), blanks dropped; optionally
  restricted to a set of accepted words.
* :func:`text`: a free string (a path), ``None`` when unset or empty.
* :func:`fraction`: a switch word (on = ``1.0``, off = ``0.0``) or a decimal in ``[0, 1]``
  (``0.01``: one in a hundred), for a share of events.

:func:`read` parses one variable as the table documents it; :func:`validate` parses them
all (the CLI calls it first, so any bad value exits 2 with one line, ``--help`` included).

Every variable can also be set in the project's ``pyproject.toml``, in ``[tool.flydeps]``,
under its name without the prefix, lower-cased (``FLYDEPS_SNAPSHOT_LIMIT`` is
``snapshot_limit = 512``; a list for a comma-separated one, ``assume_installed = ["flydsl"]``;
``true``/``false`` for a switch). The environment overrides it. The file is the nearest
``pyproject.toml`` from the working directory upwards, read once per working directory and
process (:func:`project_settings`); its values go through the same parsers, and an error
names the file and key instead of the variable. An unknown key, a value of another type or
a ``[tool.flydeps]`` that is not valid TOML is a :class:`SettingError` too.

Anything else raises :class:`SettingError`, a ``ValueError`` whose one-line message names
the variable, the bad value and the accepted values (the ``flydeps`` CLI prints it and exits
2). Readers consult ``os.environ`` on every call and cache nothing: callers decide when to
read (at import for settings that shape import-time state, lazily otherwise). A read made
while a build is being recorded is not attributed to the build (:func:`flydeps.observe.environ.paused`):
flydeps' own configuration is not an input of the user's code. This module imports nothing
outside the standard library, :mod:`flydeps.observe.environ` and :mod:`flydeps.errors`
(:func:`cache_root` imports ``platformdirs`` when it is called; Python 3.10 reads TOML with
``tomli``, a dependency there).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Literal

from .errors import FlydepsError

__all__ = [
    "SETTINGS",
    "ProjectSettings",
    "Setting",
    "SettingError",
    "choice",
    "flag",
    "fraction",
    "integer",
    "names",
    "project_settings",
    "read",
    "text",
    "validate",
]

Kind = Literal["flag", "integer", "choice", "names", "text", "fraction"]

_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_FLAG_WORDS = "1/0/true/false/yes/no/on/off"


class SettingError(FlydepsError, ValueError):
    """A ``FLYDEPS_*`` environment variable holds a value flydeps cannot use.

    ``variable`` and ``value`` name it; the message says which values are accepted."""

    def __init__(self, variable: str, value: str, expected: str) -> None:
        self.variable, self.value, self.expected = variable, value, expected
        super().__init__(f"{variable}={value!r} {expected}")

    def __reduce__(self) -> tuple[type[SettingError], tuple[str, str, str]]:
        return type(self), (self.variable, self.value, self.expected)  # crosses process pools intact


@dataclass(frozen=True)
class Setting:
    """One documented variable: ``kind`` picks its reader, ``default`` is what unset means
    (as documented, a string), ``values`` the accepted words (choice/names) and ``read``
    when flydeps looks at it."""

    name: str
    kind: Kind
    default: str
    meaning: str
    values: tuple[str, ...] = ()
    read: str = "when used"


#: Every variable flydeps and flydsl_runtime read, in documentation order.
SETTINGS: dict[str, Setting] = {
    s.name: s
    for s in (
        Setting(
            "FLYDEPS_SNAPSHOT_LIMIT",
            "integer",
            "256",
            "containers with more elements are digested by type, size and identity, not content",
            read="at import",
        ),
        Setting(
            "FLYDEPS_USER_PACKAGES",
            "names",
            "",
            "installed top-level packages whose code is the user's own (walked, not library leaves)",
            read="at import",
        ),
        Setting(
            "FLYDEPS_AUDIT_HOOK",
            "flag",
            "on",
            "off: never install the audit hooks (3.10/3.11 guards then re-read function attributes; files a build "
            "or trace reads are not recorded)",
            read="at import",
        ),
        Setting(
            "FLYDEPS_WATCH",
            "choice",
            "auto",
            "watcher backend: auto, ext (C extension), ctypes, off (identity checks only)",
            values=("auto", "ext", "ctypes", "off"),
            read="at import",
        ),
        Setting(
            "FLYDEPS_SCANEXT",
            "flag",
            "on",
            "off: code digests are decoded by the pure-Python loop instead of the C one (same digests)",
            read="at import",
        ),
        Setting(
            "FLYDEPS_FASTCACHE",
            "flag",
            "on",
            "off: cached_factory uses the pure-Python hit path instead of the C one",
            read="when a factory is decorated",
        ),
        Setting(
            "FLYDEPS_WARMCALL",
            "flag",
            "on",
            "off: flydsl_runtime launchers decide warm calls in the pure-Python path instead of the C one",
            read="at import",
        ),
        Setting(
            "FLYDEPS_LOG",
            "names",
            "",
            "recompiles (alias rebuilds): log flydsl_runtime recompile and cached_factory rebuild reasons to stderr",
            values=("recompiles", "rebuilds"),
            read="on each rebuild or recompile",
        ),
        Setting(
            "FLYDEPS_VERIFY",
            "fraction",
            "off",
            "on: flydsl_runtime re-traces every cache hit and compares FlyDSL's IR key (a mismatch raises); "
            "a fraction such as 0.01: that share of hits, chosen per entry deterministically (a mismatch is "
            "logged and the entry dropped)",
            read="on every hit, when set",
        ),
        Setting(
            "FLYDEPS_CACHE_DIR",
            "text",
            "",
            "directory of the CLI's parse and result cache, the installed-distribution index and "
            "flydsl_runtime's persistent index (default: the user cache directory)",
            read="by the CLI; by a process's first fingerprint; on each launcher miss",
        ),
        Setting(
            "FLYDEPS_AOT",
            "choice",
            "off",
            "strict: a flydsl_runtime launcher call the persistent index cannot serve raises, naming what differs "
            "from the nearest shipped specialization",
            values=("off", "strict"),
            read="on each launcher miss",
        ),
        Setting(
            "FLYDEPS_RECORD",
            "text",
            "",
            "a file: every specialization a flydsl_runtime launcher stores an entry for is appended to that AOT "
            "manifest (JSON lines, once each across processes) for `flydeps aot build --manifest`",
            read="on each launcher miss",
        ),
        Setting(
            "FLYDEPS_INDEX",
            "flag",
            "on",
            "off: flydsl_runtime neither reads nor writes its persistent index (a new process traces every kernel)",
            read="on each launcher miss",
        ),
        Setting(
            "FLYDEPS_INDEX_MAX_BYTES",
            "integer",
            str(256 * 1024 * 1024),
            "flydsl_runtime's persistent index is kept under this many bytes of rows: past it, the oldest rows "
            "are deleted (an index made by `flydeps aot build` never is)",
            read="after a trace writes a row; by `flydeps cache`",
        ),
        Setting(
            "FLYDEPS_PARSE_CACHE_MAX_BYTES",
            "integer",
            str(1 << 30),
            "the CLI's parse and result cache is kept under this many bytes: past it, its least recently used "
            "entries are deleted (down to 3/4 of it when found while writing; `flydeps cache prune`)",
            read="about every 1024 parse-cache writes; by `flydeps cache`",
        ),
        Setting(
            "FLYDEPS_MEMO_MAX_BYTES",
            "integer",
            str(64 << 20),
            "`flydeps cache prune` keeps the distribution-index and generated-code memos under this many bytes",
            read="by `flydeps cache`",
        ),
        Setting(
            "FLYDEPS_ARTIFACTS_MAX_BYTES",
            "integer",
            str(4 << 30),
            "`flydeps cache prune` keeps FlyDSL's artifacts (FLYDSL_RUNTIME_CACHE_DIR) under this many bytes",
            read="by `flydeps cache`",
        ),
        Setting(
            "FLYDEPS_MAX_FILE_BYTES",
            "integer",
            str(32 * 1024 * 1024),
            "the CLI reports and skips Python files larger than this many bytes",
            read="by the CLI",
        ),
        Setting(
            "FLYDEPS_ASSUME_INSTALLED",
            "names",
            "",
            "top-level modules the CLI treats as installed libraries (analysing without FlyDSL)",
            read="by the CLI",
        ),
        Setting(
            "FLYDEPS_STRICT_AST",
            "flag",
            "off",
            "on: unknown statement types raise in the static extractor (for tests)",
            read="by the CLI",
        ),
    )
}


@dataclass
class _EnvironHooks:
    """What this module asks of the environment observer (:mod:`flydeps.observe.environ`),
    which installs its own with :func:`attach_environ` when it is imported: this module is
    the bottom of flydeps and imports nothing of it but :mod:`.errors`. Until then no
    recording can be running (only that module starts one), so nothing needs pausing, and
    there is no modification counter to memoize on."""

    paused: Callable[[], AbstractContextManager[None]] = nullcontext
    version: Callable[[], int | None] = lambda: None


_environ_hooks = _EnvironHooks()


def attach_environ(paused: Callable[[], AbstractContextManager[None]], version: Callable[[], int | None]) -> None:
    """Called once by :mod:`flydeps.observe.environ`: ``paused()`` keeps this module's reads
    of ``FLYDEPS_*`` (and platformdirs' of ``HOME``) out of any build's recording, and
    ``version()`` is ``os.environ``'s modification counter (None where there is none)."""
    _environ_hooks.paused, _environ_hooks.version = paused, version


def _raw(name: str) -> str:
    if name not in SETTINGS:
        raise KeyError(f"{name} is not a documented flydeps setting; add it to flydeps.settings.SETTINGS")
    with _environ_hooks.paused():  # flydeps' own configuration is never an input of the user's build
        found = os.environ.get(name, "").strip()
    return found or project_settings().values.get(name, "")


def _shown(name: str) -> str:
    """Where ``name``'s value came from, for an error: the variable, or the file and key."""
    if os.environ.get(name, "").strip():
        return name
    project = project_settings()
    return f"{project.path} [tool.flydeps] {_key(name)}" if name in project.values else name


@dataclass(frozen=True)
class ProjectSettings:
    """``[tool.flydeps]`` of one ``pyproject.toml``: ``values`` by variable name, as the
    strings the parsers read (``path`` is ``""`` when there is no such file or table)."""

    path: str
    values: dict[str, str]


_PROJECTS: dict[str, ProjectSettings] = {}  # working directory -> its project's settings
_NO_PROJECT = ProjectSettings("", {})


def _key(name: str) -> str:
    return name.removeprefix("FLYDEPS_").lower()


def project_settings() -> ProjectSettings:
    """The ``[tool.flydeps]`` table of the nearest ``pyproject.toml`` from the working
    directory up (read once per working directory); raises :class:`SettingError` naming the
    file and key for an unknown key, a value of the wrong type, or broken TOML in a file
    that has such a table."""
    try:
        cwd = os.getcwd()
    except OSError:  # the working directory was removed
        return _NO_PROJECT
    found = _PROJECTS.get(cwd)
    if found is None:
        found = _PROJECTS[cwd] = _read_project(cwd)
    return found


def _read_project(cwd: str) -> ProjectSettings:
    directory = cwd
    while True:
        path = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(path):
            break
        parent = os.path.dirname(directory)
        if parent == directory:
            return _NO_PROJECT
        directory = parent
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return _NO_PROJECT
    if b"tool.flydeps" not in data and b"[tool]" not in data:
        return _NO_PROJECT  # cheap: most projects have no such table
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        table = tomllib.loads(data.decode("utf-8")).get("tool", {}).get("flydeps")
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        if b"tool.flydeps" not in data:
            return _NO_PROJECT  # not our table: the file's other readers will say what is wrong
        raise SettingError(path, "", f"is not valid TOML ({exc}): fix it, or move [tool.flydeps] out") from None
    if table is None:
        return _NO_PROJECT
    if not isinstance(table, dict):
        raise SettingError(f"{path} [tool.flydeps]", repr(table), "is not a table: write [tool.flydeps] key = value")
    values: dict[str, str] = {}
    for key, value in table.items():
        name = "FLYDEPS_" + str(key).upper().replace("-", "_")
        where = f"{path} [tool.flydeps] {key}"
        if name not in SETTINGS:
            known = ", ".join(_key(n) for n in SETTINGS)
            raise SettingError(where, repr(value), f"is not a flydeps setting: use one of {known}")
        values[name] = _as_text(where, value)
    return ProjectSettings(path, values)


def _as_text(where: str, value: object) -> str:
    """A TOML value as the string its environment variable would hold."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, (int, float, str)):
        return str(value).strip()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    raise SettingError(where, repr(value), "is not a string, number, switch or list of strings")


def flag(name: str, default: bool) -> bool:
    """``name`` as a boolean: 1/true/yes/on or 0/false/no/off; unset or empty -> ``default``."""
    raw = _raw(name)
    if not raw:
        return default
    word = raw.lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise SettingError(_shown(name), raw, f"is not a switch: set one of {_FLAG_WORDS}")


def fraction(name: str, default: float) -> float:
    """``name`` as a share in ``[0, 1]``: a switch word (on -> 1.0, off -> 0.0) or a decimal
    such as ``0.01``; unset or empty -> ``default``."""
    raw = _raw(name)
    if not raw:
        return default
    word = raw.lower()
    if word in _TRUE or word in _FALSE:
        return 1.0 if word in _TRUE else 0.0
    try:
        value = float(word)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:  # NaN fails too
        raise SettingError(
            _shown(name),
            raw,
            f"is not a switch or a fraction: set one of {_FLAG_WORDS}, or a share in [0, 1] such as 0.01",
        )
    return value


def integer(name: str, default: int, *, minimum: int = 1) -> int:
    """``name`` as a decimal integer ``>= minimum``; unset or empty -> ``default``."""
    raw = _raw(name)
    if not raw:
        return default
    try:
        value = int(raw, 10)
    except ValueError:
        value = None
    if value is None or value < minimum:
        what, unit = ("a size", "bytes") if name.endswith("_BYTES") else ("a count", "elements")
        bound = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise SettingError(_shown(name), raw, f"is not {what}: set {bound} number of {unit} such as {default}")
    return value


def choice(name: str, default: str, choices: tuple[str, ...]) -> str:
    """``name`` as one of ``choices`` (case-insensitive); unset or empty -> ``default``."""
    raw = _raw(name)
    if not raw:
        return default
    word = raw.lower()
    if word not in choices:
        raise SettingError(_shown(name), raw, f"is not a known value: set one of {'|'.join(choices)}")
    return word


def names(name: str, *, choices: tuple[str, ...] | None = None) -> tuple[str, ...]:
    """``name`` as a comma-separated list (``;`` too; blanks dropped, order kept). Without
    ``choices`` each item must be a module name (an identifier); with ``choices`` each item,
    lower-cased, must be one of them."""
    raw = _raw(name)
    items = tuple(p.strip() for p in raw.replace(";", ",").split(",") if p.strip())
    if choices is not None:
        items = tuple(p.lower() for p in items)
        bad = [p for p in items if p not in choices]
        expected = f"a comma-separated list of {'|'.join(choices)}"
    else:
        bad = [p for p in items if not p.isidentifier()]
        expected = "a comma-separated list of top-level package names such as flydsl,torch"
    if bad:
        raise SettingError(_shown(name), raw, f"names {bad[0]!r}: set {expected}")
    return items


def cache_root() -> str:
    """``FLYDEPS_CACHE_DIR``, else the user cache directory (:func:`user_cache_root`): the
    root under which every flydeps cache lives."""
    return text("FLYDEPS_CACHE_DIR") or user_cache_root()


# (os.environ's modification counter, platformdirs' answer) of the last user_cache_root().
_user_cache: tuple[int, str] | None = None


def user_cache_root() -> str:
    """The user cache directory (``platformdirs``, imported only here), whatever
    ``FLYDEPS_CACHE_DIR`` says: where a memo goes that a read-only ``FLYDEPS_CACHE_DIR``
    (a shipped directory) cannot take. Asked again only after ``os.environ`` changed (its
    modification counter, ``flydeps.observe.environ.version``; every call where there is none):
    each answer costs ~50 µs, and the first a process asks imports platformdirs (~2.4 ms
    beside torch and FlyDSL, which ``FLYDEPS_CACHE_DIR`` avoids)."""
    global _user_cache
    now = _environ_hooks.version()
    memo = _user_cache
    if memo is not None and now is not None and memo[0] == now:
        return memo[1]
    import platformdirs

    with _environ_hooks.paused():  # flydeps' own configuration is never an input of the user's build
        root = platformdirs.user_cache_dir("flydeps")
    _user_cache = (now, root) if now is not None else None
    return root


def memo_paths(relative: str, first: str | None = None) -> tuple[str, ...]:
    """Where a memo kept at ``relative`` under :func:`cache_root` (or at ``first``) is read,
    in order, the last one written: there; where this process cannot write it (a shipped
    ``FLYDEPS_CACHE_DIR`` on a read-only volume, whose memo describes the machine that built
    it), also under :func:`user_cache_root`, so what it remembers is computed once per
    machine, not once per process."""
    first = first or os.path.join(cache_root(), relative)
    if can_write_file(first):
        return (first,)
    home = os.path.join(user_cache_root(), relative)
    return (first, home) if home != first and can_write_file(home) else (first,)


def can_write_file(path: str | os.PathLike[str]) -> bool:
    """This process can create or write the file at ``path``: its directory (:func:`can_write`),
    and the file where it exists."""
    return can_write(os.path.dirname(os.path.abspath(path))) and (not os.path.exists(path) or os.access(path, os.W_OK))


def can_write(directory: str | os.PathLike[str]) -> bool:
    """This process can create files in ``directory``; where it does not exist yet, in the
    nearest existing directory above it (where it would be made). ``os.access`` answers for
    this process's user and for read-only mounts alike."""
    path = os.path.abspath(directory)
    while not os.path.exists(path) and os.path.dirname(path) != path:
        path = os.path.dirname(path)
    return os.path.isdir(path) and os.access(path, os.W_OK)


def text(name: str) -> str | None:
    """``name`` as a free string (surrounding whitespace dropped); ``None`` when unset or empty."""
    return _raw(name) or None


def read(name: str) -> object:
    """``name`` parsed as :data:`SETTINGS` documents it (kind, default, accepted values)."""
    s = SETTINGS[name]
    if s.kind == "flag":
        return flag(name, s.default in _TRUE)
    if s.kind == "integer":
        return integer(name, int(s.default))
    if s.kind == "choice":
        return choice(name, s.default, s.values)
    if s.kind == "names":
        return names(name, choices=s.values or None)
    if s.kind == "fraction":
        return fraction(name, 1.0 if s.default in _TRUE else 0.0)
    return text(name)


def validate() -> None:
    """Parse every variable in :data:`SETTINGS`; raise the first :class:`SettingError`.

    The CLI calls it first, so a bad value is reported the same way (exit 2, one line)
    whether flydeps reads that variable at import, lazily, or not at all in that command."""
    for name in SETTINGS:
        read(name)


def _accepted(s: Setting) -> str:
    if s.kind == "flag":
        return _FLAG_WORDS
    if s.kind == "integer":
        return "integer >= 1"
    if s.kind == "choice":
        return "\\|".join(s.values)
    if s.kind == "names":
        return "comma-separated " + ("\\|".join(s.values) if s.values else "package names")
    if s.kind == "fraction":
        return f"{_FLAG_WORDS} or a fraction in [0, 1]"
    return "path"


def docs_table() -> str:
    """The Markdown table of :data:`SETTINGS` kept in docs/guarantees.md ("Configuration");
    ``tests/core/test_settings.py`` checks the docs hold exactly this text."""
    rows = ["| variable | values | default | read | meaning |", "|---|---|---|---|---|"]
    for s in SETTINGS.values():
        default = f"`{s.default}`" if s.default else "unset"
        rows.append(f"| `{s.name}` | {_accepted(s)} | {default} | {s.read} | {s.meaning} |")
    return "\n".join(rows) + "\n"
