"""A PEP 562 lazy package, as FlyDSL's kernels/mega_moe/__init__.py is: names load on first use."""

import importlib

_LAZY = {"FACTOR": "impl"}


def __getattr__(name):
    sub = _LAZY.get(name)
    if sub is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{sub}"), name)
