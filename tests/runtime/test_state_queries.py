"""Process state a trace reads (issue 35): torch's settings through its API (flydsl_runtime.trace.statequery)
and memoized readers (flydeps.observe.memoreads), on real FlyDSL compiles.

The oracle is FlyDSL's IR key from a fresh trace (``test_trace_inputs.check``) in this
process, and in a new one (``index_child.py --fresh-ir``) for the persistent index.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Iterator

import pytest

pytest.importorskip("flydsl")

import torch  # noqa: E402
from test_index import Repo  # noqa: E402
from test_trace_inputs import check  # noqa: E402

from flydeps.observe import environ as _environ  # noqa: E402
from flydsl_runtime.persist import index
from flydsl_runtime.trace import statequery  # noqa: E402

pytestmark = pytest.mark.usefixtures("compile_only")


def _args() -> tuple:
    return (*(torch.zeros(1024, dtype=torch.float32) for _ in range(3)), 1024)


def _matmul_tf32(on: bool) -> None:
    torch.backends.cuda.matmul.allow_tf32 = on


def _cudnn_deterministic(on: bool) -> None:
    torch.backends.cudnn.deterministic = on


def _default_dtype(on: bool) -> None:
    torch.set_default_dtype(torch.float64 if on else torch.float32)


# (what changes, the read's label, its old -> new in the reason)
CHANGES: list[tuple[Callable[[bool], None], str, str]] = [
    (_default_dtype, "torch.get_default_dtype()", "torch.float32 -> torch.float64"),
    (torch.use_deterministic_algorithms, "torch.are_deterministic_algorithms_enabled()", "False -> True"),
    (_matmul_tf32, "torch.backends.cuda.matmul.allow_tf32", "False -> True"),
    (_cudnn_deterministic, "torch.backends.cudnn.deterministic", "False -> True"),
]


@pytest.fixture(autouse=True)
def torch_settings() -> Iterator[None]:
    """Every setting the kernels read, at torch's defaults before and after the test."""
    for change, _label, _words in CHANGES:
        change(False)
    yield
    for change, _label, _words in CHANGES:
        change(False)


@pytest.mark.parametrize(("change", "label", "words"), CHANGES, ids=[c[1] for c in CHANGES])
def test_a_setting_the_trace_read_is_rechecked_on_every_hit(fdk, caplog, change, label, words) -> None:
    mod = fdk.module("state_reads")
    first, traced = check(mod.settings_launch, *_args())
    assert traced and check(mod.settings_launch, *_args()) == (first, False)
    (entry,) = mod.settings_launch.entries()
    assert "=" + label in entry.env_reads.names
    change(True)
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        changed, traced = check(mod.settings_launch, *_args())
    assert traced and changed != first
    assert f"{label} (read by the trace): {words}" in caplog.text
    assert check(mod.settings_launch, *_args()) == (changed, False)
    change(False)
    assert check(mod.settings_launch, *_args())[0] == first


def test_every_query_of_the_table_is_observed_and_evaluated_by_name() -> None:
    prefixes = [q.prefix for q in statequery.QUERIES]
    assert not [a for a in prefixes for b in prefixes if a != b and b.startswith(a)]  # one query per read
    with _environ.recording() as rec:
        asked = {q.prefix: _ask(q) for q in statequery.QUERIES if q.member is None}
    reads = dict(rec.reads().values)
    assert set(reads) == set(asked)
    for name, answer in asked.items():
        assert reads[name] == repr(answer) == _environ.current(name)


def _ask(query: statequery.StateQuery) -> object:
    owner = statequery._resolve(query.owner)
    found = getattr(owner, query.attribute)
    return found() if query.kind == "call" else found


def test_a_query_that_raises_is_a_read_of_its_failure(monkeypatch) -> None:
    original = statequery._originals["torch.get_default_dtype"]

    def broken() -> None:
        raise RuntimeError("no default dtype today")

    monkeypatch.setitem(statequery._originals, "torch.get_default_dtype", broken)
    monkeypatch.setattr(torch.get_default_dtype, "__wrapped__", original)
    assert statequery.evaluate("=torch.get_default_dtype()") == "\0raised RuntimeError: no default dtype today"
    assert statequery.evaluate("=torch.nothing()").startswith("\0not a state query")  # type: ignore[union-attr]
    assert _environ.shown("=torch.get_default_dtype()", "\0raised RuntimeError: x") == "raised RuntimeError: x"


