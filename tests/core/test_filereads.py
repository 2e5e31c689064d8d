"""flydeps.observe.filereads: files and directory listings a build reads, recorded and re-checked.

The oracle is the file system itself: a ``cached_factory`` build returns what it read from
the file, and after every change a call must return what a fresh read gives (counted
builds say whether it rebuilt). Reads that are not inputs (imports, writes, library files,
other threads) must leave no read behind, checked on the recorder's own output.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from flydeps import cached_factory
from flydeps.observe import environ as _environ
from flydeps.observe import filereads as _filereads
from flydeps.observe.environ import recording
from flydeps.store import memofile as _memofile

needs_hook = pytest.mark.skipif(not _filereads._audit.ENABLED, reason="FLYDEPS_AUDIT_HOOK=0 in this run")


def _settle() -> None:
    """Let the files just written age past the racy window (their change time is now)."""
    time.sleep(2 * _filereads._RACY_NS / 1e9)


def _files(reads: _environ.EnvReads) -> dict[str, str | None]:
    return {n: v for n, v in reads.values if n.startswith(("=file:", "=listdir:"))}


@needs_hook
def test_a_build_reading_a_file_rebuilds_exactly_when_its_contents_change(tmp_path: Path) -> None:
    config = tmp_path / "tuned.json"
    config.write_text(json.dumps({"block": 64}))
    _settle()
    builds: list[int] = []

    @cached_factory
    def compile_kernel(n: int) -> int:
        with open(config) as f:  # the compile factory reads its tuning file
            block = json.load(f)["block"]
        builds.append(block)
        return n // block

    assert compile_kernel(1024) == 16 and compile_kernel(1024) == 16 and len(builds) == 1
    config.write_text(json.dumps({"block": 128}))  # the tuning changed: a fresh read gives 8
    assert compile_kernel(1024) == 8 and len(builds) == 2
    assert compile_kernel(1024) == 8 and len(builds) == 2
    config.write_text(json.dumps({"block": 128}))  # rewritten with the same bytes: same answer, no build
    assert compile_kernel(1024) == 8 and len(builds) == 2
    config.unlink()
    with pytest.raises(FileNotFoundError):
        compile_kernel(1024)  # what a fresh build does: the file is gone
    config.write_text(json.dumps({"block": 256}))
    assert compile_kernel(1024) == 4 and len(builds) == 3


@needs_hook
def test_a_same_size_rewrite_with_the_old_times_is_seen(tmp_path: Path) -> None:
    """The memo trusts a file's identity only with its change time, which no one can set."""
    config = tmp_path / "c.txt"
    config.write_text("64")
    _settle()
    before = os.stat(config)
    with recording() as rec:
        config.read_text()
    reads = rec.reads()
    assert reads.holds() and reads.holds()  # the second check answers from the memo
    time.sleep(0.01)
    config.write_text("32")  # same size
    os.utime(config, ns=(before.st_atime_ns, before.st_mtime_ns))  # and the old modification time
    assert not reads.holds()
    assert [name for name, _old, _new in reads.changes()] == [f"=file:{config}"]


@needs_hook
def test_a_fresh_file_is_digested_on_every_check_until_it_settles(tmp_path: Path, monkeypatch) -> None:
    config = tmp_path / "c.txt"
    config.write_text("a")
    future = time.time_ns() + 10**10  # times ahead of the clock: a later write may not move them
    os.utime(config, ns=(future, future))
    with recording() as rec:
        config.read_text()
    reads = rec.reads()
    digests: list[str] = []
    real = _filereads._file_value

    def counted(name: str) -> str | None:
        digests.append(name)
        return real(name)

    monkeypatch.setattr(_filereads, "_file_value", counted)
    evaluate = _environ._evaluator(f"=file:{config}")
    assert reads.holds() and evaluate() == evaluate()
    assert len(digests) >= 2  # not remembered while racy
    os.utime(config, ns=(0, 0))
    _settle()
    digests.clear()
    assert reads.holds() and reads.holds() and evaluate() is not None
    assert len(digests) == 1  # remembered once settled: one digest, then stat only


