"""Memoized readers a build calls (issue 35.4, flydeps.observe.memoreads), through ``cached_factory``.

The oracle of every call is a fresh build in this process: the factory's own function
called directly (``factory.__wrapped__()``), which consults the reader's memo exactly as a
build would. A cached answer that differs from it is stale.
"""

from __future__ import annotations

import functools
import logging
import os
import threading

import pytest

from flydeps.observe import environ as _environ
from flydeps.observe import memoreads as _memoreads
from flydeps.observe.environ import EnvReads

READERS = """
import functools, os
from flydeps import cached_factory

@functools.cache
def tile():
    return int(os.environ.get("FDK_TILE", "1"))

@functools.lru_cache(maxsize=2)
def scale(path):
    with open(path) as f:
        return float(f.read())

@cached_factory
def tiled():
    return tile() * 10

@cached_factory
def scaled(path):
    return scale(path) * 10

@functools.cache
def ratio():
    return float(os.environ.get("FDK_TILE", "1"))  # a new object per computation

@cached_factory
def clearing():
    ratio.cache_clear()  # a build that empties the memo it reads: what it used may be gone
    return ratio() * 10
"""


def _served(factory, *args):  # type: ignore[no-untyped-def]
    """One call, judged by the oracle; returns the value and whether it built."""
    misses = factory.cache_info().misses
    value = factory(*args)
    assert value == factory.__wrapped__(*args), "STALE: the cached value differs from a fresh build"
    return value, factory.cache_info().misses != misses


@pytest.fixture
def readers(pkg, monkeypatch):  # type: ignore[no-untyped-def]
    monkeypatch.delenv("FDK_TILE", raising=False)
    pkg.write("readers", READERS)
    return pkg.load("readers")


@pytest.mark.parametrize("warmed", [True, False], ids=["warmed-before-the-build", "first-called-by-the-build"])
@pytest.mark.parametrize("refill", [False, True], ids=["cleared", "cleared-then-called"])
def test_a_cleared_reader_is_read_again(readers, monkeypatch, warmed: bool, refill: bool) -> None:
    if warmed:
        readers.tile()
    assert _served(readers.tiled) == (10, True)
    assert _served(readers.tiled) == (10, False)
    monkeypatch.setenv("FDK_TILE", "2")
    value, _built = _served(readers.tiled)  # the memo still answers 1: so does a fresh build
    assert value == 10
    readers.tile.cache_clear()
    if refill:
        assert readers.tile() == 2
    assert _served(readers.tiled) == (20, True)
    assert _served(readers.tiled) == (20, False)


def test_a_bounded_file_reader_warmed_before_the_build(readers, tmp_path) -> None:
    path = tmp_path / "scale.txt"
    path.write_text("2.0")
    readers.scale(str(path))  # warmed: the build's call is a hit, its file read unobserved
    assert _served(readers.scaled, str(path)) == (20.0, True)
    path.write_text("3.0")
    readers.scale.cache_clear()
    assert _served(readers.scaled, str(path)) == (30.0, True)


def test_a_memo_that_only_grew_keeps_the_entry(readers, tmp_path) -> None:
    first, other = tmp_path / "a.txt", tmp_path / "b.txt"
    first.write_text("2.0")
    other.write_text("5.0")
    assert _served(readers.scaled, str(first)) == (20.0, True)
    readers.scale(str(other))  # a new entry: every entry the build hit is still there
    assert _served(readers.scaled, str(first)) == (20.0, False)
    readers.scale(str(tmp_path / "a.txt"))  # a hit: nothing changes
    assert _served(readers.scaled, str(first)) == (20.0, False)


def test_an_evicted_entry_is_a_rebuild(readers, tmp_path) -> None:
    paths = [tmp_path / f"{i}.txt" for i in range(3)]
    for i, path in enumerate(paths):
        path.write_text(f"{i + 1}.0")
    readers.scale(str(paths[0]))
    assert _served(readers.scaled, str(paths[0])) == (10.0, True)
    readers.scale(str(paths[1]))
    readers.scale(str(paths[2]))  # maxsize=2: the entry the build hit is evicted
    paths[0].write_text("7.0")
    assert _served(readers.scaled, str(paths[0])) == (70.0, True)


