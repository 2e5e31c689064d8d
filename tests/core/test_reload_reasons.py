"""After ``importlib.reload`` of a kernel module, a new ``cached_factory`` of the same
qualified name finds what its predecessor built and says what changed (issue 38: before,
the reload gave a new factory object and no reason at all), as ``TORCH_LOGS=recompiles``
names recompiles. A factory made by each call of a builder is not a reload and says nothing."""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time
from pathlib import Path

import pytest

MODULE = """
import flydeps

SCALE = 2


def helper(x):
    return x * SCALE


@flydeps.cached_factory
def build_softmax_module(n):
    return helper(n)


def builder(k):
    @flydeps.cached_factory
    def inner(n):
        return n + k

    return inner
"""


@pytest.fixture()
def kmod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    name = f"reloadmod_{os.getpid()}_{time.monotonic_ns()}"
    path = tmp_path / f"{name}.py"
    path.write_text(MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    module = importlib.import_module(name)
    yield module, path
    sys.modules.pop(name, None)


def _reload(module, path: Path, old: str, new: str):
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))
    stamp = time.time() + 5  # a new mtime: the bytecode cache must not serve the old code
    os.utime(path, (stamp, stamp))
    importlib.invalidate_caches()
    return importlib.reload(module)


def _reasons(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if "after a reload" in r.getMessage()]


def test_a_reloaded_factory_says_what_changed(kmod, caplog) -> None:
    module, path = kmod
    caplog.set_level(logging.INFO, logger="flydeps")
    assert module.build_softmax_module(3) == 6
    module = _reload(module, path, "x * SCALE", "x * SCALE + 1")
    assert module.build_softmax_module(3) == 7
    (reason,) = _reasons(caplog)
    assert reason.startswith("rebuilt build_softmax_module after a reload of its module: ")
    assert f"helper {module.__name__}:helper changed" in reason
    assert "#return" not in reason  # the cause, not its result
    caplog.clear()
    module = _reload(module, path, "SCALE = 2", "SCALE = 2  # same value")
    assert module.build_softmax_module(3) == 7
    assert _reasons(caplog) == [
        "rebuilt build_softmax_module after a reload of its module: nothing it depends on changed"
    ]
    caplog.clear()
    assert module.build_softmax_module(4) == 9  # a key the predecessor never built: a plain miss
    assert _reasons(caplog) == []


def test_factories_made_by_a_builder_are_not_reloads(kmod, caplog) -> None:
    module, _ = kmod
    caplog.set_level(logging.INFO, logger="flydeps")
    assert module.builder(1)(3) == 4
    assert module.builder(2)(3) == 5
    assert _reasons(caplog) == []


def test_the_predecessor_keeps_no_live_object(kmod) -> None:
    """What a new factory keeps of the old one is graphs and digests: the old module's
    functions and built values can be freed."""
    import gc
    import weakref

    module, path = kmod

    class Built:
        pass

    value = Built()
    module.helper = lambda n, value=value: value  # the old factory's build returns ``value``
    assert module.build_softmax_module(3) is value
    ref = weakref.ref(value)
    del value
    module = _reload(module, path, "x * SCALE", "x * SCALE + 1")
    module.build_softmax_module.cache_clear()
    gc.collect()
    assert ref() is None
