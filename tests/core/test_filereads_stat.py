"""flydeps.observe.filereads: metadata reads (``os.stat``/``os.lstat`` and the ``os.path`` / ``pathlib``
predicates built on them) a build makes, recorded and re-checked.

The oracle is the file system: a ``cached_factory`` build returns what its check answered,
and after every change a call must return what a fresh build gives (counted builds say
whether it rebuilt). Stats that are not inputs (other threads, library files, flydeps' or
FlyDSL's own, the build's own output, descriptors) must leave no read behind.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

from flydeps import cached_factory
from flydeps.observe import environ as _environ
from flydeps.observe import filereads as _filereads
from flydeps.observe.environ import recording


def _stats(reads: _environ.EnvReads) -> dict[str, str | None]:
    return {n: v for n, v in reads.values if n.startswith(_filereads.STAT)}


def test_an_existence_check_rebuilds_exactly_when_its_answer_changes(tmp_path: Path) -> None:
    flag = tmp_path / "tuning.flag"
    builds: list[bool] = []

    @cached_factory
    def compile_kernel(n: int) -> int:
        tuned = flag.exists()  # Path.exists: no open, no audit event
        builds.append(tuned)
        return n * (2 if tuned else 1)

    assert compile_kernel(8) == 8 and compile_kernel(8) == 8 and builds == [False]
    flag.write_text("1")
    assert compile_kernel(8) == 16 and builds == [False, True]
    flag.write_text("2, another size")  # it still exists: the answer the build got is the same
    assert compile_kernel(8) == 16 and builds == [False, True]
    flag.unlink()
    assert compile_kernel(8) == 8


def test_a_relative_check_is_answered_where_the_check_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain, tuned = tmp_path / "plain", tmp_path / "tuned"
    plain.mkdir()
    tuned.mkdir()
    (tuned / "tuning.flag").write_text("1")
    monkeypatch.chdir(plain)

    @cached_factory
    def compile_kernel(n: int) -> int:
        return n * (2 if os.path.exists("tuning.flag") else 1)

    assert compile_kernel(8) == 8
    os.chdir(tuned)  # the same name, resolved where the process is now
    assert compile_kernel(8) == 16
    os.chdir(plain)
    assert compile_kernel(8) == 8


def test_each_predicate_keys_what_it_answers(tmp_path: Path) -> None:
    data, link, folder = tmp_path / "data.bin", tmp_path / "link", tmp_path / "dir"
    data.write_bytes(b"1234")
    link.symlink_to(data)
    folder.mkdir()
    with recording() as rec:
        asked = (
            os.path.exists(data),
            os.path.isfile(link),
            folder.is_dir(),
            os.path.islink(link),
            os.path.getsize(data),
            os.stat(folder).st_nlink,
            link.resolve(),
        )
    assert asked[:5] == (True, True, True, True, 4)
    reads = _stats(rec.reads())
    assert list(reads)[:6] == [
        f"=stat:exists:{data}",
        f"=stat:type:{link}",
        f"=stat:type:{folder}",
        f"=stat:ltype:{link}",
        f"=stat:size:{data}",
        f"=stat:meta:{folder}",
    ]
    # resolving: each component's type, a link's identity (a retargeted link is a new one)
    resolved = list(reads)[6:]
    assert f"=stat:llink:{link}" in resolved and f"=stat:llink:{tmp_path}" in resolved
    assert all(n.startswith(("=stat:llink:", "=stat:link:")) for n in resolved)  # Path.resolve stats the result
    assert reads[f"=stat:llink:{tmp_path}"] == f"type:{stat.S_IFDIR:o}"
    assert (
        reads[f"=stat:type:{link}"] == f"type:{stat.S_IFREG:o}"
        and reads[f"=stat:ltype:{link}"] == f"type:{stat.S_IFLNK:o}"
    )
    assert all(_environ.current(n) == v for n, v in reads.items()) and rec.reads().holds()
    data.write_bytes(b"4321")  # same size, same type: only what asked for the size could see it
    assert rec.reads().holds()
    (folder / "new").mkdir()  # the folder's link count and times move: os.stat's answer did
    assert [n for n, _old, _new in rec.reads().changes()] == [f"=stat:meta:{folder}"]


def test_stats_that_are_not_inputs_leave_nothing(tmp_path: Path) -> None:
    """Other threads', paused, library files', FlyDSL's / flydeps' own, by descriptor or
    ``dir_fd``, and what the build made itself."""
    data = tmp_path / "data.txt"
    data.write_text("x")
    machinery: dict[str, object] = {"__name__": "flydsl.compiler.fake_cache", "os": os}
    exec("def probe(path):\n    return os.path.exists(path)\n", machinery)
    with recording() as rec:
        thread = threading.Thread(target=os.stat, args=(data,))
        thread.start()
        thread.join()
        with _environ.paused():
            os.stat(data)
        os.stat(os.__file__)  # the standard library's file: keyed by the interpreter
        machinery["probe"](data)  # type: ignore[operator]
        fd = os.open(data, os.O_RDONLY)
        os.stat(fd)
        os.close(fd)
        directory = os.open(tmp_path, os.O_RDONLY)
        os.stat("data.txt", dir_fd=directory)
        os.close(directory)
        made = tmp_path / "made.txt"
        made.write_text("its own output")
        assert made.exists()
        assert os.path.isfile(data)  # the one input
    assert _stats(rec.reads()) == {f"=stat:type:{data}": f"type:{stat.S_IFREG:o}"}


def test_os_stat_is_the_builtin_outside_recordings(monkeypatch: pytest.MonkeyPatch) -> None:
    """The observing function is in ``os`` only while a thread records: nothing else pays."""
    assert os.stat is _filereads._os_stat and os.lstat is _filereads._os_lstat
    with recording():
        assert os.stat is not _filereads._os_stat and os.stat.__wrapped__ is _filereads._os_stat  # type: ignore[attr-defined]
        with recording():
            pass
        assert os.stat is not _filereads._os_stat  # the outer recording still runs
    assert os.stat is _filereads._os_stat and os.lstat is _filereads._os_lstat

    def someone_elses(path: object, **kwargs: object) -> os.stat_result:
        return _filereads._os_stat(path, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "stat", someone_elses)
    with recording():
        assert os.stat is someone_elses
    assert os.stat is someone_elses


def test_a_stat_that_raises_is_noted_as_its_answer(tmp_path: Path) -> None:
    with recording() as rec:
        with pytest.raises(ValueError):
            os.stat("a\0b")
        with pytest.raises(NotADirectoryError):
            os.stat(__file__ + "/x")
    reads = _stats(rec.reads())
    assert reads == {"=stat:meta:a\0b": "unreadable:invalid path", f"=stat:meta:{__file__}/x": None}
    assert all(_environ.current(n) == v for n, v in reads.items())


def test_a_stat_that_cannot_be_recorded_makes_the_entry_rebuild(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(frame: object) -> str:
        raise RuntimeError("view broke")

    monkeypatch.setattr(_filereads, "_view_of", broken)
    monkeypatch.setattr(_filereads, "_warned", [])
    with caplog.at_level("WARNING", logger="flydeps"), recording() as rec:
        assert tmp_path.exists()  # the build's own stat goes on
    reads = rec.reads()
    assert _filereads._UNRECORDED in reads.names and not reads.holds()
    assert "a file read by a build could not be recorded (RuntimeError: view broke)" in caplog.text


def test_labels_values_and_bad_names(tmp_path: Path) -> None:
    name = f"=stat:exists:{tmp_path}/x"
    assert _environ.label(name) == f"metadata (exists) of {tmp_path}/x"
    assert _environ.shown(name, None) == "<absent>" and _environ.shown(name, "exists") == "exists"
    assert _environ.change(name, None, "exists") == "<absent> -> exists"
    assert _environ.current(name) is None
    (tmp_path / "x").write_text("")
    assert _environ.current(name) == "exists"
    for bad in ("=stat:bogus:x", "=stat:lbogus:x", "=stat:"):
        with pytest.raises(ValueError, match="not a metadata read"):
            _filereads.evaluator(bad)
