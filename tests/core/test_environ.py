"""flydeps.observe.environ: environment reads recorded during a build, re-checked after it.

The oracle is os.environ itself: what a build read is compared with what the recorder says
it read, and `holds()` with a fresh re-read of the same names.
"""

from __future__ import annotations

import os
import threading
from os import environ as imported_early  # the alias kernel code takes at import time

import pytest

from flydeps.observe import environ as _environ
from flydeps.observe.environ import EMPTY, EnvReads, note, paused, recording


@pytest.fixture(autouse=True)
def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("FDT_A", "FDT_B", "FDT_C", "FDT_NEW"):
        monkeypatch.delenv(name, raising=False)


def test_every_read_form_is_recorded_with_the_value_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FDT_A", "1")
    with recording() as rec:
        assert imported_early.get("FDT_A") == "1"
        assert os.getenv("FDT_B", "dflt") == "dflt"
        assert "FDT_C" not in os.environ
        with pytest.raises(KeyError):
            os.environ["FDT_NEW"]
        if os.supports_bytes_environ:
            assert os.environb.get(b"FDT_A") == b"1"
    reads = rec.reads()
    assert reads.values == (("FDT_A", "1"), ("FDT_B", None), ("FDT_C", None), ("FDT_NEW", None))
    assert reads.listed is None and reads.holds()


def test_holds_follows_the_live_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FDT_A", "1")
    with recording() as rec:
        os.environ.get("FDT_A")
        os.environ.get("FDT_B")
    reads = rec.reads()
    for change, expected in (
        (lambda: monkeypatch.setenv("FDT_A", "2"), [("FDT_A", "1", "2")]),
        (lambda: monkeypatch.setenv("FDT_A", "1"), []),
        (lambda: monkeypatch.setenv("FDT_B", ""), [("FDT_B", None, "")]),  # set-but-empty is not unset
        (lambda: monkeypatch.delenv("FDT_B"), []),
        (lambda: monkeypatch.delenv("FDT_A"), [("FDT_A", "1", None)]),
    ):
        change()
        assert reads.changes() == expected
        assert reads.holds() is (not expected)
        assert reads.holds() == all(os.environ.get(n) == v for n, v in reads.values)


def test_listing_the_environment_records_the_names(monkeypatch: pytest.MonkeyPatch) -> None:
    with recording() as rec:
        snapshot = dict(os.environ)
    reads = rec.reads()
    assert reads.listed == frozenset(snapshot) and reads.holds()
    monkeypatch.setenv("FDT_NEW", "x")
    assert not reads.holds()
    assert ("FDT_NEW", None, "x") in reads.changes()


def test_only_the_recording_thread_is_attributed() -> None:
    started, done = threading.Event(), threading.Event()

    def other() -> None:
        started.wait()
        os.environ.get("FDT_B")
        done.set()

    thread = threading.Thread(target=other)
    thread.start()
    with recording() as rec:
        started.set()
        done.wait()
        os.environ.get("FDT_A")
    thread.join()
    assert rec.reads().names == ("FDT_A",)


def test_nested_recordings_and_restore_on_error() -> None:
    with pytest.raises(ZeroDivisionError):
        with recording() as outer:
            os.environ.get("FDT_A")
            with recording() as inner:
                os.environ.get("FDT_B")
                1 / 0  # noqa: B018
    assert inner.reads().names == ("FDT_B",)
    assert outer.reads().names == ("FDT_A", "FDT_B")  # an inner build's read is the outer's too
    assert type(os.environ) is _environ._ORIGINAL_CLASS and not _environ._active


def test_writes_during_a_recording_land_in_the_one_storage() -> None:
    cached_data = os.environ._data  # type: ignore[attr-defined]  # code that cached the storage (FlyDSL's fast reads do)
    with recording():
        os.environ["FDT_NEW"] = "7"
    try:
        assert cached_data is os.environ._data  # type: ignore[attr-defined]  # private storage
        assert os.environ.get("FDT_NEW") == "7" and cached_data[os.fsencode("FDT_NEW")] == b"7"
    finally:
        del os.environ["FDT_NEW"]


def test_paused_reads_and_noted_reads() -> None:
    finished = EnvReads((("FDT_C", None),))
    with recording() as rec:
        with paused():
            os.environ.get("FDT_A")
        os.environ.get("FDT_B")
        note(finished)  # a cached result served inside this build depends on what it read
    assert rec.reads().names == ("FDT_B", "FDT_C")


def test_concurrent_recordings_keep_their_own_reads() -> None:
    errors: list[BaseException] = []

    def build(i: int) -> None:
        try:
            for _ in range(200):
                with recording() as rec:
                    os.environ.get(f"FDT_T{i}")
                assert rec.reads().names == (f"FDT_T{i}",)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=build, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert type(os.environ) is _environ._ORIGINAL_CLASS and not _environ._active


def test_empty_reads_and_value_semantics() -> None:
    assert not EMPTY and EMPTY.holds() and EMPTY.changes() == []
    a = EnvReads((("FDT_A", None),))
    assert a == EnvReads((("FDT_A", None),)) and hash(a) == hash(EnvReads((("FDT_A", None),)))
    assert a.merged(EnvReads((("FDT_A", "x"), ("FDT_B", None)))).values == (("FDT_A", None), ("FDT_B", None))


