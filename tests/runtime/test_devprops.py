"""Device properties asked while tracing are reads of the trace (flydsl_runtime.trace.devprops).

The oracle is FlyDSL's IR key from a fresh trace (``test_trace_inputs.check``). The device is
simulated under ``torch.cuda`` (``simulated_device.py``: torch's own Python code runs, the
driver's answer is given): there is no GPU here. Cross-process rows: ``test_index.py``
(``test_a_row_is_served_only_where_the_device_answers_as_it_did``).
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

pytest.importorskip("flydsl")

import simulated_device  # noqa: E402
import torch  # noqa: E402
from test_trace_inputs import _args, check  # noqa: E402

import flydsl_runtime.flyc  # noqa: E402,F401  (its import installs the hooks: torch's function wrapped)
from flydeps.observe import environ as _environ  # noqa: E402
from flydsl_runtime.trace import devprops  # noqa: E402

pytestmark = pytest.mark.usefixtures("compile_only")

READ = devprops.PREFIX + "0"


def test_the_trace_depends_on_what_the_device_answered(fdk, monkeypatch) -> None:
    simulated_device.install(304, monkeypatch.setattr)
    mod = fdk.module("trace_inputs")
    first, traced = check(mod.persistent_launch, *_args())
    assert traced and check(mod.persistent_launch, *_args()) == (first, False)
    (entry,) = mod.persistent_launch.entries()
    answered = dict(entry.env_reads.values)[READ]
    assert "multi_processor_count=304" in answered and "name='AMD Instinct MI300X'" in answered
    assert "uuid" not in answered  # one card's identity is not what the device is
    assert _environ.current(READ) == answered  # what any process evaluates by the read's name
    assert _environ.label(READ) == "torch.cuda.get_device_properties(0)"
    assert _environ.shown(READ, answered) == "AMD Instinct MI300X (gfx942:sramecc+:xnack-, 304 compute units)"


def test_the_wrapper_answers_what_torch_answers(monkeypatch) -> None:
    """Outside a trace nothing is noted; inside one, torch's result and torch's errors come
    back unchanged, only arguments naming a CUDA device are reads (torch refuses the others
    the same way on every machine), and what torch reads to answer is not (the answer is)."""
    device = simulated_device.install(228, monkeypatch.setattr)
    real_properties = device.properties

    def reading_the_environment(index: int) -> simulated_device.Properties:
        os.environ.get("HIP_VISIBLE_DEVICES")  # what a driver reads to map the index
        return real_properties(index)

    monkeypatch.setattr(torch.cuda, "_get_device_properties", reading_the_environment)
    wrapper: Any = torch.cuda.get_device_properties
    original = wrapper.__flydeps_original__
    assert wrapper is not original and wrapper.__wrapped__ is original
    assert wrapper(0).multi_processor_count == original(0).multi_processor_count == 228
    with _environ.recording() as rec:
        assert torch.cuda.get_device_name() == "AMD Instinct MI300A"  # torch's helper asks through it
        assert wrapper("cuda:0").multi_processor_count == 228
        with pytest.raises(ValueError, match="Expected a cuda device"):
            wrapper("cpu")
        with pytest.raises(AssertionError, match="Invalid device id"):
            wrapper(3)
    reads = dict(rec.reads().values)
    assert set(reads) == {devprops.PREFIX + "current", READ, devprops.PREFIX + "3"}  # torch's env reads: not
    assert reads[devprops.PREFIX + "3"] == "\0raised AssertionError: Invalid device id"  # a read of the failure
    assert _environ.current(devprops.PREFIX + "3") == reads[devprops.PREFIX + "3"]


@pytest.mark.parametrize(
    ("device", "member"),
    [
        (None, "current"),
        (0, "0"),
        (True, "1"),
        ("cuda", "current"),
        ("cuda:2", "2"),
        (torch.device("cuda", 3), "3"),
        (torch.device("cuda"), "current"),
        ("cpu", None),
        (torch.device("cpu"), None),
        ("bogus", None),
        (object(), None),
    ],
)
def test_each_spelling_of_a_device_is_one_read(device: object, member: str | None) -> None:
    assert devprops._member(device) == (None if member is None else devprops.PREFIX + member)


def test_difference_names_the_fields_that_differ() -> None:
    old = devprops.describe(simulated_device.Properties(304))
    new = devprops.describe(simulated_device.Properties(228))
    assert devprops.difference(old, new) == (
        "multi_processor_count: 304 -> 228, name: 'AMD Instinct MI300X' -> 'AMD Instinct MI300A'"
    )
    assert devprops.difference(old, devprops.describe(simulated_device.Properties(304))) is None
    assert devprops.difference(old, "\0raised AssertionError: no GPU") is None
    assert devprops.difference(None, new) is None


def test_modules_that_imported_torchs_function_before_are_rebound(monkeypatch) -> None:
    """``from torch.cuda import get_device_properties`` in a module imported before
    flydsl_runtime: that name is rebound to the wrapper (its reads are seen); another name
    for it, and everything else, is left alone."""
    import types

    wrapper: Any = torch.cuda.get_device_properties
    original = wrapper.__flydeps_original__
    early = types.ModuleType("fdk_early_import")
    early.get_device_properties = original  # type: ignore[attr-defined]
    early.props = original  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, early.__name__, early)

    class Hostile:  # what some libraries put in sys.modules: never read
        def __getattribute__(self, name: str) -> Any:
            raise AssertionError(f"read {name}")

    monkeypatch.setitem(sys.modules, "fdk_not_a_module", Hostile())
    assert devprops.rebind_early_imports(original, wrapper) == [early.__name__]
    assert early.get_device_properties is wrapper and early.props is original  # type: ignore[attr-defined]
    assert devprops.rebind_early_imports(original, wrapper) == []
