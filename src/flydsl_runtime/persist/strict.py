"""Strict AOT mode: a launcher call the shipped index cannot serve is an error that says why.

Contract
--------
``FLYDEPS_AOT=strict`` (read on each launcher miss): a miss that the persistent index
(:mod:`.index`) cannot serve without tracing raises :class:`AotMissError` instead of
tracing. The error names the launcher, the index file, the nearest shipped specialization
of the same launcher (fewest differing parts, newest first) and exactly what differs from
it: each helper or global whose digest changed (qualified name and ``file:line``), added or
removed; each argument whose signature differs; the arch; each code-gen environment
variable; each variable the shipped trace read from ``os.environ`` that now has another
value; compile hints; the bound instance; FlyDSL, flydeps or Python versions. With no row
of that launcher it says so. A call that cannot be persisted at all (see
:func:`.index.persistent_key`) is an error that says which part has no cross-process name.
Any other value of ``FLYDEPS_AOT`` than ``off`` (the default) and ``strict`` is a
``SettingError`` naming the variable and the accepted values.

:func:`differences` is the comparison, usable on its own (tests, reports): two key-parts
dicts (:func:`.index.key_parts`) in, human reasons out, most specific first.

:func:`listing` is what a shipped directory holds (``flydeps aot list``): each index row
checked against the shape a build writes, the well-formed ones as :class:`Shipped`, each
other one a :class:`BadRow` naming the row and what is wrong with it; a bad row never
fails the listing of the others. Reads only.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from flydeps import settings
from flydeps.errors import FlydepsError
from flydeps.observe import environ as _environ
from flydeps.observe.environ import DERIVED

__all__ = ["AotMissError", "BadRow", "Listing", "Shipped", "differences", "listing", "probing", "shipped", "strict"]

log = logging.getLogger("flydsl_runtime")


class AotMissError(FlydepsError, RuntimeError):
    """Under ``FLYDEPS_AOT=strict``, a call the shipped index cannot serve without tracing."""

    def __init__(
        self, launcher: str, index: Path, why: str, reasons: tuple[str, ...] = (), key: str | None = None
    ) -> None:
        # key: the persistent key of the refused call (None: it has none), which an AOT build
        # uses to build each specialization once however many items give it.
        self.launcher, self.index, self.reasons, self.key = launcher, index, reasons, key
        detail = f": {'; '.join(reasons)}" if reasons else ""
        super().__init__(
            f"FLYDEPS_AOT=strict: {launcher}() has no shipped specialization for this call in {index} "
            f"({why}{detail}). Build this specialization into the shipped cache (yield this call "
            "from the spec of `flydeps aot build --out` that directory, or run it once with COMPILE_ONLY=1 "
            "and FLYDEPS_CACHE_DIR / FLYDSL_RUNTIME_CACHE_DIR pointing at it), "
            f"or unset FLYDEPS_AOT to trace on a miss; `flydeps aot list {index.parent}` shows what it holds."
        )


def strict() -> bool:
    """True under ``FLYDEPS_AOT=strict`` or :func:`probing`; a value other than
    ``off``/``strict`` raises :class:`flydeps.settings.SettingError` naming the variable."""
    if getattr(_probe, "on", False):
        return True
    return settings.choice("FLYDEPS_AOT", "off", ("off", "strict")) == "strict"


def _text(canonical: object) -> str:
    """A canonical key part (:func:`.index._canonical`) as a short human string."""
    if not isinstance(canonical, list) or not canonical:
        return repr(canonical)
    tag, *rest = canonical
    if tag == "n":
        return "None"
    if tag in ("b", "i", "s"):
        return repr(rest[0]) if tag == "s" else str(rest[0])
    if tag == "f":
        return _float_text(rest[0])
    if tag == "y":
        return repr(bytes.fromhex(rest[0]))
    if tag == "c":
        return str(rest[0]).rpartition(":")[2]
    if tag == "d":
        return str(rest[0])
    if tag == "t":
        items = rest[0]
        # A float keyed by its IEEE-754 bytes: (float, bits) for a Constexpr float,
        # ("float-bits", bits) for one inside FlyDSL's value signature. Shown as the number.
        if len(items) == 2 and items[0] in _FLOAT_MARKS and _is_bits(items[1]):
            number = _float_text(items[1][1])
            return f"(float, {number})" if items[0][0] == "c" else number
        tensor = _tensor_text(items)
        if tensor is not None:
            return tensor
        return "(" + ", ".join(_text(x) for x in items) + ("," if len(items) == 1 else "") + ")"
    return repr(canonical)


# How index._canonical spells the float class and argsig's "float-bits" tag.
_FLOAT_MARKS = (["c", "builtins:float"], ["s", "float-bits"])


def _tensor_text(items: list) -> str | None:
    """FlyDSL 0.5's signature of a torch tensor, ``(TorchTensorJitArg, dtype, alignment,
    use_32bit_stride, shape, stride)`` with ``-1`` for a dynamic entry, as
    ``Tensor(torch.float16, shape (?, ?), stride (?, 1), align 2)``; None for any other
    form (another FlyDSL's is then shown as it is)."""
    if len(items) != 6 or items[0] != ["c", "flydsl.compiler.jit_argument:TorchTensorJitArg"]:
        return None
    _, dtype, align, narrow, shape, stride = items
    if dtype[:1] != ["d"] or align[:1] != ["i"] or narrow[:1] != ["b"]:
        return None
    dims = []
    for part in (shape, stride):
        if part[:1] != ["t"] or not all(isinstance(e, list) and e[:1] == ["i"] for e in part[1]):
            return None
        entries = ["?" if e[1] == "-1" else str(e[1]) for e in part[1]]
        dims.append("(" + ", ".join(entries) + ("," if len(entries) == 1 else "") + ")")
    extra = ", 32-bit strides" if narrow[1] else ""
    return f"Tensor({dtype[1]}, shape {dims[0]}, stride {dims[1]}, align {align[1]}{extra})"


def _is_bits(part: object) -> bool:
    return (
        isinstance(part, list) and len(part) == 2 and part[0] == "y" and isinstance(part[1], str) and len(part[1]) == 16
    )


def _float_text(bits_hex: str) -> str:
    """A float from its little-endian IEEE-754 bytes in hex: its repr (exact, and -0.0 apart
    from 0.0); a NaN also by its bits, since NaNs with other payloads key apart."""
    import struct

    try:
        value = struct.unpack("<d", bytes.fromhex(bits_hex))[0]
    except (ValueError, struct.error):
        return repr(bits_hex)
    return f"nan (bits {bits_hex})" if value != value else repr(value)


def _node_reasons(old: dict, new: dict) -> list[str]:
    words = {"global": "global", "external": "library"}
    out = []
    same_version: dict[str, list[str]] = {}  # a library's version -> its leaves that changed anyway
    for nid in sorted(set(old) | set(new)):
        before, after = old.get(nid), new.get(nid)
        if before is not None and after is not None and before[0] == after[0]:
            continue
        entry: list = after if after is not None else before  # type: ignore[assignment]
        if before and after and entry[2] == "external" and len(before) > 3 and len(after) > 3 and before[3] == after[3]:
            same_version.setdefault(after[3], []).append(nid.removeprefix("external:"))
            continue
        what = words.get(entry[2], "helper")
        where = f" ({entry[1]})" if entry[1] else ""
        if before is None:
            out.append(f"{what} {nid}{where} added")
        elif after is None:
            out.append(f"{what} {nid}{where} removed")
        elif len(before) > 3 and len(after) > 3 and before[3] != after[3]:  # what the digests stand for
            out.append(f"{what} {nid}{where} changed: {before[3]} -> {after[3]}")
        else:
            out.append(f"{what} {nid}{where} changed")
    for version, names in sorted(same_version.items()):  # one line per library, not one per name
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        out.append(
            f"library {version} ({shown}) changed at the same version: its files were installed again with "
            "other contents, or the row was keyed by another flydeps"
        )
    # The helpers themselves first, then what they read, then structure.
    return sorted(out, key=lambda r: (not r.startswith("helper "), r.endswith(("added", "removed"))))


def _state_reasons(old: object, new: object) -> list[str]:
    """The attributes of a bound instance (keyed by its state) that differ."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return []
    out = []
    for name in sorted(set(old) | set(new), key=str):
        before, after = old.get(name), new.get(name)
        if not all(isinstance(v, list) and len(v) == 2 for v in (before, after) if v is not None):
            out.append(f"bound instance attribute {name} changed")  # a row written otherwise
        elif before is None:
            out.append(f"bound instance attribute {name} added")
        elif after is None:
            out.append(f"bound instance attribute {name} removed")
        elif before[0] != after[0]:
            out.append(f"bound instance attribute {name}: {before[1]} -> {after[1]}")
    return out


def differences(
    shipped: dict, now: dict, shipped_reads: tuple[tuple[str, str | None], ...] = (), live: dict | None = None
) -> tuple[str, ...]:
    """What differs between a shipped row's key parts and this call's."""
    reasons: list[str] = _node_reasons(shipped.get("nodes", {}), now.get("nodes", {}))
    old_args, new_args = shipped.get("args", {}), now.get("args", {})
    for name in [*new_args, *(n for n in old_args if n not in new_args)]:  # parameter order
        a, b = old_args.get(name), new_args.get(name)
        if a != b:
            reasons.append(f"argument {name!r}: {_text(a)} -> {_text(b)}")
    if shipped.get("arch") != now.get("arch"):
        reasons.append(f"arch {shipped.get('arch')} -> {now.get('arch')}")
    elif shipped.get("target") != now.get("target"):
        reasons.append(f"target {_text(shipped.get('target'))} -> {_text(now.get('target'))}")
    old_env, new_env = shipped.get("env", {}), now.get("env", {})
    for name in sorted(set(old_env) | set(new_env)):
        if old_env.get(name, "") != new_env.get(name, ""):
            reasons.append(f"env {name}: {old_env.get(name, '')!r} -> {new_env.get(name, '')!r}")
    environ = live if live is not None else {}
    for name, value in shipped_reads:
        read_now = _environ.current(name) if name.startswith(DERIVED) else environ.get(name)
        if read_now != value:
            from ..trace import explain  # imports FlyDSL (its environment lists): not for a listing

            reasons.append(explain.env_read_change(name, value, read_now, by="the shipped trace"))
    if shipped.get("hints") != now.get("hints"):
        reasons.append(f"compile hints {_text(shipped.get('hints'))} -> {_text(now.get('hints'))}")
    attributes = _state_reasons(shipped.get("self_state"), now.get("self_state"))
    reasons += attributes
    if shipped.get("self") != now.get("self") and not attributes:
        reasons.append(f"bound instance {_text(shipped.get('self'))} -> {_text(now.get('self'))}")
    if shipped.get("versions") != now.get("versions"):
        names = ("FlyDSL", "flydeps", "Python")
        for label, a, b in zip(names, shipped.get("versions") or ("?",) * 3, now.get("versions") or ("?",) * 3):
            if a != b:
                why = _FLYDEPS_RULES if label == "flydeps" else ""
                reasons.append(f"{label} {a} -> {b}{why}")
    return tuple(reasons)


_FLYDEPS_RULES = " (rows are keyed by the rules of the flydeps that made them: rebuild them)"


@dataclass(frozen=True)
class Shipped:
    """One specialization in a shipped directory (:func:`shipped`)."""

    launcher: str
    args: tuple[tuple[str, str], ...]  # (parameter, signature as text), in parameter order
    arch: str
    env: tuple[tuple[str, str], ...]  # code-gen variables with a value
    reads: tuple[tuple[str, str | None], ...]  # os.environ reads of the trace: name, value (None: unset)
    versions: tuple[str, ...]  # FlyDSL, flydeps, Python X.Y
    created: float
    ir_key: str
    artifact: bool | None  # FlyDSL's artifact is in the directory (None: not checked)
    # Not there for this process's FlyDSL toolchain, but for another one that traced into the
    # directory (its ROCm device bitcode or FlyDSL install differ from this process's).
    other_toolchain: bool = False

    def line(self) -> str:
        args = ", ".join(f"{name}={text}" for name, text in self.args)
        parts = [f"{self.launcher}({args}) [{self.arch}]"]
        if self.env:
            parts.append("env " + " ".join(f"{k}={v!r}" for k, v in self.env))
        if self.reads:
            shown = (f"{k.removeprefix(DERIVED)}={_environ.shown(k, v)}" for k, v in self.reads)
            parts.append("reads " + " ".join(shown))
        versions = dict(zip(("FlyDSL", "flydeps", "Python"), self.versions))
        parts.append(" ".join(f"{k} {v}" for k, v in versions.items()))
        parts.append(f"built {time.strftime('%Y-%m-%d %H:%M', time.localtime(self.created))}")
        if self.artifact:
            parts.append("artifact ok")
        elif self.other_toolchain:
            parts.append(
                "artifact there for another FlyDSL toolchain only (a runtime with this process's ROCM_PATH and "
                "FlyDSL would trace this one)"
            )
        elif self.artifact is not None:
            parts.append("artifact MISSING (a runtime would trace this one)")
        return ", ".join(parts)


@dataclass(frozen=True)
class BadRow:
    """A row of a shipped index without the shape this flydsl_runtime writes (a damaged
    file, a row edited by hand or written by another tool): named, not listed."""

    row: int  # its SQLite rowid
    launcher: str  # as stored ("?" when that is not text)
    problem: str

    def line(self) -> str:
        return f"row {self.row} (launcher {self.launcher}): {self.problem}"


@dataclass(frozen=True)
class Listing:
    """What a shipped directory holds (:func:`listing`): its well-formed rows, by launcher
    then newest first, and its bad ones, by row number."""

    rows: tuple[Shipped, ...]
    bad: tuple[BadRow, ...]


def listing(directory: Path, *, check_artifacts: bool = True) -> Listing:
    """The specializations the index in ``directory`` holds, and the rows it cannot list.

    Each row is checked against the shape a build writes (:func:`_checked`: the types of
    its columns, and of the parts of its ``detail`` a listing shows: ``arch``, ``args`` as
    key signatures, ``env``, ``versions``); one without it is a :class:`BadRow` saying what
    is wrong, and every other row is listed. ``check_artifacts``: look for each row's FlyDSL
    artifact as a runtime with *this* FlyDSL would (its disk key namespaces the IR key by
    the current toolchain; the artifact in ``directory/flydsl/<function>/``); one missing
    for it but there for another toolchain the index remembers (the build's, listed from a
    shell with another ``ROCM_PATH``) is ``other_toolchain``. The toolchain key is read back
    from the index (:func:`.index.toolchain_key_read_only`), so a listing imports neither
    FlyDSL nor torch where the build remembered it. Reads only: no row, artifact
    or toolchain entry is written (SQLite may create its ``-shm``/``-wal`` side files beside
    the index, as any reader of a WAL-mode database does, and removes them when it can).
    Raises :class:`.index.IndexReadError` naming the file when there is no readable index."""
    from . import index

    if Path(directory).exists() and not Path(directory).is_dir():
        raise index.IndexReadError(f"{directory} is a file, not the --out DIR of an AOT build")
    path = Path(directory) / index.INDEX_NAME
    stored = _stored_rows(path)
    present: set[str] | None = None
    toolchain = ""
    others: list[str] = []
    if check_artifacts:
        toolchain = index.toolchain_key_read_only(path)  # FlyDSL's own; nothing written
        present = {p.stem for p in (Path(directory) / "flydsl").glob("*/*.pkl")}
        others = [k for k in index.read_toolchain_keys(path) if k != toolchain]
    out, bad = [], []
    for raw in stored:
        checked = _checked(raw)
        if isinstance(checked, BadRow):
            bad.append(checked)
            continue
        artifact = index.disk_key_with(toolchain, checked.ir_key) in present if present is not None else None
        elsewhere = (
            present is not None
            and not artifact
            and any(index.disk_key_with(k, checked.ir_key) in present for k in others)
        )
        out.append(dataclasses.replace(checked, artifact=artifact, other_toolchain=elsewhere))
    return Listing(tuple(sorted(out, key=lambda s: (s.launcher, -s.created))), tuple(bad))


def shipped(directory: Path, *, check_artifacts: bool = True) -> list[Shipped]:
    """The well-formed specializations of :func:`listing`; each bad row is logged as a
    warning (logger ``flydsl_runtime``) naming the index and the row."""
    from . import index

    found = listing(directory, check_artifacts=check_artifacts)
    for row in found.bad:
        log.warning("%s: %s", Path(directory) / index.INDEX_NAME, row.line())
    return list(found.rows)


def _stored_rows(path: Path) -> list[tuple]:
    """Every row of the index file ``path`` as SQLite holds it, ``(rowid, key, env_reads,
    launcher, ir_key, created, detail)`` by rowid, opened read-only (no table created or
    migrated, a damaged file not set aside). Text that is not UTF-8 comes back with its
    bytes as surrogates, a value of another type as it is: :func:`_checked` names either,
    where :func:`.index.read_rows`, which converts every value, fails the whole listing.
    Raises :class:`.index.IndexReadError` naming the file."""
    from . import index, sqlitefile

    if not path.is_file():
        raise index.IndexReadError(
            f"{path}: no persistent index there (an AOT build writes {index.INDEX_NAME} into its --out DIR)"
        )
    try:
        conn = sqlitefile.open_read_only(path)
        try:
            conn.text_factory = lambda data: data.decode("utf-8", "surrogateescape")
            return conn.execute(
                "SELECT rowid, key, env_reads, launcher, ir_key, created, detail FROM specializations ORDER BY rowid"
            ).fetchall()
        finally:
            conn.close()
    except Exception as error:  # a damaged file makes the driver raise more than sqlite3.Error (UnicodeDecodeError)
        raise index.IndexReadError(f"{path}: not a readable persistent index ({index.describe(error)})") from None


class _Bad(ValueError):
    """What is wrong with a row (:func:`_checked`)."""


def _checked(raw: tuple) -> Shipped | BadRow:
    """A stored row (:func:`_stored_rows`) as a :class:`Shipped` (its artifact not yet
    looked for), or the :class:`BadRow` saying what in it has not the shape a build writes."""
    rowid, _key, reads_text, launcher, ir_key, created, detail_text = raw
    shown = launcher if _is_text(launcher) else "?"
    try:
        texts = (("key", _key), ("env_reads", reads_text), ("launcher", launcher), ("ir_key", ir_key))
        for name, value in (*texts, ("detail", detail_text)):
            if not _is_text(value):
                raise _Bad(f"{name} is {_kind(value)}, not UTF-8 text")
        reads = _reads(reads_text)
        stamp = _created(created)
        detail = _detail(detail_text)
    except _Bad as problem:
        return BadRow(int(rowid), shown, str(problem))
    env = detail["env"]
    return Shipped(
        launcher,
        tuple((name, _text(sig)) for name, sig in detail["args"].items()),
        detail["arch"],
        tuple(sorted((k, str(v)) for k, v in env.items() if v not in ("", None))),
        tuple((name, value) for name, value in reads),
        tuple(detail["versions"]),
        stamp,
        ir_key,
        None,
    )


def _is_text(value: object) -> bool:
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # bytes that were not UTF-8 (surrogates, _stored_rows)
        return False
    return True


def _kind(value: object) -> str:
    """A stored or JSON value's type, as a message names it."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return f"a boolean ({value})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value!r})"
    if isinstance(value, bytes):
        return f"a blob of {len(value)} bytes"
    if isinstance(value, str):
        clipped = value if len(value) <= 40 else value[:40] + "..."
        return f"text {clipped!r}" if _is_text(value) else "text that is not UTF-8"
    if isinstance(value, dict):
        return "an object"
    return f"a list of {len(value)}" if isinstance(value, list) else type(value).__name__


def _parsed(text: str, column: str) -> object:
    try:
        return json.loads(text)
    except RecursionError:
        raise _Bad(f"{column} is JSON nested too deep") from None
    except ValueError as error:
        raise _Bad(f"{column} is not JSON ({error})") from None


def _reads(text: str) -> list:
    """A row's ``env_reads``: a JSON list of ``[variable, value or null]``."""
    reads = _parsed(text, "env_reads")
    if not isinstance(reads, list):
        raise _Bad(f"env_reads is {_kind(reads)}, not a list of [variable, value] pairs")
    for i, pair in enumerate(reads):
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str)):
            raise _Bad(f"env_reads[{i}] is {_kind(pair)}, not a [variable, value] pair")
        if pair[1] is not None and not isinstance(pair[1], str):
            raise _Bad(f"env_reads[{i}] gives {pair[0]} {_kind(pair[1])}, not text or null")
    return reads


