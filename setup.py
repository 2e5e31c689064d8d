"""Optional C extension of flydeps (CPython >= 3.12 watcher backend); all metadata is in pyproject.toml.

The extension is optional: when it cannot be built (no compiler, no Python headers, older or
non-CPython interpreter) the install still succeeds and ``flydeps._watch`` falls back to ctypes.
"""

import platform
import sys

from setuptools import Extension, setup

ext_modules = []
if platform.python_implementation() == "CPython" and sys.version_info >= (3, 12):
    ext_modules.append(Extension("flydeps._watchext", ["src/flydeps/_watchext.c"], optional=True))

setup(ext_modules=ext_modules)
