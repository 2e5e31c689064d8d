"""Issue 35.6: builders with a per-build class, runtime-only defaults, undo, FLYDEPS_VERIFY=<fraction>.

Real FlyDSL compiles (COMPILE_ONLY=1). ``traces`` counts FlyDSL's own traces.
"""

from __future__ import annotations

import importlib
import logging
import sys
import textwrap
import threading
from typing import Any

import pytest
import torch

from flydeps.settings import SettingError

pytestmark = pytest.mark.usefixtures("compile_only")


def _softmax():
    return importlib.import_module("examples.kernels.realworld.softmax")


def test_a_new_launcher_of_a_builder_with_a_per_build_struct_traces_once(traces, caplog) -> None:
    softmax = _softmax()
    launch = softmax.build_softmax(8, scale=0.25)  # a new launcher, its own SharedStorage class
    storage = launch._jf.func.__code__.co_freevars  # the kernel is a closure cell of the launcher
    assert "softmax_kernel" in storage
    x, out = torch.zeros(256), torch.zeros(256)
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        for _ in range(3):
            launch(x, out, 4)
    assert traces.count("softmax") == 1
    assert launch.cache_info() == (2, 1, 1)
    ours = [r.getMessage() for r in caplog.records if r.name == "flydsl_runtime"]
    assert not [m for m in ours if "SharedStorage" in m]  # no "changed while it ran", no rebuild reason


def test_a_class_written_during_the_trace_by_anything_else_is_not_kept(traces, monkeypatch) -> None:
    """Only the writes FlyDSL's layout cache reports are the trace's own: another write to
    the class while it traced still means the trace is not kept."""
    softmax = _softmax()
    launch = softmax.build_softmax(8, scale=0.125)
    kernel = launch._jf.func.__closure__[launch._jf.func.__code__.co_freevars.index("softmax_kernel")].cell_contents
    func = kernel._func
    cls = func.__closure__[func.__code__.co_freevars.index("SharedStorage")].cell_contents
    struct = importlib.import_module("flydsl.expr.struct")
    real = struct._storage_layout

    def layout_and_tag(schema):
        if schema is cls:
            type.__setattr__(cls, "tag", 1)  # unreported: not the build's own write
        return real(schema)

    monkeypatch.setattr(struct, "_storage_layout", layout_and_tag)
    x, out = torch.zeros(256), torch.zeros(256)
    launch(x, out, 4)
    monkeypatch.setattr(struct, "_storage_layout", real)
    launch(x, out, 4)  # the first trace was not kept: traced again in the class's new state
    launch(x, out, 4)
    assert traces.count("softmax") == 2 and launch.cache_info().hits == 1


def test_a_runtime_only_default_changed_is_keyed_as_the_argument(traces) -> None:
    import flydsl.expr as fx

    norms = importlib.import_module("examples.kernels.realworld.norms")
    x, w, out = torch.zeros(256), torch.zeros(8), torch.zeros(256)
    norms.rmsnorm(x, w, out, 64, 4)
    func = norms.rmsnorm._jf.func
    before, calls = func.__defaults__, norms.rmsnorm.cache_info()
    func.__defaults__ = (before[0], fx.Stream(0))
    try:
        norms.rmsnorm(x, w, out, 64, 4)  # on_drift="raise": no GlobalDriftError, the same entry
        assert norms.rmsnorm.cache_info().hits == calls.hits + 1
        func.__defaults__ = (2e-6, before[1])  # a Constexpr default: keyed as the argument too
        norms.rmsnorm(x, w, out, 64, 4)  # a new key, no entry made with the old value: traced
        assert norms.rmsnorm.cache_info().misses == calls.misses + 1
        assert len({e.ir_key for e in norms.rmsnorm.entries()}) == len(norms.rmsnorm.entries())
    finally:
        func.__defaults__ = before