def _created(created: object) -> float:
    """A row's ``created``: seconds since the epoch, a time this platform can show."""
    if isinstance(created, bool) or not isinstance(created, (int, float)):
        raise _Bad(f"created is {_kind(created)}, not a time (seconds since the epoch)")
    try:
        time.localtime(created)
    except (OverflowError, ValueError, OSError):
        raise _Bad(f"created is {created!r}, not a time this platform can show") from None
    return float(created)


def _detail(text: str) -> dict:
    """A row's ``detail`` (:func:`.index.key_parts`): the parts a listing shows, checked."""
    detail = _parsed(text, "detail")
    if not isinstance(detail, dict):
        raise _Bad(f"detail is {_kind(detail)}, not an object")
    for name, wanted in (("arch", str), ("args", dict), ("env", dict), ("versions", list)):
        if name not in detail:
            raise _Bad(f"detail has no {name}")
        if not isinstance(detail[name], wanted) or isinstance(detail[name], bool):
            shape = {str: "text", dict: "an object", list: "a list of version strings"}[wanted]
            raise _Bad(f"detail.{name} is {_kind(detail[name])}, not {shape}")
    for name, value in detail["env"].items():
        if value is not None and not isinstance(value, str):
            raise _Bad(f"detail.env[{name!r}] is {_kind(value)}, not text")
    for i, value in enumerate(detail["versions"]):
        if not isinstance(value, str):
            raise _Bad(f"detail.versions[{i}] is {_kind(value)}, not a version string")
    for name, sig in detail["args"].items():
        problem = _signature_problem(sig, 0)
        if problem:
            raise _Bad(f"detail.args[{name!r}] is not an argument signature: {problem}")
    return detail