def test_settings_are_read_only_by_recording_threads() -> None:
    assert torch.backends.cudnn.deterministic is False and torch.get_default_dtype() is torch.float32
    torch.backends.cudnn.deterministic = True  # assignments reach torch
    assert torch._C._get_cudnn_deterministic() is True
    with _environ.recording() as rec, _environ.paused():
        torch.get_default_dtype()
    assert not rec.reads()


def test_memoized_reader_cleared_after_the_state_changed(fdk, monkeypatch, caplog) -> None:
    monkeypatch.delenv("FDK_TILE", raising=False)
    mod = fdk.module("state_reads")
    mod.tile()  # warmed before the first trace: the trace's call is a hit
    first, traced = check(mod.tiled_launch, *_args())
    assert traced and check(mod.tiled_launch, *_args()) == (first, False)
    monkeypatch.setenv("FDK_TILE", "2")
    assert check(mod.tiled_launch, *_args()) == (first, False)  # the memo still answers 1
    mod.tile.cache_clear()
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        cleared, traced = check(mod.tiled_launch, *_args())
    assert traced and cleared != first
    assert f"the memo of {mod.__name__}.tile() (read by the trace): cleared, evicted or refilled" in caplog.text
    assert check(mod.tiled_launch, *_args()) == (cleared, False)
    (entry,) = mod.tiled_launch.entries()
    assert entry.env_reads.local and index.reads_json(entry.env_reads) is None  # never a row


def test_bounded_file_reader_warmed_then_cleared(fdk, monkeypatch, tmp_path) -> None:
    scale = tmp_path / "scale.txt"
    scale.write_text("2.0")
    monkeypatch.setenv("FDK_SCALE_FILE", str(scale))
    mod = fdk.module("state_reads")
    mod.scale(str(scale))
    first, traced = check(mod.scaled_launch, *_args())
    assert traced
    scale.write_text("3.0")
    mod.scale.cache_clear()
    changed, traced = check(mod.scaled_launch, *_args())
    assert traced and changed != first


@pytest.fixture
def repo(tmp_path, rocm_root) -> Repo:  # type: ignore[no-untyped-def]
    return Repo(tmp_path)


def test_a_row_is_served_only_where_torch_answers_as_it_did(repo: Repo) -> None:
    args = ("state_reads", "settings_launch", "--fresh-ir")
    x = repo.run(*args)
    assert x["traces"] == 1 and not x["loaded"] and x["ir_key"] == x["fresh_ir"]
    again = repo.run(*args)
    assert again["traces"] == 0 and again["loaded"] and again["ir_key"] == x["ir_key"] == again["fresh_ir"]
    f64 = repo.run(*args, FDK_DEFAULT_DTYPE="float64")
    assert f64["traces"] == 1 and not f64["loaded"] and f64["ir_key"] == f64["fresh_ir"] != x["ir_key"]
    assert len(repo.rows()) == 2
    f64_again = repo.run(*args, FDK_DEFAULT_DTYPE="float64")
    assert f64_again["traces"] == 0 and f64_again["loaded"] and f64_again["ir_key"] == f64["ir_key"]
    strict = repo.run("state_reads", "settings_launch", FDK_DETERMINISTIC="1", FLYDEPS_AOT="strict")
    assert strict["error"] == "AotMissError" and strict["traces"] == 0
    assert (
        "torch.are_deterministic_algorithms_enabled() (read by the shipped trace): False -> True" in strict["message"]
    )


def test_a_trace_that_hit_a_memo_is_never_served_to_another_process(repo: Repo) -> None:
    args = ("state_reads", "tiled_launch", "--fresh-ir")
    warm = repo.run(*args, FDK_WARM_TILE="1")  # the trace hits the memo warmed at import
    assert warm["traces"] == 1 and warm["ir_key"] == warm["fresh_ir"]
    assert repo.rows() == []  # its row would hold wherever no variable it saw read differs
    assert any("not persisted, its trace consulted a memoized reader (the memo of" in n for n in warm["notes"])
    moved = repo.run(*args, FDK_WARM_TILE="1", FDK_TILE="2")
    assert moved["traces"] == 1 and not moved["loaded"] and moved["ir_key"] == moved["fresh_ir"] != warm["ir_key"]


