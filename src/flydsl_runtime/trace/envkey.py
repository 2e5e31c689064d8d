"""The code-generation environment as a cache-key segment, re-read live on every call.

Contract
--------
:func:`env_key` returns a hashable tuple describing every environment variable that changes
what FlyDSL generates, read from ``os.environ`` at the moment of the call (a user may flip
``FLYDSL_COMPILE_OPT_LEVEL`` mid-process). It follows FlyDSL 0.5's own list
(``_CACHE_INVALIDATING_ENV_VARS`` and the per-arch ``_TARGET_CACHE_INVALIDATING_ENV_VARS``)
with two corrections the seeds ask for:

* the arch selectors ``ARCH``, ``FLYDSL_GPU_ARCH``, ``HSA_OVERRIDE_GFX_VERSION`` never enter
  it: they only pick the target, which :mod:`flydsl_runtime.trace.target` keys as resolved, so an
  AOT build with ``ARCH=gfx942`` and a runtime that detects gfx942 share keys;
* the path-like ``FLYDSL_COMPILE_LLVM_DIR`` and ``FLYDSL_EXTRA_SOURCE_DIRS`` are keyed by their
  effect, not the path string: the external toolchain by a content digest of ``mlir-opt``
  and its LLVM/MLIR libraries, the source directories by a content digest of their ``*.py``
  files (relative names + bytes). Digests are memoised by the path's ``(mtime_ns, size)``, so
  the warm path costs one ``stat`` per configured path and nothing when they are unset.

The fast read uses ``os.environ._data`` with pre-encoded names (as FlyDSL does), falling back
to ``os.environ.get`` where that layout is absent; both give identical values.

:func:`describe_env_change` names the variables that differ between two keys, for the
recompile log.
"""

from __future__ import annotations

import os
from collections.abc import Hashable
from pathlib import Path
from typing import cast

import blake3

__all__ = [
    "ARCH_SELECTORS",
    "CODEGEN_ENV_VARS",
    "PATH_LIKE_ENV_VARS",
    "VALUE_KEYED_ENV_VARS",
    "describe_env_change",
    "env_key",
    "named_env",
    "paths_configured",
]

ARCH_SELECTORS = ("ARCH", "FLYDSL_GPU_ARCH", "HSA_OVERRIDE_GFX_VERSION")
PATH_LIKE_ENV_VARS = ("FLYDSL_COMPILE_LLVM_DIR", "FLYDSL_EXTRA_SOURCE_DIRS")


def _flydsl_env_lists() -> tuple[tuple[str, ...], dict[str, tuple[str, ...]]]:
    """FlyDSL's own lists when present (so a new knob upstream is keyed too), else 0.5's."""
    try:
        from flydsl.compiler import jit_function as jf

        plain = tuple(jf._CACHE_INVALIDATING_ENV_VARS)
        per_arch = {arch: tuple(names) for arch, names in jf._TARGET_CACHE_INVALIDATING_ENV_VARS.items()}
    except (ImportError, AttributeError):
        plain = (
            "FLYDSL_COMPILE_OPT_LEVEL",
            "FLYDSL_COMPILE_BACKEND",
            "FLYDSL_COMPILE_LLVM_DIR",
            "FLYDSL_DEBUG_ENABLE_DEBUG_INFO",
            "FLYDSL_EXTRA_SOURCE_DIRS",
            "FLYDSL_KTRACE_ENABLE",
            "FLYDSL_KTRACE_BLOCKS",
            "FLYDSL_KTRACE_BUFFER_BYTES",
        )
        per_arch = {"gfx1250": ("LLVM_GFX1250_ANY_XNACK_CODEGEN",)}
    plain = tuple(n for n in plain if n not in ARCH_SELECTORS)
    return plain, per_arch


_PLAIN, _PER_ARCH = _flydsl_env_lists()
CODEGEN_ENV_VARS: tuple[str, ...] = _PLAIN + tuple(sorted({n for names in _PER_ARCH.values() for n in names}))
# Keyed by their raw value for every target (not path-like, not arch-specific).
VALUE_KEYED_ENV_VARS: tuple[str, ...] = tuple(n for n in _PLAIN if n not in PATH_LIKE_ENV_VARS)

try:
    _FAST = os.supports_bytes_environ and isinstance(os.environ._data, dict)  # type: ignore[attr-defined]
except AttributeError:
    _FAST = False

_PLAIN_VALUE = tuple((n, os.fsencode(n)) for n in _PLAIN if n not in PATH_LIKE_ENV_VARS)
_PATH_LIKE = tuple((n, os.fsencode(n)) for n in _PLAIN if n in PATH_LIKE_ENV_VARS)
_PER_ARCH_ENCODED = {arch: tuple((n, os.fsencode(n)) for n in names) for arch, names in _PER_ARCH.items()}
_PLAIN_KEYS = tuple(b for _n, b in _PLAIN_VALUE)
_PATH_KEYS = tuple(b for _n, b in _PATH_LIKE)
_PER_ARCH_KEYS = {arch: tuple(b for _n, b in names) for arch, names in _PER_ARCH_ENCODED.items()}


def _read(keys: tuple[bytes, ...]) -> tuple[str | None, ...]:
    """Raw values (``None`` when unset), decoded so fast and slow reads agree exactly."""
    if _FAST:
        values = tuple(map(os.environ._data.get, keys))  # type: ignore[attr-defined]
        return values if not any(values) else tuple(None if v is None else os.fsdecode(v) for v in values)
    return tuple(os.environ.get(os.fsdecode(k)) for k in keys)