# The forms of a key signature (index._canonical): tag -> the type of its one value.
_SIGNATURE_VALUE: dict[str, type] = {"b": bool, "i": str, "s": str, "f": str, "y": str, "c": str, "d": str}
_DEEPEST = 64


def _signature_problem(part: object, depth: int) -> str:
    """What in ``part`` is not a key signature (index._canonical) ("" when it is one)."""
    if depth > _DEEPEST:
        return f"nested deeper than {_DEEPEST}"
    if not (isinstance(part, list) and part and isinstance(part[0], str)):
        return f"{_kind(part)} where a tagged list belongs"
    tag, *rest = part
    if tag == "n":
        return "" if not rest else "['n'] takes no value"
    if tag == "t":
        if len(rest) != 1 or not isinstance(rest[0], list):
            return f"['t', ...] holds {_kind(rest[0] if len(rest) == 1 else rest)}, not a list"
        return next((p for p in (_signature_problem(item, depth + 1) for item in rest[0]) if p), "")
    wanted = _SIGNATURE_VALUE.get(tag)
    if wanted is None:
        return f"unknown tag {tag!r}"
    if len(rest) != 1 or not isinstance(rest[0], wanted):
        return f"[{tag!r}, ...] holds {_kind(rest[0] if len(rest) == 1 else rest)}"
    if tag == "y" and not _is_hex(str(rest[0])):
        return f"['y', ...] holds {_kind(rest[0])}, not hex"
    return ""