@pytest.mark.parametrize(
    "bad",
    [dict(values=(("FDT_A", 1),)), dict(values=("FDT_A",)), dict(values=((b"FDT_A", None),)), dict(listed={"FDT_A"})],
)
def test_bad_reads_name_the_argument(bad: dict) -> None:
    with pytest.raises(TypeError, match=r"EnvReads\((values|listed)=\.\.\.\)"):
        EnvReads(**bad)


def test_a_derived_read_is_recorded_by_its_answer_not_by_what_it_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    """A value computed from the environment (FlyDSL's get_rocm_arch(): an override variable,
    else a hardware query through PATH) is a read of its answer: the variables its
    computation reads are not recorded, holds() and current() compute it again, and another
    way of giving the same answer still holds. Reads made beside it are recorded as usual."""
    calls = []

    def arch() -> str | None:
        calls.append(1)
        os.environ.get("PATH")  # what a hardware query reads: never recorded
        return os.environ.get("FDT_A") or "gfx942"

    read = _environ.derive("=fdt_arch()", arch, "the test's arch")
    with recording() as rec:
        assert read() == "gfx942"
        assert os.environ.get("FDT_B") is None
    reads = rec.reads()
    assert reads.values == (("=fdt_arch()", "gfx942"), ("FDT_B", None))
    assert reads.holds() and _environ.current("=fdt_arch()") == "gfx942"
    monkeypatch.setenv("PATH", "/elsewhere")
    assert reads.holds()  # another PATH: the same answer
    monkeypatch.setenv("FDT_A", "gfx942")
    assert reads.holds()  # the same arch, named by the variable
    monkeypatch.setenv("FDT_A", "gfx1100")
    assert not reads.holds() and reads.changes() == [("=fdt_arch()", "gfx942", "gfx1100")]
    assert _environ.label("=fdt_arch()") == "the test's arch" and _environ.label("FDT_B") == "env FDT_B"
    monkeypatch.delenv("FDT_A")
    before = len(calls)
    assert reads.holds() and reads.holds()
    # remembered while the environment does not change (where its version can be read)
    assert len(calls) == before + (1 if _environ.version() is not None else 2)


def test_a_derived_read_no_consumer_registered_never_holds() -> None:
    """A row read in a process where nothing registered its derived read (another version):
    it never holds there, and the name is shown without its mark."""
    reads = EnvReads((("=nobody_registers_this()", "x"),))
    assert not reads.holds() and not reads._holds_slow()
    assert _environ.current("=nobody_registers_this()") not in ("x", None)
    assert _environ.label("=nobody_registers_this()") == "nobody_registers_this()"


@pytest.mark.parametrize("name", ["FDT_A", "=", ""])
def test_a_derived_read_is_named_with_the_mark_no_variable_has(name: str) -> None:
    with pytest.raises(ValueError, match="starts with '='"):
        _environ.derive(name, lambda: "x", "bad")


def test_a_family_of_derived_reads_is_evaluated_by_each_member_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """A family (a device's properties by its index): the name carries the argument, so a
    process that registered the family evaluates a member it never noted (a persistent
    row's read), re-checks follow the answer, and messages use the family's words."""
    answers = {"0": "304 CUs", "1": "228 CUs"}
    calls = []

    def compute(name: str) -> str | None:
        calls.append(name)
        os.environ.get("PATH")  # what a device query reads: never recorded
        return os.environ.get("FDT_DEV" + name[-1]) or answers.get(name.rpartition(":")[2])

    note = _environ.derive_family("=fdt_device:", compute, lambda n: f"device {n[-1]}", lambda v: f"<{v}>")
    with recording() as rec:
        note("=fdt_device:0", "304 CUs")
        assert os.environ.get("FDT_B") is None
    reads = rec.reads()
    assert reads.values == (("=fdt_device:0", "304 CUs"), ("FDT_B", None))
    assert calls == [] and reads.holds() and calls == ["=fdt_device:0"]
    unnoted = EnvReads((("=fdt_device:1", "228 CUs"),))  # read by another process's build
    assert unnoted.holds() and _environ.current("=fdt_device:7") is None
    monkeypatch.setenv("FDT_DEV0", "256 CUs")
    assert not reads.holds() and reads.changes() == [("=fdt_device:0", "304 CUs", "256 CUs")]
    assert _environ.label("=fdt_device:1") == "device 1" and _environ.shown("=fdt_device:1", "x") == "<x>"
    note("=fdt_device:0", "unrecorded")  # no recording active: nothing to add to
    with pytest.raises(ValueError, match="not a member"):
        note("=fdt_other:0", "x")


def test_a_family_names_what_differs_between_two_values() -> None:
    """A family's ``differ`` words a change (a device's fields); where it names nothing (a
    failure, an unset read), or for a read of no such family, ``old -> new`` as shown."""

    def differ(old: str | None, new: str | None) -> str | None:
        return f"cus: {old} -> {new}" if old and new else None

    _environ.derive_family("=fdt_sized:", lambda n: None, lambda n: n, lambda v: f"<{v}>", differ)
    assert _environ.change("=fdt_sized:0", "304", "228") == "cus: 304 -> 228"
    assert _environ.change("=fdt_sized:0", "304", None) == "<304> -> <None>"
    assert _environ.change("FDT_PLAIN", None, "1") == "<unset> -> '1'"


@pytest.mark.parametrize("prefix", ["fdt_device:", "=", "=file:x", ""])
def test_a_derived_read_family_needs_the_mark_and_its_own_prefix(prefix: str) -> None:
    with pytest.raises(ValueError, match="prefix starts with '='"):
        _environ.derive_family(prefix, lambda n: "x", lambda n: n)
