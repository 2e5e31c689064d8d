"""Recompile reasons: why a launcher call missed its cache, in words, on one logger.

Contract
--------
:func:`describe_miss` compares the key of a call that missed with the key of the previous
entry of the same launcher and owner class, component by component, and returns human
reasons ("helper pkg.mem:_load_q changed", "argument 'a': dtype torch.float32 ->
torch.float16", "env FLYDSL_COMPILE_OPT_LEVEL: '' -> '1'", "target gfx942 -> gfx950").
:func:`log_recompile` writes them to the ``flydsl_runtime`` logger at INFO level. Setting
``FLYDEPS_LOG=recompiles`` (alias ``rebuilds``; read on every miss, misses being rare)
attaches one stderr handler to that logger so the reasons print without any logging setup
(:mod:`flydeps.builds.logswitch`, which does the same for ``cached_factory`` rebuilds).

A call key, as compared here, is the launcher's key spelled out (``Entry.key``, tokens
replaced by what they stand for):
``(dependency digest, argument signatures, (target, device id), env, hints, bound-self key)``.

When the key matched an entry the launcher could not use (an environment variable the trace
read has another value, an entry compiled under ``COMPILE_ONLY``), the launcher reports that
with :func:`note_unusable` just before the miss; those reasons lead the next
:func:`describe_miss` of the same launcher in the same thread. Dependency reasons are
ordered so that a changed helper or global comes first, then rebound names, then nodes
added or removed (what a change in the dependency structure brings along).
"""

from __future__ import annotations

import logging
import struct
import threading
from collections.abc import Hashable, Sequence
from types import FunctionType
from typing import cast

from flydeps.builds.logswitch import reasons_to_stderr
from flydeps.keys.fingerprint import Fingerprint
from flydeps.observe.environ import change, label

from .envkey import describe_env_change

__all__ = [
    "DIGEST",
    "ARGS",
    "TARGET",
    "ENV",
    "HINTS",
    "SELF",
    "describe_miss",
    "env_read_change",
    "log_recompile",
    "note_unusable",
    "short",
]

log = logging.getLogger("flydsl_runtime")

DIGEST, ARGS, TARGET, ENV, HINTS, SELF = range(6)
_SHORT = 80


def short(value: object) -> str:
    """A bounded description for logs; types and dtypes by name, never a long repr."""
    if isinstance(value, type):
        text = value.__qualname__
    elif type(value) is tuple and len(value) == 2 and value[0] is float and type(value[1]) is bytes:
        text = f"float {struct.unpack('<d', value[1])[0]!r}"  # a Constexpr float keyed by its bits
    elif isinstance(value, tuple):
        text = "(" + ", ".join(short(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    elif type(value) is FunctionType:  # by name: its repr holds an address no other process shares
        text = f"function {value.__module__}.{value.__qualname__}"
    else:
        text = str(value)
    return text if len(text) <= _SHORT else text[: _SHORT - 3] + "..."


def _target(key: Hashable) -> str:
    (_backend, arch, _warp), device = cast("tuple[tuple[str, str, int], int | None]", key)
    return f"{arch} (device {device})" if device is not None else arch  # COMPILE_ONLY: jit._device


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
    pending = _take_unusable(launcher)
    if old is None:
        where = f" for owner class {owner.__qualname__}" if owner is not None else ""
        return (f"first call of {launcher}{where}",)
    reasons: list[str] = list(pending)
    if old[DIGEST] != new[DIGEST]:
        why = new_fp.explain(old_fp) if old_fp is not None else ("dependencies changed",)
        if not why and type(old[DIGEST]) is tuple and type(new[DIGEST]) is tuple:  # (digest, with positions)
            why = ("source positions changed (FLYDSL_DEBUG_ENABLE_DEBUG_INFO=1 puts line tables in the IR)",)
        reasons += _ordered(why)
    if old[ARGS] != new[ARGS]:
        for name, a, b in zip(names, old[ARGS], new[ARGS]):
            if a != b:
                reasons.append(f"argument {name!r}: {short(a)} -> {short(b)}")
    if old[TARGET] != new[TARGET]:
        if old[TARGET][0] == new[TARGET][0] and old[TARGET][1] is None:  # keyed by jit._device
            device = new[TARGET][1]
            reasons.append(f"the entry was compiled under COMPILE_ONLY=1 and this call launches (device {device})")
        else:
            reasons.append(f"target {_target(old[TARGET])} -> {_target(new[TARGET])}")
    if old[ENV] != new[ENV]:
        reasons += describe_env_change(old[ENV], new[ENV], new[TARGET][0][1])
    if old[HINTS] != new[HINTS]:
        reasons.append(f"compile hints {short(dict(old[HINTS]))} -> {short(dict(new[HINTS]))}")
    if old[SELF] != new[SELF]:
        reasons.append("bound instance changed (its __cache_signature__ or identity)")
    return tuple(reasons) or ("an argument given as a compile-time function changed",)


def _rank(reason: str) -> int:
    if " now resolves to " in reason:
        return 1
    if reason.endswith((" added", " removed")):
        return 2
    return 0


def _ordered(reasons: Sequence[str]) -> list[str]:
    """Changed helpers and globals first: they are the cause, the rest follows from them."""
    return sorted(reasons, key=_rank)


def env_read_change(name: str, old: str | None, new: str | None, by: str = "the trace") -> str:
    """``env FA_PP (read by the trace): '1' -> '0'``; ``<unset>`` for an absent variable; a
    derived read (FlyDSL's ``get_rocm_arch()``, a file the trace read) named by what it is;
    a device's properties by the fields that differ (:func:`flydeps.observe.environ.change`)."""
    return f"{label(name)} (read by {by}): {change(name, old, new)}"


_unusable = threading.local()


def note_unusable(launcher: str, reasons: Sequence[str]) -> None:
    """Why the entry matching this call's key could not be used; the next miss leads with it."""
    _unusable.value = (launcher, tuple(reasons))


def _take_unusable(launcher: str) -> tuple[str, ...]:
    noted = getattr(_unusable, "value", None)
    _unusable.value = None
    return noted[1] if noted is not None and noted[0] == launcher else ()


def log_recompile(launcher: str, reasons: Sequence[str]) -> None:
    """Report one miss: ``retracing <launcher>: reason; reason``."""
    reasons_to_stderr(log)
    log.info("retracing %s: %s", launcher, "; ".join(reasons))
