"""Exceptions raised by flydeps and its consumers.

Contract: data only. Every message names the object involved, the old and new value where
there is one, and what the user can do next.
"""

from __future__ import annotations

__all__ = ["FlydepsError", "GlobalDriftError", "DiscoveryError", "MalformedCodeError"]


class FlydepsError(Exception):
    """Base class of every error flydeps raises on purpose."""


class DiscoveryError(FlydepsError, TypeError):
    """The object handed to ``discover``/``fingerprint`` cannot be analysed at all."""


class MalformedCodeError(DiscoveryError, ValueError):
    """A code object's bytecode is not something CPython's compiler produces and the code
    digest cannot read it unambiguously: an argument past its table, an ``EXTENDED_ARG``
    chain wider than the interpreter's 32-bit argument, a jump outside the code, a truncated
    instruction or exception table. ``code`` names the function (qualified name, file and
    line), ``offset`` the byte offset in ``co_code`` (None: the exception table), ``problem``
    what is wrong. Both decoders raise it with the same message."""

    def __init__(self, code: str, offset: int | None, problem: str) -> None:
        self.code, self.offset, self.problem = code, offset, problem
        where = "in its exception table" if offset is None else f"at byte offset {offset} of co_code"
        super().__init__(
            f"cannot digest {code}: its bytecode is malformed {where}: {problem}. CPython's "
            "compiler does not produce this: if the code object was built or rewritten by hand "
            "(code.replace(co_code=...)), fix that rewrite, or keep the function out of what is "
            "fingerprinted."
        )


class GlobalDriftError(FlydepsError, RuntimeError):
    """A data-valued global read by cached code changed after it was baselined.

    Attributes name the global so callers can report or recover: ``module``, ``name``,
    ``old`` and ``new`` (short, safe descriptions, never the user's ``repr``).
    """

    def __init__(self, module: str, name: str, old: str, new: str, *, consumer: str = "") -> None:
        self.module, self.name, self.old, self.new, self.consumer = module, name, old, new, consumer
        where = f" (read by {consumer})" if consumer else ""
        super().__init__(
            f"global {module}:{name}{where} changed after it was baselined: {old} -> {new}. "
            "Cached compiled code was built with the old value. Restore the value, call "
            "cache_clear() to rebuild, or choose on_drift='rebuild' / 'warn'."
        )