def test_an_early_import_of_a_query_is_rebound(monkeypatch) -> None:
    """``from torch import get_default_dtype`` in a module imported before flydsl_runtime holds
    torch's function: it is rebound to the wrapper (its reads are seen); another name is not."""
    import types

    wrapper = torch.get_default_dtype
    original = statequery._originals["torch.get_default_dtype"]
    early = types.ModuleType("fdk_early_dtype")
    early.get_default_dtype = original  # type: ignore[attr-defined]
    early.gdd = original  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, early.__name__, early)
    assert statequery.rebind_early_imports(original, wrapper, "get_default_dtype") == [early.__name__]
    assert early.get_default_dtype is wrapper and early.gdd is original  # type: ignore[attr-defined]
    with _environ.recording() as rec:
        early.get_default_dtype()  # type: ignore[attr-defined]
        early.gdd()  # type: ignore[attr-defined]
    assert rec.reads().values == (("=torch.get_default_dtype()", "torch.float32"),)


def test_install_rebinds_the_early_imports_of_every_call_query_it_observes(monkeypatch) -> None:
    """Two call queries of one library installed together (one pass over ``sys.modules``):
    a module that imported both functions before holds both wrappers after; another name for
    one of them, and a module that imported neither, are left as they are."""
    import types

    library = types.ModuleType("fdk_two_queries")
    library.alpha = lambda: "a"  # type: ignore[attr-defined]
    library.beta = lambda: "b"  # type: ignore[attr-defined]
    early = types.ModuleType("fdk_two_queries_early")
    early.alpha, early.beta, early.first = library.alpha, library.beta, library.alpha  # type: ignore[attr-defined]
    other = types.ModuleType("fdk_two_queries_other")
    other.alpha = lambda: "not the library's"  # type: ignore[attr-defined]
    for module in (library, early, other):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    originals = (library.alpha, library.beta)  # type: ignore[attr-defined]
    queries = [statequery.StateQuery(library.__name__, name, "call", "a test") for name in ("alpha", "beta")]
    monkeypatch.setattr(statequery, "QUERIES", [*statequery.QUERIES, *queries])
    for query in queries:
        monkeypatch.setitem(statequery._originals, query.path, None)
        del statequery._originals[query.path]  # monkeypatch removes what install() adds
    done = statequery.install()
    assert {q.path for q in queries} <= set(done)
    assert early.alpha is library.alpha is not originals[0]  # type: ignore[attr-defined]
    assert early.beta is library.beta is not originals[1]  # type: ignore[attr-defined]
    assert early.first is originals[0] and other.alpha() == "not the library's"  # type: ignore[attr-defined]
    with _environ.recording() as rec:
        assert early.alpha() == "a" and early.beta() == "b"  # type: ignore[attr-defined]
    assert rec.reads().values == (("=fdk_two_queries.alpha()", "'a'"), ("=fdk_two_queries.beta()", "'b'"))


def test_a_query_whose_owner_is_not_imported_is_left_alone(monkeypatch) -> None:
    query = statequery.StateQuery("fdk_not_imported.settings", "flag", "attribute", "a test")
    monkeypatch.setattr(statequery, "QUERIES", [*statequery.QUERIES, query])
    assert "fdk_not_imported.settings.flag" not in statequery.install()
    assert statequery.evaluate(query.prefix) == "\0fdk_not_imported.settings is not imported in this process"
    assert _environ.current(query.prefix) == statequery.evaluate(query.prefix)
    with pytest.raises(ValueError, match="not a registered derived read"):
        _environ.note_derived("=torch.no_such_query()", "x")


def test_install_failing_midway_still_rebinds_the_wrappers_it_put_in_place(monkeypatch) -> None:
    """A query that fails to install after a call query was observed: the module that imported
    the call's function early holds the wrapper all the same (its reads are not missed)."""
    import types

    library = types.ModuleType("fdk_midway_queries")
    library.gamma = lambda: "g"  # type: ignore[attr-defined]
    library.flag = True  # type: ignore[attr-defined]
    early = types.ModuleType("fdk_midway_queries_early")
    early.gamma = original = library.gamma  # type: ignore[attr-defined]
    for module in (library, early):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    call = statequery.StateQuery(library.__name__, "gamma", "call", "a test")
    broken = statequery.StateQuery(library.__name__, "flag", "attribute", "a test")
    monkeypatch.setattr(statequery, "QUERIES", [*statequery.QUERIES, call, broken])

    def refuse(query: statequery.StateQuery, owner: object) -> None:
        if query is broken:
            raise RuntimeError("cannot observe")

    monkeypatch.setattr(statequery, "_install_attribute", refuse)
    monkeypatch.setitem(statequery._originals, call.path, None)
    del statequery._originals[call.path]  # monkeypatch removes what install() adds
    with pytest.raises(RuntimeError, match="cannot observe"):
        statequery.install()
    assert early.gamma is library.gamma is not original  # type: ignore[attr-defined]