def test_a_memo_cleared_while_the_build_ran_is_never_served(readers) -> None:
    readers.ratio()  # the build removes this entry
    assert _served(readers.clearing) == (10.0, True)
    assert _served(readers.clearing) == (10.0, True)  # its product cannot be keyed: built again


def test_a_refill_with_the_very_same_objects_is_no_change(readers) -> None:
    readers.tile()
    assert _served(readers.tiled) == (10, True)
    readers.tile.cache_clear()
    readers.tile()  # the same key and the same int object: a fresh build gets what the entry got
    assert _served(readers.tiled) == (10, False)


def test_the_rebuild_names_the_reader(readers, monkeypatch, caplog) -> None:
    readers.tile()
    _served(readers.tiled)
    monkeypatch.setenv("FDK_TILE", "3")
    readers.tile.cache_clear()
    with caplog.at_level(logging.INFO, logger="flydeps"):
        assert _served(readers.tiled) == (30, True)
    assert f"the memo of {readers.__name__}.tile()" in caplog.text
    assert "cleared, evicted or refilled since the build" in caplog.text or "generation" in caplog.text


def test_memo_reads_are_local_to_the_process(readers) -> None:
    readers.tile()
    readers.tiled()
    with _environ.recording() as rec:
        readers.tile()
    reads = rec.reads()
    ((name, value),) = reads.values
    assert name.startswith(_memoreads.PREFIX) and reads.local
    assert _environ.current(name) == value
    foreign = EnvReads(((name.rpartition("#")[0] + "#0", value),))  # what another process named
    assert foreign.local and not foreign.holds()
    assert not EnvReads((("FDK_TILE", None),)).local


def test_generation_moves_only_when_an_entry_goes() -> None:
    @functools.lru_cache(maxsize=2)
    def square(x: int) -> int:
        return x * x

    _memoreads.track(square)
    (name,) = [n for n in _memoreads.tracked() if n.startswith(f"{_memoreads.PREFIX}{__name__}.")]
    start = _memoreads.generation(name)
    square(1)
    square(2)
    assert _memoreads.generation(name) == start  # only added
    square(1)
    assert _memoreads.generation(name) == start  # a hit
    square(3)  # evicts 2
    evicted = _memoreads.generation(name)
    assert evicted != start
    square.cache_clear()
    assert _memoreads.generation(name) not in (start, evicted)
    _memoreads.track(square)  # once
    assert [n for n in _memoreads.tracked() if n == name] == [name]


def test_reads_of_another_thread_meanwhile_only_add_reads(readers) -> None:
    readers.tiled()  # discovery walks the reader
    with _environ.recording() as rec:
        thread = threading.Thread(target=readers.tile)
        thread.start()
        thread.join()
    assert any(name.startswith(_memoreads.PREFIX) for name in rec.reads().names)  # over-keyed, never under


@pytest.mark.parametrize(
    "value",
    [None, 3, "tile", os.environ, functools.partial(print), functools.lru_cache(maxsize=0)(lambda: 1)],
)
def test_track_ignores_what_keeps_no_memo(value: object) -> None:
    before = _memoreads.tracked()
    _memoreads.track(value)
    assert _memoreads.tracked() == before


def test_bad_derived_reads_are_refused() -> None:
    with pytest.raises(ValueError, match="not a registered derived read"):
        _environ.note_derived("=no such read", "x")
    with pytest.raises(ValueError, match="starts with"):
        _environ.derive("no equals sign", lambda: "x", "nothing", fixed=False)
    assert _environ.current(_memoreads.PREFIX + "nothing.here#1") != "generation 1"


def test_a_derived_read_of_process_state_is_asked_on_every_check() -> None:
    """``fixed=False`` (what the state queries and memo reads use): no memo on the
    environment's version, which process state never moves."""
    state = ["a"]
    read = _environ.derive("=fdt.process_state()", lambda: state[0], "a test's state", fixed=False)
    with _environ.recording() as rec:
        assert read() == "a"
    reads = rec.reads()
    assert reads.holds() and not reads.local
    state[0] = "b"  # os.environ untouched
    assert not reads.holds() and reads.changes() == [("=fdt.process_state()", "a", "b")]
