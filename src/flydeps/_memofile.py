"""Memo files: a payload written whole, read back only exactly as written.

Contract
--------
:func:`write` stores ``payload`` (bytes) under a header naming its ``kind`` and the blake3
digest of the payload, in a temporary sibling renamed over the file: a reader sees the old
file or the new one, never part of one. :func:`read` returns the payload of a file written
by :func:`write` with the same ``kind``, or None when the file is missing or unreadable, of
another kind (or another format version of it), or not exactly as written (damaged,
truncated, edited: its digest does not match). A failed write is logged at debug level and
returns False: a memo that cannot be kept costs its recomputation, nothing else. Touches
only the file and its temporary sibling. Used by the memos a new process reads on its first
call (:mod:`flydeps._origin`, :mod:`flydeps._codegen`), so that what they hold is what was
computed.
"""

from __future__ import annotations

import logging
import os
import threading

from blake3 import blake3

__all__ = ["read", "write"]

log = logging.getLogger("flydeps")

_DIGEST = 32


def _header(kind: str) -> bytes:
    return f"flydeps-memo {kind}\n".encode()


def read(path: str, kind: str) -> bytes | None:
    """The payload of the memo file at ``path``, or None (see the module docstring)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    header = _header(kind)
    start = len(header) + _DIGEST
    if not data.startswith(header) or len(data) < start:
        if data:
            log.debug("flydeps: memo %s is not a %s memo; ignored", path, kind)
        return None
    payload = data[start:]
    if blake3(payload).digest() != data[len(header) : start]:
        log.debug("flydeps: memo %s is damaged (its digest does not match); ignored", path)
        return None
    return payload


def write(path: str, kind: str, payload: bytes) -> bool:
    """Store ``payload`` at ``path`` (atomically); False when it could not be written."""
    tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(_header(kind) + blake3(payload).digest() + payload)
        os.replace(tmp, path)
    except OSError as error:
        log.debug("flydeps: memo %s not written: %s", path, error)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        return False
    return True