# --- effect digests of the path-like variables -------------------------------------------

_digest_memo: dict[tuple, str] = {}


def _stat_sig(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size)


def _hash_files(files: list[tuple[str, Path]]) -> str:
    h = blake3.blake3()
    for rel, path in files:
        h.update(rel.encode() + b"\0")
        try:
            h.update(path.read_bytes())
        except OSError as exc:
            h.update(f"<unreadable: {type(exc).__name__}>".encode())
        h.update(b"\0")
    return h.hexdigest()


def _llvm_dir_files(prefix: Path) -> list[tuple[str, Path]]:
    # The same files FlyDSL fingerprints: mlir-opt and a shared-library build's LLVM/MLIR libs.
    files = [("bin/mlir-opt", prefix / "bin" / "mlir-opt")]
    lib = prefix / "lib"
    if lib.is_dir():
        files += [
            (f"lib/{p.name}", p)
            for p in sorted(lib.glob("lib*.so*"))
            if p.name.startswith(("libLLVM", "libMLIR")) and not p.is_symlink()
        ]
    return files


def _llvm_dir_effect(raw: str) -> str:
    prefix = Path(raw.strip()).expanduser()
    tool = prefix / "bin" / "mlir-opt"
    sig = _stat_sig(tool)
    if sig is None:
        return "llvm:missing-mlir-opt"
    memo_key = ("llvm", raw, sig)
    found = _digest_memo.get(memo_key)
    if found is None:
        found = "llvm:" + _hash_files(_llvm_dir_files(prefix))
        _digest_memo[memo_key] = found
    return found


def _source_dirs_effect(raw: str) -> str:
    # A directory's mtime moves when a file is added, removed or replaced by rename (how
    # editors save); an in-place edit of a kernel module is seen by the dependency guard.
    dirs = [Path(d.strip()).expanduser() for d in raw.split(":") if d.strip()]
    sigs = tuple(_stat_sig(d) for d in dirs)
    memo_key = ("src", raw, sigs)
    found = _digest_memo.get(memo_key)
    if found is None:
        h = blake3.blake3()
        for d, sig in zip(dirs, sigs):
            if sig is None or not d.is_dir():
                h.update(b"<missing dir>\0")
                continue
            files = [(p.relative_to(d).as_posix(), p) for p in sorted(d.rglob("*.py"))]
            h.update(_hash_files(files).encode())
        found = "src:" + h.hexdigest()
        _digest_memo[memo_key] = found
    return found


_EFFECTS = {"FLYDSL_COMPILE_LLVM_DIR": _llvm_dir_effect, "FLYDSL_EXTRA_SOURCE_DIRS": _source_dirs_effect}


def _path_effects() -> tuple[str | None, ...]:
    raws = _read(_PATH_KEYS)
    if not any(raws):
        return raws
    return tuple(_EFFECTS[n](raw) if raw and raw.strip() else raw for (n, _b), raw in zip(_PATH_LIKE, raws))


_ALL_KEYS = _PLAIN_KEYS + _PATH_KEYS + tuple(sorted({b for keys in _PER_ARCH_KEYS.values() for b in keys}))
_UNSET = (None,) * len(_ALL_KEYS)
_memo: dict[tuple, Hashable] = {}


def paths_configured() -> bool:
    """True while a path-like variable is set: its effect (a content digest) must then be
    re-checked on every call, so callers must not memoize :func:`env_key` on the environment."""
    return any(_read(_PATH_KEYS))


def env_key(arch: str) -> Hashable:
    """The live code-generation environment for a target of architecture ``arch``.

    One C-level read of every variable; when none is set (the usual case) or only plain
    ones are, the result comes from a memo keyed by the raw values. Path-like variables are
    re-checked (one ``stat`` per path) on every call while they are set.
    """
    raw = tuple(map(os.environ._data.get, _ALL_KEYS)) if _FAST else _read(_ALL_KEYS)  # type: ignore[attr-defined]
    memo_key = (arch, raw)
    found = _memo.get(memo_key)
    if found is not None:
        return found
    extra = _PER_ARCH_KEYS.get(arch)
    key = (_read(_PLAIN_KEYS), _path_effects(), _read(extra) if extra else ())
    if not any(_read(_PATH_KEYS)):
        if len(_memo) >= 256:
            _memo.clear()
        _memo[memo_key] = key
    return key


def _named(key: Hashable, arch: str) -> dict[str, str]:
    plain, paths, extra = cast("tuple[tuple[str | None, ...], ...]", key)
    names = [n for n, _b in _PLAIN_VALUE] + [n for n, _b in _PATH_LIKE]
    names += [n for n, _b in _PER_ARCH_ENCODED.get(arch, ())]
    return dict(zip(names, (v or "" for v in (*plain, *paths, *extra))))


def named_env(key: Hashable, arch: str) -> dict[str, str]:
    """An :func:`env_key` result as ``{variable: value}`` (``""`` for unset; path-like
    variables by their effect digest)."""
    return _named(key, arch)


def describe_env_change(old: Hashable, new: Hashable, arch: str) -> tuple[str, ...]:
    """Human reasons: which variables differ between two :func:`env_key` results."""
    before, after = _named(old, arch), _named(new, arch)
    reasons = []
    for name in sorted(set(before) | set(after)):
        a, b = before.get(name, ""), after.get(name, "")
        if a != b:
            what = "content changed" if name in PATH_LIKE_ENV_VARS and a and b else f"{a!r} -> {b!r}"
            reasons.append(f"env {name}: {what}")
    return tuple(reasons)
