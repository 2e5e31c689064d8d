"""A logger's level and a relative path's existence read by a trace (issue 35), on real FlyDSL compiles.

The level is a state query of :mod:`flydsl_runtime.trace.statequery` (``Logger.isEnabledFor`` /
``getEffectiveLevel``, asked of the logger by its name on every hit); the existence check is
a metadata read of :mod:`flydeps.observe.filereads` (``=stat:exists:fdk_tuning.flag``, re-resolved
against the working directory of the process that checks). The oracle is FlyDSL's IR key
from a fresh trace (``test_trace_inputs.check``), and in a new process (``index_child.py
--fresh-ir``) for the persistent index.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("flydsl")

import torch  # noqa: E402
from test_index import Repo  # noqa: E402
from test_trace_inputs import check  # noqa: E402

from flydeps.observe import environ as _environ  # noqa: E402
from flydsl_runtime.trace import statequery  # noqa: E402

pytestmark = pytest.mark.usefixtures("compile_only")
ENABLED = "=logging.Logger.isEnabledFor:10:"
FLAG = "=stat:exists:fdk_tuning.flag"


def _args() -> tuple:
    return (*(torch.zeros(1024, dtype=torch.float32) for _ in range(3)), 1024)


@pytest.fixture(autouse=True)
def quiet_loggers() -> Iterator[None]:
    """logging.disable undone after each test (the loggers are the test package's own)."""
    yield
    logging.disable(logging.NOTSET)


@pytest.mark.parametrize("which", ["own", "parent"])
def test_a_level_the_trace_asked_is_reasked_on_every_hit(fdk, caplog, which) -> None:
    mod = fdk.module("state_logging")
    first, traced = check(mod.logged_launch, *_args())
    assert traced and check(mod.logged_launch, *_args()) == (first, False)
    (entry,) = mod.logged_launch.entries()
    asked = [n for n in entry.env_reads.names if n.startswith("=logging.")]
    assert asked == [ENABLED + mod.__name__]  # debug() emitting a record is no read
    logger = logging.getLogger(mod.__name__ if which == "own" else fdk.name)
    logger.setLevel(logging.DEBUG)
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        debugging, traced = check(mod.logged_launch, *_args())
    assert traced and debugging != first
    assert f"logging.getLogger({mod.__name__!r}).isEnabledFor(10) (read by the trace): False -> True" in caplog.text
    assert check(mod.logged_launch, *_args()) == (debugging, False)
    logging.disable(logging.CRITICAL)  # disabled by the manager: the answer moves, no level does
    assert check(mod.logged_launch, *_args())[0] == first
    logging.disable(logging.NOTSET)
    assert check(mod.logged_launch, *_args())[0] == debugging
    logger.setLevel(logging.NOTSET)
    assert check(mod.logged_launch, *_args())[0] == first


def test_a_relative_path_is_checked_where_the_process_is(fdk, monkeypatch, tmp_path, caplog) -> None:
    away, flagged = tmp_path / "away", tmp_path / "flagged"
    away.mkdir()
    flagged.mkdir()
    (flagged / "fdk_tuning.flag").write_text("1")
    monkeypatch.chdir(away)
    mod = fdk.module("state_logging")
    first, traced = check(mod.flagged_launch, *_args())
    assert traced and check(mod.flagged_launch, *_args()) == (first, False)
    (entry,) = mod.flagged_launch.entries()
    assert FLAG in entry.env_reads.names
    os.chdir(flagged)
    with caplog.at_level(logging.INFO, logger="flydsl_runtime"):
        tuned, traced = check(mod.flagged_launch, *_args())
    assert traced and tuned != first
    assert "metadata (exists) of fdk_tuning.flag (read by the trace): <absent> -> exists" in caplog.text
    os.chdir(away)
    assert check(mod.flagged_launch, *_args())[0] == first
    (away / "fdk_tuning.flag").write_text("1")  # the same answer here: the tuned IR
    assert check(mod.flagged_launch, *_args())[0] == tuned


def test_a_logger_made_by_hand_is_never_answered_again() -> None:
    """A logger ``logging.getLogger`` does not give back by its name cannot be asked in a
    check: its read never holds (rebuilt, never stale); a level that is not an int likewise."""
    hand = logging.Logger("fdk.by_hand")
    with _environ.recording() as rec:
        hand.isEnabledFor(logging.DEBUG)
        with pytest.raises(TypeError):  # logging's own answer to a level that is not an int
            logging.getLogger("fdk.named").isEnabledFor("DEBUG")  # type: ignore[arg-type]
    reads = rec.reads()
    assert len(reads.values) == 2 and not reads.holds()
    for name, value in reads.values:
        assert _environ.current(name).startswith("\0raised LookupError") and value != _environ.current(name)  # type: ignore[union-attr]


def test_logging_queries_are_read_only_by_callers_that_branch(caplog) -> None:
    log = logging.getLogger("fdk.emitting")
    adapter = logging.LoggerAdapter(log, {})
    with _environ.recording() as rec:
        log.debug("x")
        log.log(logging.INFO, "y")
        adapter.info("z")
        logging.getLogger().debug("root")
    assert not rec.reads()
    with _environ.recording() as rec:
        adapter.isEnabledFor(logging.INFO)  # the adapter asks its logger: the caller's question
        logging.getLogger().getEffectiveLevel()
    assert [n for n, _v in rec.reads().values] == [
        "=logging.Logger.isEnabledFor:20:fdk.emitting",
        "=logging.Logger.getEffectiveLevel::root",
    ]


def test_loggers_are_observed_only_while_a_thread_records() -> None:
    """Every log call asks its logger's level: outside a recording it is logging's own method."""
    original = statequery._originals["logging.Logger.isEnabledFor"]
    assert logging.Logger.__dict__["isEnabledFor"] is original
    with _environ.recording():
        assert logging.Logger.__dict__["isEnabledFor"].__flydeps_original__ is original  # type: ignore[attr-defined]
    assert logging.Logger.__dict__["isEnabledFor"] is original
    assert statequery.query_of("=logging.Logger.getEffectiveLevel::root") is not None


@pytest.fixture
def repo(tmp_path, rocm_root) -> Repo:  # type: ignore[no-untyped-def]
    return Repo(tmp_path)


def test_a_row_is_served_only_where_the_logger_answers_as_it_did(repo: Repo) -> None:
    args = ("state_logging", "logged_launch", "--fresh-ir")
    quiet = repo.run(*args)
    assert quiet["traces"] == 1 and quiet["ir_key"] == quiet["fresh_ir"]
    debug = repo.run(*args, FDK_LOG_LEVEL="DEBUG")  # the parent logger's level, set at import
    assert debug["traces"] == 1 and not debug["loaded"] and debug["ir_key"] == debug["fresh_ir"] != quiet["ir_key"]
    again = repo.run(*args, FDK_LOG_LEVEL="DEBUG")
    assert again["traces"] == 0 and again["loaded"] and again["ir_key"] == debug["ir_key"] == again["fresh_ir"]
    disabled = repo.run(*args, FDK_LOG_LEVEL="DEBUG", FDK_LOG_DISABLE="CRITICAL")
    # served from the quiet row (its "loaded" note is a log record: logging.disable drops it)
    assert disabled["traces"] == 0 and disabled["ir_key"] == quiet["ir_key"] == disabled["fresh_ir"]
    assert len(repo.rows()) == 2


def test_a_row_of_a_relative_check_is_served_only_where_it_answers_the_same(repo: Repo, tmp_path: Path) -> None:
    away, flagged = tmp_path / "away", tmp_path / "flagged"
    away.mkdir()
    flagged.mkdir()
    (flagged / "fdk_tuning.flag").write_text("1")
    args = ("state_logging", "flagged_launch", "--fresh-ir")
    plain = repo.run(*args, FDK_CWD=str(away))
    assert plain["traces"] == 1 and plain["ir_key"] == plain["fresh_ir"]
    tuned = repo.run(*args, FDK_CWD=str(flagged))
    assert tuned["traces"] == 1 and not tuned["loaded"] and tuned["ir_key"] == tuned["fresh_ir"] != plain["ir_key"]
    again = repo.run(*args, FDK_CWD=str(away))
    assert again["traces"] == 0 and again["loaded"] and again["ir_key"] == plain["ir_key"] == again["fresh_ir"]
