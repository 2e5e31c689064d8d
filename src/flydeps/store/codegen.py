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
cannot be written, under the user cache directory: ``settings.memo_paths``), so a
process reads the shapes it uses and nothing else, and a new shape is one new file
(written whole, then renamed into place: concurrent writers write the same bytes).

The key is the blake3 digest of the file name and the source text, so the code object
stored under it is the one ``compile`` gives for them under this interpreter (the directory
carries the bytecode magic number). Each file is a :mod:`flydeps.store.memofile` entry bound to
its key, with its payload's digest: a file that is damaged, truncated, another key's, a
symlink, or not a code object is ignored (compiled again, and rewritten). Code read here is
executed, as code under ``__pycache__`` is, so its directories must pass
``_memofile.private_dir`` (the user's own, not writable by group or others; else one
warning and no memo).
Touches only those files and their temporary siblings; imports nothing but the standard
library, ``blake3``, :mod:`flydeps.store.memofile` and :mod:`flydeps.settings` (when a shape is
first looked up).
"""

from __future__ import annotations

import importlib.util
import marshal
import os
import sys
from pathlib import Path
from types import CodeType

from blake3 import blake3

from . import memofile as _memofile

__all__ = ["code"]

_known: dict[str, CodeType] = {}  # key -> code object, this process's
# (cache root, the directory of shapes for it, None where there is none).
_where: tuple[str, str | None] | None = None


def code(source: str, filename: str) -> CodeType:
    """``compile(source, filename, "exec")``, remembered (see the module docstring)."""
    key = blake3(f"{filename}\0{source}".encode("utf-8", "surrogatepass")).hexdigest()
    found = _known.get(key)
    if found is not None:
        return found
    directory = _directory()
    found = _read(os.path.join(directory, f"{key}.marshal"), key) if directory is not None else None
    if found is None:
        found = compile(source, filename, "exec")
        if directory is not None:
            _memofile.write(os.path.join(directory, f"{key}.marshal"), _KIND, marshal.dumps(found), key)
    _known[key] = found
    return found


_KIND = "codegen-1"


def _directory() -> str | None:
    """Where shapes are kept for the cache root of now: the memo directory this process
    writes (``settings.memo_paths``: under the user cache directory where the cache root
    cannot be written), and only when :func:`flydeps.store.memofile.private_dir` accepts it (the
    user's own, 0700), since the code read from it runs; None, and every process compiles."""
    global _where
    from .. import settings

    root = settings.cache_root()
    where = _where
    if where is None or where[0] != root:
        build = f"{sys.implementation.cache_tag}-{importlib.util.MAGIC_NUMBER.hex()}"
        directory = Path(settings.memo_paths(os.path.join("codegen", build))[-1])
        private = _memofile.private_dir(directory.parent, directory)  # code read here runs
        where = _where = (root, str(private) if private is not None else None)
    return where[1]


def _read(path: str, key: str) -> CodeType | None:
    """The code object stored for ``key`` at ``path``; None when it is missing or not
    exactly as written for that key."""
    payload = _memofile.read(path, _KIND, key)
    if payload is None:
        return None
    try:
        found = marshal.loads(payload)
    except (EOFError, ValueError, TypeError):
        return None
    return found if type(found) is CodeType else None