@needs_hook
def test_a_relative_path_is_read_where_the_check_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "cfg.txt").write_text("1")
    (tmp_path / "b" / "cfg.txt").write_text("2")
    builds: list[str] = []

    @cached_factory
    def build() -> int:
        builds.append(os.getcwd())
        return int(Path("cfg.txt").read_text())

    monkeypatch.chdir(tmp_path / "a")
    assert build() == 1 and build() == 1 and len(builds) == 1
    monkeypatch.chdir(tmp_path / "b")
    assert build() == 2 and len(builds) == 2  # the build would read b/cfg.txt here
    (tmp_path / "b" / "cfg.txt").write_text("1")
    monkeypatch.chdir(tmp_path / "a")
    assert build() == 1 and len(builds) == 3


@needs_hook
def test_a_directory_listing_is_an_input(tmp_path: Path) -> None:
    configs = tmp_path / "configs"
    configs.mkdir()
    (configs / "gfx942.json").write_text("{}")
    builds: list[list[str]] = []

    @cached_factory
    def archs() -> tuple[str, ...]:
        names = sorted(p.stem for p in configs.glob("*.json"))
        builds.append(names)
        return tuple(names)

    assert archs() == ("gfx942",) and archs() == ("gfx942",) and len(builds) == 1
    (configs / "gfx950.json").write_text("{}")
    assert archs() == ("gfx942", "gfx950") and len(builds) == 2
    (configs / "gfx950.json").write_text('{"edited": 1}')  # contents of a file only listed: not read
    assert archs() == ("gfx942", "gfx950") and len(builds) == 2
    (configs / "gfx950.json").unlink()
    assert archs() == ("gfx942",) and len(builds) == 3


@needs_hook
def test_an_absent_file_the_build_falls_back_from_is_an_input(tmp_path: Path) -> None:
    override = tmp_path / "override.txt"
    builds: list[int] = []

    @cached_factory
    def block() -> int:
        try:
            value = int(override.read_text())
        except FileNotFoundError:
            value = 64
        builds.append(value)
        return value

    assert block() == 64 and block() == 64 and len(builds) == 1
    override.write_text("256")
    assert block() == 256 and len(builds) == 2


@needs_hook
def test_reads_that_are_not_inputs_leave_nothing(tmp_path: Path, pkg) -> None:
    """Writes, imports (code: walked), files under library directories (their distribution),
    directories opened as files, descriptors and other threads' reads are not noted."""
    pkg.write("lazy", "X = 1\n")
    out = tmp_path / "log.txt"
    data = tmp_path / "data.txt"
    data.write_text("x")
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("y")
    other: list[str] = []

    def other_thread() -> None:
        other.append(elsewhere.read_text())

    with recording() as rec:
        out.write_text("written")  # a write
        with open(out, "a") as f:
            f.write("appended")
        fd = os.open(tmp_path, os.O_RDONLY)  # a directory opened, not listed
        os.close(fd)
        fd = os.open(data, os.O_RDONLY)
        with open(fd, closefd=True) as f:  # by descriptor: the path was noted by os.open
            f.read()
        __import__(f"{pkg.name}.lazy")  # the import system reads the module's source
        with open(json.__file__, encoding="utf-8") as f:  # library code's file
            f.read(10)
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        with _environ.paused():
            elsewhere.read_text()
    assert other == ["y"]
    assert _files(rec.reads()) == {f"=file:{data}": _filereads._file_value(str(data))}


@needs_hook
def test_what_the_build_wrote_and_reads_back_is_its_own_output(tmp_path: Path) -> None:
    """A temporary file or directory made by the build and gone after it would otherwise make
    its entry fail every check (a rebuild per call); a file it only appended to stays an input."""
    import shutil
    import tempfile

    log = tmp_path / "log.txt"
    log.write_text("old\n")

    def build() -> str:
        scratch = Path(tempfile.mkdtemp(dir=tmp_path))
        (scratch / "ir.txt").write_text("ir")
        text = (scratch / "ir.txt").read_text() + str(sorted(p.name for p in scratch.iterdir()))
        fd, name = tempfile.mkstemp(dir=tmp_path)
        os.write(fd, b"x")
        os.close(fd)
        text += Path(name).read_text()
        os.unlink(name)
        shutil.rmtree(scratch)
        with open(log, "a") as f:
            f.write("built\n")
        return text + str(len(log.read_text()))  # depends on what the log held before

    with recording() as rec:
        assert build() == "ir['ir.txt']x10"
    assert list(_files(rec.reads())) == [f"=file:{log}"]


