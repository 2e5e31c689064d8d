"""The solver's per-slot bound (issue 37): a slot that reaches ``MAX_VALUES`` and drops
values is reported as a note naming the slot, at its module's file; a program under the
bound gets no such note; the note survives the result cache (``callstore``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from flydeps.static.analyze import analyze
from flydeps.static.calls.result import CallGraph, bound_diagnostics, slot_name
from flydeps.static.calls.state import MAX_VALUES
from flydeps.static.calls.store import decode_call_graph, encode_call_graph


def _callbacks(count: int) -> str:
    """``count`` functions, each passed to one ``run(cb)``: ``cb`` holds ``count`` values."""
    defs = "".join(f"def f{i}():\n    pass\n\n" for i in range(count))
    calls = "".join(f"run(f{i})\n" for i in range(count))
    return f"def run(cb):\n    cb()\n\n{defs}{calls}"


def _bound_notes(tmp_path: Path, count: int, *, use_cache: bool = False) -> list[str]:
    main = tmp_path / "main.py"
    main.write_text(_callbacks(count))
    result = analyze([str(main)], use_cache=use_cache, calls=True)
    return [str(d) for d in result.diagnostics if "bound of" in d.message]


def test_a_saturated_slot_is_reported_by_name(tmp_path: Path) -> None:
    notes = _bound_notes(tmp_path, MAX_VALUES + 6)
    assert len(notes) == 1, notes
    assert notes[0].startswith(f"{tmp_path / 'main.py'}: note: call graph: variable main.run.cb reached the bound")
    assert f"of {MAX_VALUES} values" in notes[0]


def test_a_program_under_the_bound_gets_no_note(tmp_path: Path) -> None:
    assert _bound_notes(tmp_path, MAX_VALUES - 4) == []


def test_the_note_survives_the_result_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / "cache"))
    first = _bound_notes(tmp_path, MAX_VALUES + 6, use_cache=True)
    second = _bound_notes(tmp_path, MAX_VALUES + 6, use_cache=True)
    assert first == second and len(first) == 1


def test_saturated_slots_round_trip_through_the_store() -> None:
    graph = CallGraph((("m", "", "module"),), {}, {}, (("m", "variable m.f.x"),))
    assert decode_call_graph(encode_call_graph(graph)).saturated == graph.saturated


def test_slot_names_and_an_unknown_module_path() -> None:
    assert slot_name(("v", "m", "f", "x")) == ("m", "variable m.f.x")
    assert slot_name(("iattr", "pkg.a", "C", "act")) == ("pkg.a", "instance attribute pkg.a.C.act")
    assert slot_name(("zz", "m", "")) == ("m", "zz m")
    graph = CallGraph((), {}, {}, (("gone", "variable gone.x"),))
    (note,) = bound_diagnostics(graph, lambda module: None, 8)
    assert (note.path, note.line, note.note) == ("gone", 0, True)
    assert "variable gone.x reached the bound of 8 values" in note.message
