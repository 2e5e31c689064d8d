"""Generated code: source text -> code object, compiled once per interpreter build.

Contract
--------
:func:`code` returns what ``compile(source, filename, "exec")`` returns. flydeps and the
runtime generate their hot-path checks (guards, argument keys, environment checks) as
source whose values are passed in the namespace, never written into the text: a few dozen
shapes, and a new process's first kernel call compiled three or four of them (~150 µs
each). They are remembered in the process and on disk, as ``__pycache__`` remembers
compiled modules: one file per interpreter build
(``$FLYDEPS_CACHE_DIR/codegen/<cache tag>-<magic number>.marshal``, or where that cannot be
written, under the user cache directory too: ``settings.memo_paths``), read once per
process, rewritten when a shape it lacks is compiled (a temporary file replaced: a
concurrent writer's new shapes may be dropped, and are compiled again).

A code object is found by the blake3 digest of its filename and source text, so it is the
one ``compile`` gives for them under this interpreter (the file name carries the bytecode
magic number). The file is a :mod:`flydeps._memofile` (its payload's blake3 digest in its header): a
file that does not match it (damaged, truncated), cannot be read, or holds anything but
code objects is ignored and replaced on the next write. Code read here is executed, as code under
``__pycache__`` is: the cache root is trusted as FlyDSL's own disk cache (pickles) is.
Touches only that file and its temporary sibling; imports nothing but the standard
library, ``blake3``, :mod:`flydeps._memofile` and :mod:`flydeps.settings` (when the file is
first read).
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
import threading
from types import CodeType

from blake3 import blake3

from . import _memofile

__all__ = ["code"]

_KIND = "codegen 1"
_MAX_SHAPES = 2048  # beyond this the file keeps only what this process compiled
_lock = threading.Lock()
_known: dict[bytes, CodeType] | None = None  # this process's, read from the file first
_new: dict[bytes, CodeType] = {}  # compiled by this process


def code(source: str, filename: str) -> CodeType:
    """``compile(source, filename, "exec")``, remembered (see the module docstring)."""
    key = blake3(f"{filename}\0{source}".encode("utf-8", "surrogatepass")).digest()
    known = _known if _known is not None else _load()
    found = known.get(key)
    if found is not None:
        return found
    compiled = compile(source, filename, "exec")
    with _lock:
        known[key] = _new[key] = compiled
        _store()
    return compiled


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # a thread of the parent may have held it at the fork


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _relative() -> str:
    return os.path.join("codegen", f"{sys.implementation.cache_tag}-{importlib.util.MAGIC_NUMBER.hex()}.marshal")


def _paths() -> tuple[str, ...]:
    from . import settings

    return settings.memo_paths(_relative())


def _load() -> dict[bytes, CodeType]:
    global _known
    with _lock:
        if _known is None:
            found: dict[bytes, CodeType] = {}
            for path in _paths():
                found = _read(path)
                if found:
                    break
            _known = found
        return _known


def _read(path: str) -> dict[bytes, CodeType]:
    """The shapes in the file at ``path``; empty when it is missing or not exactly as written."""
    payload = _memofile.read(path, _KIND)
    if payload is None:
        return {}
    try:
        shapes = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return {}
    exact = type(shapes) is dict and all(type(k) is bytes and type(v) is CodeType for k, v in shapes.items())
    if not exact:  # only what this module writes: code objects by digest
        return {}
    return shapes


def _store() -> None:
    """Write the file with what it holds now and what this process compiled (under ``_lock``)."""
    path = _paths()[-1]
    shapes = _read(path)
    if len(shapes) + len(_new) > _MAX_SHAPES:
        shapes = {}
    shapes.update(_new)
    _memofile.write(path, _KIND, marshal.dumps(shapes))