def test_an_undo_to_a_state_built_for_hits_the_original_entry(traces, caplog) -> None:
    """Under on_drift='warn' a data change keeps the old entry with a warning; putting the
    value back is no new drift: the original entry serves, silently."""
    softmax = _softmax()
    import flydsl_runtime.flyc as flyc

    launch = flyc.jit(on_drift="warn")(softmax.build_softmax(4, scale=0.75)._jf)
    kernel_cell = launch._jf.func.__closure__[launch._jf.func.__code__.co_freevars.index("softmax_kernel")]
    func = kernel_cell.cell_contents._func
    scale = func.__closure__[func.__code__.co_freevars.index("scale")]
    x, out = torch.zeros(256), torch.zeros(256)
    launch(x, out, 4)
    scale.cell_contents = 0.5
    with caplog.at_level(logging.WARNING):
        launch(x, out, 4)  # warns, keeps the entry built with 0.75
    assert "on_drift='warn'" in caplog.text
    caplog.clear()
    scale.cell_contents = 0.75
    with caplog.at_level(logging.WARNING):
        launch(x, out, 4)
    assert not [r for r in caplog.records if r.name in ("flydeps", "flydsl_runtime") and r.levelno >= logging.WARNING]
    assert launch.cache_info() == (2, 1, 1) and traces.count("softmax") == 1


