"""Optional C extensions of flydeps; all metadata is in pyproject.toml.

* ``flydeps.watch._watchext`` (CPython >= 3.12): dict/type/function watcher backend of ``flydeps.watch.watchers``.
* ``flydeps.watch._dictver`` (CPython 3.10/3.11): PEP 509 dict version tags for guards (``flydeps.watch.watchers``).
* ``flydeps.builds._fastcache`` (CPython >= 3.10): the warm-hit path of ``flydeps.cached_factory``.
* ``flydeps.code._scanext`` (CPython 3.10-3.13): the inner loop of the direct ``co_code`` decoder
  (``flydeps.code.scan``), the cold path's code digests.
* ``flydeps.store._statext`` (CPython >= 3.10, POSIX): file metadata in bulk for a new process's
  first call (``flydeps.store.fsmeta``).
* ``flydsl_runtime.persist._capi`` (CPython >= 3.10, POSIX): FlyDSL's ROCm root asked of its loaded
  C API library without ctypes (``flydsl_runtime.persist.index.rocm_root``).
* ``flydsl_runtime.launch._warmcall`` (CPython >= 3.10): the warm path of a plain launcher call
  (``flydsl_runtime.launch.jit``).

All are optional: when one cannot be built (no compiler, no Python headers, older or
non-CPython interpreter) the install still succeeds and the pure-Python paths are used.
"""

import os
import platform
import sys

from setuptools import Extension, setup

# The headers every extension shares (src/flydeps/_cext: module init, capsules, GC helpers,
# the byte buffer, the capsule layouts). Listed as depends: a header change rebuilds every
# extension, and setuptools puts them in the sdist.
CEXT_DIR = "src/flydeps/_cext"
CEXT_HEADERS = [f"{CEXT_DIR}/cext.h", f"{CEXT_DIR}/bytebuf.h", f"{CEXT_DIR}/capi.h"]


def cext(name: str, source: str) -> Extension:
    """An optional extension compiled against the shared headers."""
    return Extension(name, [source], include_dirs=[CEXT_DIR], depends=CEXT_HEADERS, optional=True)


cpython = platform.python_implementation() == "CPython"
ext_modules = []
if cpython and sys.version_info >= (3, 12):
    ext_modules.append(cext("flydeps.watch._watchext", "src/flydeps/watch/_watchext.c"))
if cpython and (3, 10) <= sys.version_info < (3, 12):
    ext_modules.append(cext("flydeps.watch._dictver", "src/flydeps/watch/_dictver.c"))
if cpython and sys.version_info >= (3, 10):
    ext_modules.append(cext("flydeps.builds._fastcache", "src/flydeps/builds/_fastcache.c"))
if cpython and (3, 10) <= sys.version_info < (3, 14):
    ext_modules.append(cext("flydeps.code._scanext", "src/flydeps/code/_scanext.c"))
if cpython and sys.version_info >= (3, 10) and os.name == "posix":
    ext_modules.append(cext("flydeps.store._statext", "src/flydeps/store/_statext.c"))
    ext_modules.append(cext("flydsl_runtime.persist._capi", "src/flydsl_runtime/persist/_capi.c"))
if cpython and sys.version_info >= (3, 10):
    ext_modules.append(cext("flydsl_runtime.launch._warmcall", "src/flydsl_runtime/launch/_warmcall.c"))

setup(ext_modules=ext_modules)