@needs_hook
def test_a_read_made_through_libraries_is_the_callers_and_one_made_by_flydeps_is_not(tmp_path: Path, pkg) -> None:
    data = tmp_path / "data.txt"
    data.write_text("x")
    other = tmp_path / "memo"
    other.write_text("not a memo")
    with recording() as rec:
        Path(data).read_bytes()  # pathlib, io: standard library frames between the caller and open
        _memofile.read_file(other, "kind", "key")  # flydeps' own read: its frame calls os.open
    assert list(_files(rec.reads())) == [f"=file:{data}"]
    # Package data, the way kernel packages ship tuning tables: through the import system's
    # loaders (importlib._bootstrap_external, not an import), by the caller's request.
    table = pkg.root / pkg.name / "table.json"
    table.write_text("{}")
    import importlib
    import importlib.resources
    import pkgutil

    importlib.invalidate_caches()
    importlib.import_module(pkg.name)

    with recording() as rec:
        pkgutil.get_data(pkg.name, "table.json")
    assert list(_files(rec.reads())) == [f"=file:{table}"]
    with recording() as rec:
        importlib.resources.files(pkg.name).joinpath("table.json").read_text()
    assert list(_files(rec.reads())) == [f"=file:{table}"]


@needs_hook
def test_a_read_inside_a_nested_build_is_a_read_of_the_outer_one(tmp_path: Path) -> None:
    data = tmp_path / "inner.txt"
    data.write_text("1")
    _settle()

    @cached_factory
    def inner() -> int:
        return int(data.read_text())

    @cached_factory
    def outer() -> int:
        return inner() + 1

    assert outer() == 2
    data.write_text("5")
    assert outer() == 6  # the inner hit re-checks the file, and the outer entry read it too


@needs_hook
def test_a_read_that_cannot_be_recorded_makes_the_entry_rebuild_never_serve(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    data = tmp_path / "data.txt"
    data.write_text("x")

    def broken(args: tuple) -> None:
        raise RuntimeError("recording broke")

    monkeypatch.setattr(_filereads, "_opened", broken)
    monkeypatch.setattr(_filereads, "_warned", [])
    with caplog.at_level("WARNING", logger="flydeps"), recording() as rec:
        assert data.read_text() == "x"  # the build's own read goes on
    reads = rec.reads()
    assert list(_files(reads)) == [_filereads._UNRECORDED] and not reads.holds()
    assert "a file read by a build could not be recorded (RuntimeError: recording broke)" in caplog.text


def test_labels_and_values_for_messages(tmp_path: Path) -> None:
    name = f"=file:{tmp_path}/x.json"
    assert _environ.label(name) == f"file {tmp_path}/x.json"
    assert _environ.label(f"=listdir:{tmp_path}") == f"directory listing {tmp_path}"
    assert _environ.shown(name, None) == "<absent>"
    assert _environ.shown(name, "b3:" + "ab" * 32) == "contents b3:abababababab"
    assert _environ.shown("HOME", None) == "<unset>" and _environ.shown("HOME", "x") == "'x'"
    assert _environ.current(name) is None  # absent, in a process that never recorded it
    (tmp_path / "x.json").write_text("{}")
    assert _environ.current(name) == _filereads._file_value(f"{tmp_path}/x.json")
    (tmp_path / "d.json").mkdir()
    assert _environ.current(f"=file:{tmp_path}/d.json") == "not a regular file"
    with pytest.raises(ValueError, match="not a file read"):
        _filereads.evaluator("=get_rocm_arch()")
    # A read no build could have made (a damaged persistent row): never holds, never raises.
    damaged = _environ.EnvReads((("=file:a\0b", "b3:00"), ("=listdir:c\0d", None)))
    assert not damaged.holds()
    assert _environ.current("=file:a\0b") == _environ.current("=listdir:c\0d") == "unreadable:invalid path"


def test_with_the_audit_hook_off_file_reads_are_not_recorded(tmp_path: Path) -> None:
    data = tmp_path / "data.txt"
    data.write_text("x")
    code = textwrap.dedent(
        f"""
        from pathlib import Path
        from flydeps.observe.environ import recording
        with recording() as rec:
            Path({str(data)!r}).read_text()
        print([n for n, _ in rec.reads().values])
        """
    )
    env = {**os.environ, "FLYDEPS_AUDIT_HOOK": "0"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    env["FLYDEPS_AUDIT_HOOK"] = "1"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == repr([f"=file:{data}"])