def _is_hex(text: str) -> bool:
    try:
        bytes.fromhex(text)
    except ValueError:
        return False
    return True


def toolchain_here() -> str:
    """Where this process's FlyDSL finds its ROCm toolchain, for a listing whose artifacts
    are there for another one: ``ROCm root /opt/rocm; ROCM_PATH is not set``."""
    from . import index

    return f"ROCm root {index.rocm_root()}; {index.rocm_path_setting()}"


_probe = threading.local()


@contextmanager
def probing() -> Iterator[None]:
    """Within it, on this thread, calls are strict (:func:`strict`) and a miss raises
    :class:`AotMissError` without looking for the nearest shipped specialization: an AOT
    build worker asks whether the index can serve a call, before any trace, and an answer
    that read every row of the launcher would make a first build quadratic in its
    specializations."""
    _probe.on = True
    try:
        yield
    finally:
        _probe.on = False


def miss_error(launcher: str, now: dict | None, why_unpersistable: str = "", key: str | None = None) -> AotMissError:
    """The error for a call the index could not serve (``now``: this call's key parts;
    ``key``: its persistent key, carried by a probe's error)."""
    import os

    from . import index

    path = index.index_path()
    if getattr(_probe, "on", False):
        return AotMissError(launcher, path, "not in the index (probed by an AOT build)", key=key)
    if now is None:
        return AotMissError(launcher, path, f"this call cannot be served from an index: {why_unpersistable}")
    if not path.exists():
        return AotMissError(launcher, path, "there is no index there")
    try:
        rows = index.launcher_rows(launcher)
    except index.IndexReadError as error:
        return AotMissError(launcher, path, f"the index cannot be read: {str(error).removeprefix(f'{path}: ')}")
    if not rows:
        return AotMissError(launcher, path, "the index has no specialization of this launcher")
    live = dict(os.environ)
    scored = [(differences(detail, now, reads, live), -created, created) for reads, detail, created in rows]
    reasons, _order, created = min(scored, key=lambda s: (len(s[0]), s[1]))
    if not reasons:
        reasons = ("the shipped artifact is missing or unreadable in FLYDSL_RUNTIME_CACHE_DIR",)
    stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(created))
    return AotMissError(launcher, path, f"nearest shipped specialization, built {stamp}, differs", reasons)