def _padded(width):
    return -(-width // 4) * 4  # the same pitch, other code


def test_mock_patch_leaving_its_block_hits_the_entry_built_before_it(traces) -> None:
    """The first trace filled memops' pitch memo (its own write: the key of the state before
    it is kept). A helper patched for a block is a code change (a retrace); leaving the
    block puts the state back, whose entries serve again: no third trace."""
    from unittest import mock

    softmax = _softmax()
    memops = importlib.import_module("examples.kernels.realworld.memops")
    launch = softmax.build_softmax(12)  # a width no other test used: its trace writes the memo
    x, out = torch.zeros(1024), torch.zeros(1024)
    launch(x, out, 4)
    with mock.patch.object(memops, "row_pitch", _padded):
        launch(x, out, 4)
    launch(x, out, 4)  # on_drift="raise": no GlobalDriftError, the first entry
    assert traces.count("softmax") == 2 and launch.cache_info().hits == 1


def test_verify_fraction_checks_a_deterministic_share_of_hits(traces, monkeypatch) -> None:
    from flydsl_runtime.launch.verify import sampled

    vadd_launch = _softmax().build_softmax(4, scale=0.375)
    x, out = torch.zeros(256), torch.zeros(256)
    vadd_launch(x, out, 4)
    ir_key = vadd_launch.entries()[0].ir_key
    expected = sum(sampled(ir_key, n, 0.25) for n in range(1, 41))
    assert 0 < expected < 40
    monkeypatch.setenv("FLYDEPS_VERIFY", "0.25")
    for _ in range(40):
        vadd_launch(x, out, 4)
    assert traces.count("softmax") == 1 + expected  # exactly the hits sampled() picks


_HIDDEN_KERNEL = """
    import sys

    import flydsl.expr as fx

    import flydsl_runtime.flyc as flyc


    def double(x):
        return x * 2


    def triple(x):
        return x * 3


    def scale(x):  # a computed getattr: no analysis sees which helper it reads
        return getattr(sys.modules[__name__], "".join(("dou", "ble")))(x)


    @flyc.kernel
    def hidden_kernel(a: fx.Tensor, c: fx.Tensor):
        tid = fx.thread_idx.x + fx.block_idx.x * 64
        c[tid] = scale(a[tid])


    @flyc.jit
    def hidden(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
        hidden_kernel(a, c).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))
"""


def test_verify_fraction_logs_and_drops_a_stale_entry(tmp_path, monkeypatch, caplog, traces) -> None:
    """An input the analysis cannot see (a helper behind a computed getattr) changed: with
    FLYDEPS_VERIFY=1 the hit raises; with a fraction the stale entry is logged, dropped and
    traced again."""
    from flydsl_runtime.launch.verify import StaleArtifactError

    (tmp_path / "hidden_subject.py").write_text(textwrap.dedent(_HIDDEN_KERNEL))
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("hidden_subject")
    a, c = torch.zeros(256), torch.zeros(256)
    try:
        mod.hidden(a, c, 256)
        (first,) = mod.hidden.entries()
        monkeypatch.setattr(mod, "double", mod.triple)  # unseen: the next call is a (stale) hit
        monkeypatch.setenv("FLYDEPS_VERIFY", "1")
        with pytest.raises(StaleArtifactError, match="entry keyed by dependency state"):
            mod.hidden(a, c, 256)
        monkeypatch.setenv("FLYDEPS_VERIFY", "0.999999")
        with caplog.at_level(logging.ERROR, logger="flydsl_runtime"):
            mod.hidden(a, c, 256)
        assert "FLYDEPS_VERIFY" in caplog.text and "entry keyed by" in caplog.text
        (entry,) = mod.hidden.entries()
        assert entry.ir_key != first.ir_key  # dropped and traced again: the helper as it is now
    finally:
        sys.modules.pop("hidden_subject", None)


@pytest.mark.parametrize("value", ["1.5", "-0.1", "nan", "often"])
def test_bad_verify_fraction_names_the_variable(fdk, monkeypatch, value) -> None:
    vadd = fdk.module("vadd")
    a, b, c = torch.zeros(256), torch.zeros(256), torch.zeros(256)
    vadd.vadd(a, b, c, 256)
    monkeypatch.setenv("FLYDEPS_VERIFY", value)
    with pytest.raises(SettingError, match=r"FLYDEPS_VERIFY=.* or a share in \[0, 1\]"):
        vadd.vadd(a, b, c, 256)


_ABA_KERNEL = """
    import queue

    import flydsl.expr as fx

    import flydsl_runtime.flyc as flyc

    started, patched, read_done, restored = (queue.SimpleQueue() for _ in range(4))
    tell_started, wait_patched = started.put, patched.get  # C methods: no input of the trace
    tell_read, wait_restored = read_done.put, restored.get


    def scale(x):
        return x * 2


    def other(x):
        return x * 3


    def scaled(x):
        tell_started(1)
        wait_patched()
        value = scale(x)
        tell_read(1)
        wait_restored()
        return value


    @flyc.kernel
    def aba_kernel(a: fx.Tensor, c: fx.Tensor):
        tid = fx.thread_idx.x + fx.block_idx.x * 64
        c[tid] = scaled(a[tid])


    @flyc.jit
    def aba(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
        aba_kernel(a, c).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))
"""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="PEP 509 tags are read on CPython 3.10/3.11 only")
def test_a_helper_swapped_and_put_back_while_tracing_leaves_no_entry(tmp_path, monkeypatch, traces) -> None:
    (tmp_path / "aba_subject.py").write_text(textwrap.dedent(_ABA_KERNEL))
    monkeypatch.syspath_prepend(str(tmp_path))
    mod: Any = importlib.import_module("aba_subject")

    def swap() -> None:
        mod.started.get()  # the trace began: the key's state is A
        original = mod.scale
        mod.scale = mod.other
        mod.patched.put(1)
        mod.read_done.get()  # the trace read B
        mod.scale = original  # A-B-A
        mod.restored.put(1)
        mod.patched.put(1)  # later traces pass straight through
        mod.restored.put(1)

    swapper = threading.Thread(target=swap)
    swapper.start()
    a, c = torch.zeros(256), torch.zeros(256)
    try:
        mod.aba(a, c, 256)
        swapper.join(30)
        traced_from_b = mod.aba.jit_function._last_compiled[0]
        assert not mod.aba.entries()  # not kept under A's key
        mod.aba(a, c, 256)
        mod.aba(a, c, 256)
        (entry,) = mod.aba.entries()
        assert entry.ir_key != traced_from_b and traces.count("aba") == 2 and mod.aba.cache_info().hits == 1
    finally:
        sys.modules.pop("aba_subject", None)
