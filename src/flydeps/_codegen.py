"""Generated code: source text -> code object, compiled once per interpreter build.

Contract
--------
:func:`code` returns what ``compile(source, filename, "exec")`` returns. flydeps and the
runtime generate their hot-path checks (guards, argument keys, environment checks) as
source whose values are passed in the namespace, never written into the text: a shape
per launcher and argument-type tuple, the same in every process, and a new process's first
kernel call compiled three or four of them (~150 µs each). They are remembered in the
process and on disk, as ``__pycache__`` remembers compiled modules: one file per shape
(``$FLYDEPS_CACHE_DIR/codegen/<cache tag>-<magic number>/<key>.marshal``, or where that
cannot be written, under the user cache directory too: ``settings.memo_paths``), so a
process reads the shapes it uses and nothing else, and a new shape is one new file
(written whole, then renamed into place: concurrent writers write the same bytes).

The key is the blake3 digest of the file name and the source text, so the code object
stored under it is the one ``compile`` gives for them under this interpreter (the directory
carries the bytecode magic number). Each file is a :mod:`flydeps._memofile` whose kind
names its key: a file that is damaged, truncated, another key's, or not a code object is
ignored (compiled again, and rewritten). Code read here is executed, as code under
``__pycache__`` is: the cache root is trusted as FlyDSL's own disk cache (pickles) is.
Touches only those files and their temporary siblings; imports nothing but the standard
library, ``blake3``, :mod:`flydeps._memofile` and :mod:`flydeps.settings` (when a shape is
first looked up).
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
from types import CodeType

from blake3 import blake3

from . import _memofile

__all__ = ["code"]

_known: dict[str, CodeType] = {}  # key -> code object, this process's
# (cache root, the shape directories to read, the last one written) for that root.
_where: tuple[str, tuple[str, ...]] | None = None


def code(source: str, filename: str) -> CodeType:
    """``compile(source, filename, "exec")``, remembered (see the module docstring)."""
    key = blake3(f"{filename}\0{source}".encode("utf-8", "surrogatepass")).hexdigest()
    found = _known.get(key)
    if found is not None:
        return found
    directories = _directories()
    for directory in directories:
        found = _read(os.path.join(directory, f"{key}.marshal"), key)
        if found is not None:
            break
    else:
        found = compile(source, filename, "exec")
        _memofile.write(os.path.join(directories[-1], f"{key}.marshal"), _kind(key), marshal.dumps(found))
    _known[key] = found
    return found


def _kind(key: str) -> str:
    return f"codegen 1 {key}"


def _directories() -> tuple[str, ...]:
    """Where shapes are read, in order, the last one written (``settings.memo_paths``), for
    the cache root of now."""
    global _where
    from . import settings

    root = settings.cache_root()
    where = _where
    if where is None or where[0] != root:
        relative = os.path.join("codegen", f"{sys.implementation.cache_tag}-{importlib.util.MAGIC_NUMBER.hex()}")
        where = _where = (root, settings.memo_paths(relative))
    return where[1]


def _read(path: str, key: str) -> CodeType | None:
    """The code object stored for ``key`` at ``path``; None when it is missing or not
    exactly as written for that key."""
    payload = _memofile.read(path, _kind(key))
    if payload is None:
        return None
    try:
        found = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    return found if type(found) is CodeType else None
