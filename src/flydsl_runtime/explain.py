"""Recompile reasons: why a launcher call missed its cache, in words, on one logger.

Contract
--------
:func:`describe_miss` compares the key of a call that missed with the key of the previous
entry of the same launcher and owner class, component by component, and returns human
reasons ("helper pkg.mem:_load_q changed", "argument 'a': dtype torch.float32 ->
torch.float16", "env FLYDSL_COMPILE_OPT_LEVEL: '' -> '1'", "target gfx942 -> gfx950").
:func:`log_recompile` writes them to the ``flydsl_runtime`` logger at INFO level. Setting
``FLYDEPS_LOG=recompiles`` (read on every miss, misses being rare) attaches one stderr
handler to that logger so the reasons print without any logging setup.

A call key is the plain tuple built by :mod:`flydsl_runtime.jit`:
``(dependency digest, argument signatures, target, env, hints, bound-self key)``.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Hashable, Sequence

from flydeps.fingerprint import Fingerprint

from .envkey import describe_env_change

__all__ = ["DIGEST", "ARGS", "TARGET", "ENV", "HINTS", "SELF", "describe_miss", "log_recompile", "short"]

log = logging.getLogger("flydsl_runtime")

DIGEST, ARGS, TARGET, ENV, HINTS, SELF = range(6)
_SHORT = 80


def short(value: object) -> str:
    """A bounded description for logs; types and dtypes by name, never a long repr."""
    if isinstance(value, type):
        text = value.__qualname__
    elif isinstance(value, tuple):
        text = "(" + ", ".join(short(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    else:
        text = str(value)
    return text if len(text) <= _SHORT else text[: _SHORT - 3] + "..."


def _target(key: Hashable) -> str:
    (_backend, arch, _warp), device = key  # type: ignore[misc]
    return f"{arch} (device {device})"


def describe_miss(
    launcher: str,
    names: Sequence[str],
    old: tuple | None,
    new: tuple,
    old_fp: Fingerprint | None,
    new_fp: Fingerprint,
    owner: type | None,
) -> tuple[str, ...]:
    """Reasons the call keyed ``new`` missed, relative to the previous key ``old``."""
    if old is None:
        where = f" for owner class {owner.__qualname__}" if owner is not None else ""
        return (f"first call of {launcher}{where}",)
    reasons: list[str] = []
    if old[DIGEST] != new[DIGEST]:
        reasons += new_fp.explain(old_fp) if old_fp is not None else ("dependencies changed",)
    if old[ARGS] != new[ARGS]:
        for name, a, b in zip(names, old[ARGS], new[ARGS]):
            if a != b:
                reasons.append(f"argument {name!r}: {short(a)} -> {short(b)}")
    if old[TARGET] != new[TARGET]:
        reasons.append(f"target {_target(old[TARGET])} -> {_target(new[TARGET])}")
    if old[ENV] != new[ENV]:
        reasons += describe_env_change(old[ENV], new[ENV], new[TARGET][0][1])
    if old[HINTS] != new[HINTS]:
        reasons.append(f"compile hints {short(dict(old[HINTS]))} -> {short(dict(new[HINTS]))}")
    if old[SELF] != new[SELF]:
        reasons.append("bound instance changed (its __cache_signature__ or identity)")
    return tuple(reasons) or ("an argument given as a compile-time function changed",)


_stderr_handler: logging.Handler | None = None


def _ensure_stderr_handler() -> None:
    global _stderr_handler
    wanted = "recompiles" in os.environ.get("FLYDEPS_LOG", "").split(",")
    if wanted and _stderr_handler is None:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("flydsl_runtime: %(message)s"))
        log.addHandler(handler)
        if log.getEffectiveLevel() > logging.INFO:
            log.setLevel(logging.INFO)
        _stderr_handler = handler
    elif not wanted and _stderr_handler is not None:
        log.removeHandler(_stderr_handler)
        _stderr_handler = None


def log_recompile(launcher: str, reasons: Sequence[str]) -> None:
    """Report one miss: ``retracing <launcher>: reason; reason``."""
    _ensure_stderr_handler()
    log.info("retracing %s: %s", launcher, "; ".join(reasons))
