"""The persistent index and the artifacts it serves where another user could reach them
(issue 36, items 1-3): a cache another user can write, an index behind a symbolic link, a
damaged schema page.

"Another user" is real: a forked child that became uid/gid 65534 (``nobody``) before it
touches a file, or ``os.chown`` to that uid; these tests need root for that (CI runs as
root) and are skipped elsewhere. The victim is a real launcher call in a new process
(``index_child.py``, as in ``test_index.py``): where the index or the artifact could have
been written by someone else it must trace - FlyDSL's fresh trace is the oracle for its IR -
and say so once, never serve or write the planted file.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("flydsl")

from test_index import Repo  # noqa: E402

from flydeps.store import memofile as _memofile  # noqa: E402
from flydsl_runtime.persist import index  # noqa: E402

NOBODY = 65534
as_root = pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="acting as a second user (os.chown, os.setuid) needs root; CI runs as root",
)


def as_nobody(action: Callable[[], None]) -> None:
    """Run ``action`` in a forked child that became uid and gid 65534: a real second user."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports by its exit status
        code = 1
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            action()
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the second user's action failed (its traceback is on stderr)"


@pytest.fixture
def area() -> Iterator[Path]:
    """A directory the second user can reach (pytest's own temporary directories are 0700)."""
    path = Path(tempfile.mkdtemp(prefix="flydeps-trust-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def repo(tmp_path: Path, area: Path, rocm_root: Path) -> Repo:
    """A kernel package whose index and FlyDSL cache live where the second user can reach."""
    made = Repo(tmp_path)
    made.flydeps_cache = area / "cache"
    made.index = made.flydeps_cache / index.INDEX_NAME
    made.flydsl_cache = area / "flydsl"
    return made


def said(result: dict, words: str) -> list[str]:
    return [n for n in result["notes"] if words in n]


def traced_afresh(result: dict, ir_key: str) -> bool:
    """The call traced, loaded nothing, and its IR is what a fresh trace gives."""
    return result["traces"] == 1 and not result["loaded"] and result["ir_key"] == result["fresh_ir"] == ir_key


# --- item 1: a cache directory another user can write ---------------------------------


@as_root
@pytest.mark.parametrize("attack", ["replaced in a 0777 directory", "pre-created 0666 in a 1777 directory"])
def test_an_index_another_user_could_write_is_neither_served_nor_written(repo: Repo, area: Path, attack: str) -> None:
    first = repo.run()
    planted = area / "planted.sqlite3"  # the second user's index: rows that serve the victim's call
    shutil.copy(repo.index, planted)
    planted.chmod(0o644)
    if attack.startswith("replaced"):
        repo.flydeps_cache.chmod(0o777)

        def plant() -> None:
            shutil.copyfile(planted, repo.flydeps_cache / "swap")
            os.replace(repo.flydeps_cache / "swap", repo.index)

    else:
        shutil.rmtree(repo.flydeps_cache)
        repo.flydeps_cache.mkdir()
        repo.flydeps_cache.chmod(0o1777)

        def plant() -> None:
            fd = os.open(repo.index, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            os.fchmod(fd, 0o666)
            os.write(fd, planted.read_bytes())
            os.close(fd)

    as_nobody(plant)
    assert repo.index.stat().st_uid == NOBODY
    theirs = repo.index.read_bytes()
    victim = repo.run("reduce", "partial_sum", "--fresh-ir")
    assert traced_afresh(victim, first["ir_key"]), victim
    (note,) = said(victim, "flydsl_runtime: persistent index")  # one warning, though the call both looks up and records
    assert "not used" in note and str(repo.flydeps_cache) in note and "group or others can write it" in note
    other = repo.run("vadd", "vadd")  # no row anywhere: traces, and writes none into their file
    assert other["traces"] == 1 and len(said(other, "flydsl_runtime: persistent index")) == 1
    assert repo.index.read_bytes() == theirs and repo.index.stat().st_uid == NOBODY
    assert not Path(f"{repo.index}-wal").exists()  # SQLite never opened it


@as_root
@pytest.mark.parametrize("planted", ["file of another user", "file others can write", "directory of another user"])
def test_the_index_layer_refuses_what_another_user_could_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, planted: str
) -> None:
    """In process: a lookup and a record refused with one warning naming the file or
    directory, the file left as it was; another user's directory that group and others
    cannot write (a shipped one) is read and never written, even by root."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(cache))
    path = cache / index.INDEX_NAME
    _fresh_index(path)
    if planted == "file of another user":
        os.chown(path, NOBODY, NOBODY)
    elif planted == "file others can write":
        path.chmod(0o666)
    else:
        os.chown(cache, NOBODY, NOBODY)
        cache.chmod(0o755)
    before = path.read_bytes()
    try:
        with caplog.at_level(logging.WARNING, logger="flydsl_runtime"):
            seeded = index.lookup("seed" * 16)
            written = index.record("k" * 64, "m.f", "ir", index.EnvReads(()))
            assert index.lookup("k" * 64) is None
    finally:
        index._forget(path)
    warnings = [r.getMessage() for r in caplog.records if r.name == "flydsl_runtime"]
    assert path.read_bytes() == before and not written
    if planted == "directory of another user":  # read only: served, no warning, nothing written
        assert seeded is not None and seeded.ir_key == "ir-seed" and warnings == [] and index.read_only(path)
        return
    assert seeded is None
    (warning,) = warnings
    reason = "owned by uid 65534" if planted == "file of another user" else "group or others can write it"
    assert str(path) in warning and reason in warning and "not used" in warning


def _fresh_index(path: Path) -> None:
    """A real index file at ``path`` with one row, made by the index itself in another
    process (this one keeps no connection to it, nor any verdict on it)."""
    seed = (
        "import sys\n"
        "from pathlib import Path\n"
        "from flydsl_runtime.persist import index\n"
        "with index.at(Path(sys.argv[1])):\n"
        "    assert index.record('seed' * 16, 'm.seed', 'ir-seed', index.EnvReads(()))\n"
    )
    subprocess.run([sys.executable, "-c", seed, str(path.parent)], check=True)
    assert path.is_file()


@as_root
def test_a_shipped_directory_of_another_user_is_served_and_never_written(repo: Repo) -> None:
    """Another user's directory that group and others cannot write (a shipped AOT or runtime
    cache): its rows and artifacts are served, and a call without a row traces without
    writing a row there - even as root, whom its permissions would not stop."""
    first = repo.run()
    for place in (repo.flydeps_cache, repo.flydsl_cache):
        for path in (place, *place.rglob("*")):
            os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    served = repo.run("reduce", "partial_sum", "--fresh-ir")
    assert served["loaded"] and served["traces"] == 0 and served["ir_key"] == served["fresh_ir"] == first["ir_key"]
    assert not said(served, "not used") and not said(served, "not read")
    rows = repo.rows()
    traced = repo.run("vadd", "vadd")
    assert traced["traces"] == 1 and not traced["loaded"]
    assert repo.rows() == rows  # as root, today's tree wrote vadd's row into their index


# --- item 1: the artifacts the index serves -------------------------------------------


@as_root
@pytest.mark.parametrize("attack", ["artifact file of another user", "artifact directory others can write"])
def test_an_artifact_another_user_could_replace_is_not_served(repo: Repo, area: Path, attack: str) -> None:
    first = repo.run()
    (artifact,) = repo.flydsl_cache.rglob("*.pkl")
    if attack == "artifact file of another user":  # theirs: its owner can rewrite it
        os.chown(artifact, NOBODY, NOBODY)
        artifact.chmod(0o644)
    else:
        copy = area / "theirs.pkl"  # what they put in its place (here: the same bytes)
        shutil.copy(artifact, copy)
        copy.chmod(0o644)
        artifact.parent.chmod(0o777)

        def replace() -> None:
            shutil.copyfile(copy, artifact.parent / "swap")
            os.replace(artifact.parent / "swap", artifact)

        as_nobody(replace)
    assert artifact.stat().st_uid == NOBODY
    victim = repo.run("reduce", "partial_sum", "--fresh-ir")
    assert traced_afresh(victim, first["ir_key"]), victim
    (note,) = said(victim, "FlyDSL artifacts in")
    assert str(artifact.parent) in note and "not used" in note
    later = repo.run("reduce", "partial_sum")
    if attack == "artifact file of another user":  # the trace replaced it by its own, which serves
        assert artifact.stat().st_uid == os.getuid() and later["loaded"] and later["traces"] == 0
    else:  # their directory stays refused: every process traces, keeping its artifact in memory
        assert artifact.stat().st_uid == NOBODY and later["traces"] == 1 and not later["loaded"]


# --- item 2: symbolic links ------------------------------------------------------------


@as_root
@pytest.mark.parametrize("target", ["an empty file of another user", "another cache's index"])
def test_an_index_behind_a_symlink_is_neither_read_nor_written(repo: Repo, area: Path, target: str) -> None:
    if target == "an empty file of another user":
        theirs = area / "theirs"
        theirs.mkdir()
        os.chown(theirs, NOBODY, NOBODY)
        linked = theirs / "empty"
        as_nobody(lambda: linked.touch(mode=0o644))
    else:
        other = area / "other-cache"
        assert repo.run("vadd", "vadd", FLYDEPS_CACHE_DIR=str(other))["traces"] == 1
        linked = other / index.INDEX_NAME
    before = linked.read_bytes()
    repo.flydeps_cache.mkdir(mode=0o700)
    repo.index.symlink_to(linked)
    victim = repo.run("reduce", "partial_sum", "--fresh-ir")
    assert victim["traces"] == 1 and not victim["loaded"] and victim["ir_key"] == victim["fresh_ir"]
    assert linked.read_bytes() == before  # today: a 28 KB SQLite file, or the other cache's new row
    assert repo.index.is_symlink()
    (note,) = said(victim, "flydsl_runtime: persistent index")
    assert "it is a symbolic link" in note and str(repo.index) in note


@as_root
@pytest.mark.parametrize("planted", ["symbolic link", "owned by uid 65534"])
@pytest.mark.parametrize("suffix", ["-wal", "-shm", "-journal"])
def test_a_journal_file_behind_a_symlink_or_of_another_user_refuses_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, suffix: str, planted: str
) -> None:
    """SQLite opens an index's journal files by name beside it: one that is a symlink, or
    another user's file (planted while the directory was open to them), refuses the index
    with one warning naming that file; the symlink's target is never written."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(cache))
    path = cache / index.INDEX_NAME
    _fresh_index(path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_bytes(b"")
    side = Path(f"{path}{suffix}")
    if planted == "symbolic link":
        side.symlink_to(elsewhere)
    else:
        side.write_bytes(b"")
        os.chown(side, NOBODY, NOBODY)
    try:
        with caplog.at_level(logging.WARNING, logger="flydsl_runtime"):
            assert index.lookup("seed" * 16) is None  # the row is there: refused, not missing
            assert not index.record("k" * 64, "m.f", "ir", index.EnvReads(()))
    finally:
        index._forget(path)
    assert elsewhere.read_bytes() == b""
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "flydsl_runtime"]
    assert str(side) in warning and planted in warning and "not used" in warning


def test_open_entry_refuses_a_symlink_a_fifo_and_a_directory(tmp_path: Path) -> None:
    """Bad inputs of the shared mechanism: none is opened for reading (a FIFO would block)."""
    (tmp_path / "target").write_bytes(b"x")
    (tmp_path / "link").symlink_to(tmp_path / "target")
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    dir_fd, info = _memofile.open_dir(tmp_path)
    owners = _memofile.trusted_owners(info)
    try:
        for name, reason in (("link", "symbolic link"), ("fifo", "not a regular file"), ("dir", "not a regular file")):
            with pytest.raises(_memofile.Untrusted, match=reason):
                _memofile.open_entry(name, dir_fd, owners, where=tmp_path)
        with pytest.raises(FileNotFoundError):
            _memofile.open_entry("missing", dir_fd, owners, where=tmp_path)
        fd, made = _memofile.open_entry("made", dir_fd, owners, where=tmp_path, create=True)
        os.close(fd)
        assert stat.S_IMODE(made.st_mode) == 0o600 and stat.S_ISREG(made.st_mode)
    finally:
        os.close(dir_fd)


# --- item 3: one damaged page ------------------------------------------------------------


def test_a_damaged_schema_page_is_set_aside_once_and_later_processes_work(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    """A flipped byte in the schema page makes SQLite's error message undecodable (the
    driver raises ``UnicodeDecodeError``, not ``sqlite3.Error``): the call traces, the
    file is set aside under a name that says so with one warning, and the next process is
    served from the new index; ``flydeps aot list`` names the file instead of failing."""
    from flydeps.cli import main as cli

    first = repo.run()
    damaged = bytearray(repo.index.read_bytes())
    at = damaged.find(b"CREATE TABLE specializations")
    assert at > 0 and not Path(f"{repo.index}-wal").exists()
    damaged[at + 2] = 0xFF  # "CR\xffATE TABLE": the schema no longer parses, and SQLite quotes it
    repo.index.write_bytes(bytes(damaged))
    capsys.readouterr()
    assert cli(["aot", "list", str(repo.flydeps_cache)]) == 2
    err = capsys.readouterr().err
    assert str(repo.index) in err and "not a readable persistent index" in err and "internal error" not in err
    call = repo.run("reduce", "partial_sum", "--fresh-ir")
    assert traced_afresh(call, first["ir_key"]), call
    (note,) = said(call, "flydsl_runtime: persistent index")
    assert "unreadable" in note and "UnicodeDecodeError" in note and "moved to" in note
    (aside,) = repo.flydeps_cache.glob(f"{index.INDEX_NAME}.corrupt-*")
    assert aside.read_bytes() == bytes(damaged) and str(aside) in note
    later = repo.run()
    assert later["traces"] == 0 and later["loaded"] and not said(later, "flydsl_runtime: persistent index")
    assert len(repo.rows()) == 1


def test_damage_is_told_from_a_busy_or_unopenable_store() -> None:
    import sqlite3

    damage = [
        sqlite3.DatabaseError("database disk image is malformed"),
        sqlite3.DatabaseError("file is not a database"),
        sqlite3.OperationalError("no such table: specializations"),
        UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte"),
        ValueError("a driver's surprise"),
    ]
    passing = [
        sqlite3.OperationalError("database is locked"),
        sqlite3.OperationalError("unable to open database file"),
        sqlite3.OperationalError("attempt to write a readonly database"),
        PermissionError(13, "Permission denied"),
        index.IndexRefused("refused"),
    ]
    assert [index._is_damage(e) for e in damage] == [True] * len(damage)
    assert [index._is_damage(e) for e in passing] == [False] * len(passing)
