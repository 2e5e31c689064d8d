"""State a FlyDSL trace reads that no name in its code spells (issue 35), on real CPU compiles.

Every call is judged as in ``test_trace_inputs``: the launcher's answer must carry FlyDSL's
IR key of a fresh plain-FlyDSL trace of the same call (else it served a stale binary), and
after each change the launcher must have traced again to a new IR.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

pytest.importorskip("flydsl")

import torch  # noqa: E402
from test_trace_inputs import check  # noqa: E402

from flydeps import GlobalDriftError  # noqa: E402
from flydsl_runtime import Launcher  # noqa: E402

pytestmark = pytest.mark.usefixtures("compile_only")

N = 1024


def _args() -> tuple:
    return (torch.zeros(N), torch.zeros(N), N)


def _changed(launcher: Launcher, change: Callable[[], object]) -> None:
    """A hit before ``change()``; after it, a retrace to another IR, then a hit again."""
    args = _args()
    first, _ = check(launcher, *args)
    assert check(launcher, *args) == (first, False)
    change()
    second, traced = check(launcher, *args)
    assert traced and second != first, "the launcher served the IR traced before the change"
    assert check(launcher, *args) == (second, False)


def _settled(launcher: Launcher) -> None:
    """Calls until one is kept: a trace that imports a module for the first time is not kept
    (what it read changed while it ran) and the next one is."""
    for _ in range(3):
        launcher(*_args())
        if launcher.entries():
            return
    raise AssertionError("no trace was kept")


def _rewrite(path: str, old: str, new: str, module: str) -> None:
    """Edit a module's file and reload it, as an editor and a hot reload would."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert old in text
    with open(path, "w", encoding="utf-8") as f:
        f.write(text.replace(old, new))
    stamp = int(time.time()) + 10
    os.utime(path, (stamp, stamp))  # neither the bytecode cache nor FlyDSL's reuses the old file
    importlib.invalidate_caches()
    importlib.reload(sys.modules[module])


# --- 1. state reached through an instance held in a global --------------------------------


@pytest.mark.parametrize(
    "change",
    [
        lambda m: setattr(m.Base, "SCALE", 3.0),  # a base class's constant
        lambda m: setattr(m.TUNING, "__class__", m.WideTuning),  # a reassigned __class__
        lambda m: setattr(m.TUNING, "unroll", 2.0),  # a __slots__ member
    ],
    ids=["base-class-constant", "reassigned-class", "slot-member"],
)
def test_instance_state(fdk, change) -> None:
    mod = fdk.module("trace_state")
    _changed(mod.instance_launch, lambda: change(mod))


# --- 2. library callables that carry user state --------------------------------------------


def test_partial_keywords_edited_in_place(fdk) -> None:
    mod = fdk.module("trace_state")
    _changed(mod.partial_launch, lambda: mod.SCALED.keywords.__setitem__("factor", 3.0))


def test_singledispatch_register_after_the_first_trace(fdk) -> None:
    mod = fdk.module("trace_state")
    _changed(mod.partial_launch, lambda: mod.weight.register(float, lambda x: 3.0))


# --- 3. imports the trace itself runs --------------------------------------------------------


def test_module_imported_in_a_helper_edited_and_reloaded(fdk) -> None:
    mod = fdk.module("trace_state")
    _settled(mod.import_launch)
    _changed(mod.import_launch, lambda: fdk.edit("trace_state_dep", "FACTOR = 2.0", "FACTOR = 3.0"))


_ABSOLUTE = """\
import flydsl.expr as fx

import flydsl_runtime.flyc as flyc


def factor():
    import {package}_top as dep

    return dep.FACTOR


@flyc.kernel
def absolute_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * 64
    c[tid] = a[tid] * factor()


@flyc.jit(on_drift="rebuild")
def absolute_launch(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    absolute_kernel(a, c).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))
"""


def test_module_imported_in_a_helper_replaced_in_sys_modules(fdk, monkeypatch) -> None:
    """``import top as dep`` reads ``sys.modules["top"]``: a replacement is another module."""
    name = f"{fdk.name}_top"
    monkeypatch.delitem(sys.modules, name, raising=False)  # undone last: the module is forgotten
    (fdk.root / f"{name}.py").write_text("FACTOR = 2.0\n")
    (fdk.root / fdk.name / "trace_state_abs.py").write_text(_ABSOLUTE.format(package=fdk.name))
    mod = fdk.module("trace_state_abs")
    _settled(mod.absolute_launch)
    spec = importlib.util.find_spec(name)
    assert spec is not None
    replacement: Any = importlib.util.module_from_spec(spec)
    replacement.FACTOR = 5.0
    _changed(mod.absolute_launch, lambda: monkeypatch.setitem(sys.modules, name, replacement))


def test_instance_data_change_under_the_default_policy_raises(fdk) -> None:
    """A change of data the trace read is drift: the default policy raises, never serves."""
    mod = fdk.module("trace_state")
    check(mod.instance_default_launch, *_args())
    mod.TUNING.unroll = 2.0
    with pytest.raises(GlobalDriftError, match="TUNING"):
        mod.instance_default_launch(*_args())


def test_pep562_lazy_package(fdk) -> None:
    mod = fdk.module("trace_state")
    _settled(mod.import_launch)  # the first trace loads lazy_ops.impl
    impl = f"{fdk.name}.lazy_ops.impl"
    path = str(fdk.root / fdk.name / "lazy_ops" / "impl.py")
    _changed(mod.import_launch, lambda: _rewrite(path, "FACTOR = 2.0", "FACTOR = 3.0", impl))
    before, _ = check(mod.import_launch, *_args())
    mod.lazy_ops._LAZY["FACTOR"] = "impl2"  # the table the package's __getattr__ reads
    _settled(mod.import_launch)
    after, _ = check(mod.import_launch, *_args())
    assert after != before


# --- 5. per-context and per-thread values, a library's data attribute -----------------------


def test_contextvar_keyed_by_its_value_also_in_another_thread(fdk) -> None:
    mod = fdk.module("trace_state")
    default, _ = check(mod.context_launch, *_args())
    token = mod.MODE.set(3.0)
    try:
        mine, traced = check(mod.context_launch, *_args())
        assert traced and mine != default
        seen: list[tuple[str, bool]] = []
        worker = threading.Thread(target=lambda: seen.append(check(mod.context_launch, *_args())))
        worker.start()  # a new thread starts with a fresh context: the default again
        worker.join()
        assert [ir for ir, _traced in seen] == [default]
        assert check(mod.context_launch, *_args())[0] == mine
    finally:
        mod.MODE.reset(token)


def test_thread_local_keyed_by_the_threads_value(fdk) -> None:
    mod = fdk.module("trace_state")
    default, _ = check(mod.context_launch, *_args())
    seen: list[tuple[str, bool]] = []

    def other() -> None:
        mod.LOCAL.factor = 3.0
        seen.append(check(mod.context_launch, *_args()))

    worker = threading.Thread(target=other)
    worker.start()
    worker.join()
    assert len(seen) == 1 and seen[0][0] != default
    assert check(mod.context_launch, *_args())[0] == default  # this thread has no factor set


def test_library_version_monkeypatched(fdk, monkeypatch) -> None:
    mod = fdk.module("trace_state")
    _changed(mod.context_launch, lambda: monkeypatch.setattr(json, "__version__", "1.0"))
