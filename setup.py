"""Optional C extensions of flydeps; all metadata is in pyproject.toml.

* ``flydeps._watchext`` (CPython >= 3.12): dict/type/function watcher backend of ``flydeps._watch``.
* ``flydeps._dictver`` (CPython 3.10/3.11): PEP 509 dict version tags for guards (``flydeps._watch``).
* ``flydeps._fastcache`` (CPython >= 3.10): the warm-hit path of ``flydeps.cached_factory``.
* ``flydeps._scanext`` (CPython 3.10-3.13): the inner loop of the direct ``co_code`` decoder
  (``flydeps._codescan``), the cold path's code digests.
* ``flydeps._statext`` (CPython >= 3.10, POSIX): file metadata in bulk for a new process's
  first call (``flydeps._fsmeta``).
* ``flydsl_runtime._capi`` (CPython >= 3.10, POSIX): FlyDSL's ROCm root asked of its loaded
  C API library without ctypes (``flydsl_runtime.index.rocm_root``).
* ``flydsl_runtime._warmcall`` (CPython >= 3.10): the warm path of a plain launcher call
  (``flydsl_runtime.jit``).

All are optional: when one cannot be built (no compiler, no Python headers, older or
non-CPython interpreter) the install still succeeds and the pure-Python paths are used.
"""

import os
import platform
import sys

from setuptools import Extension, setup

ext_modules = []
if platform.python_implementation() == "CPython" and sys.version_info >= (3, 12):
    ext_modules.append(Extension("flydeps._watchext", ["src/flydeps/_watchext.c"], optional=True))
if platform.python_implementation() == "CPython" and (3, 10) <= sys.version_info < (3, 12):
    ext_modules.append(Extension("flydeps._dictver", ["src/flydeps/_dictver.c"], optional=True))
if platform.python_implementation() == "CPython" and sys.version_info >= (3, 10):
    ext_modules.append(Extension("flydeps._fastcache", ["src/flydeps/_fastcache.c"], optional=True))

if platform.python_implementation() == "CPython" and (3, 10) <= sys.version_info < (3, 14):
    ext_modules.append(
        Extension("flydeps._scanext", ["src/flydeps/_scanext.c"], depends=["src/flydeps/_bytebuf.h"], optional=True)
    )

if platform.python_implementation() == "CPython" and sys.version_info >= (3, 10) and os.name == "posix":
    ext_modules.append(
        Extension("flydeps._statext", ["src/flydeps/_statext.c"], depends=["src/flydeps/_bytebuf.h"], optional=True)
    )
    ext_modules.append(Extension("flydsl_runtime._capi", ["src/flydsl_runtime/_capi.c"], optional=True))

if platform.python_implementation() == "CPython" and sys.version_info >= (3, 10):
    ext_modules.append(Extension("flydsl_runtime._warmcall", ["src/flydsl_runtime/_warmcall.c"], optional=True))

setup(ext_modules=ext_modules)
