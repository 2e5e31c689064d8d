"""The parse and result caches under attack: planted entries never run code, never crash the
interpreter and never change the answer; entries are bound to their key; cache directories
are private (0700) and a directory others can write is refused with one warning.

The oracle is an uncached analysis of the same files (``use_cache=False``) and, end to
end, the output of ``flydeps graph --no-cache``.
"""

from __future__ import annotations

import json
import logging
import marshal
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from blake3 import blake3
from test_cache import FACTORY

from flydeps.static import parse, store
from flydeps.static.analyze import analyze


def _project(base: Path, helper_body: str = "return n + 1") -> Path:
    root = base / "pkg"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "factory.py").write_text(FACTORY)
    (root / "helpers.py").write_text(f"def helper(n):\n    {helper_body}\n")
    return root


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _clean(root: Path) -> tuple[object, object]:
    result = analyze([str(root)], use_cache=False)
    return result.graph, result.diagnostics


def _cached(root: Path) -> tuple[object, object]:
    result = analyze([str(root)])
    return result.graph, result.diagnostics


def _entry_names(directory: Path, key: str) -> list[Path]:
    """Where this and earlier flydeps versions look for ``key`` (every codec suffix)."""
    return [directory / key[:2] / f"{key[2:]}.{suffix}" for suffix in ("json", "pickle", "marshal")]


class _RunsCode:
    """Unpickling this creates ``marker``: proof that a cache reader executed an entry."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str, str]]:
        return (open, (str(self.marker), "w"))


def _plant_everywhere(root: Path, payload: bytes) -> int:
    """Write ``payload`` over every existing cache entry and at the name of every source
    file's summary, under every suffix; returns the number of files written."""
    directory = parse.cache_dir()
    targets = {p for p in directory.rglob("*") if p.is_file()}
    for source in root.rglob("*.py"):
        targets.update(_entry_names(directory, blake3(source.read_bytes()).hexdigest()))
    for target in targets:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(payload)
    return len(targets)


def test_a_planted_pickle_never_runs_and_the_answer_is_unchanged(cache: Path, tmp_path: Path) -> None:
    root = _project(tmp_path)
    clean = _clean(root)
    assert _cached(root) == clean  # fills the cache
    marker = tmp_path / "pwned"
    assert _plant_everywhere(root, pickle.dumps(_RunsCode(marker))) >= 3
    assert _cached(root) == clean
    assert not marker.exists()


def test_planted_cli_run_prints_the_clean_graph(cache: Path, tmp_path: Path) -> None:
    root = _project(tmp_path)
    env = {**os.environ, "FLYDEPS_CACHE_DIR": str(cache)}
    command = [sys.executable, "-m", "flydeps", "graph", str(root)]
    clean = subprocess.run([*command, "--no-cache"], env=env, capture_output=True, text=True, timeout=120)
    subprocess.run(command, env=env, capture_output=True, timeout=120, check=True)
    marker = tmp_path / "pwned"
    _plant_everywhere(root, pickle.dumps(_RunsCode(marker)))
    planted = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert (planted.returncode, planted.stdout) == (clean.returncode, clean.stdout)
    assert "Traceback" not in planted.stderr
    assert not marker.exists()


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(marshal.dumps(compile("open('x', 'w')", "x", "exec")), id="marshal-code-object"),
        pytest.param(marshal.dumps(tuple(range(10))), id="marshal-tuple"),
        pytest.param(b"\xff\xfe garbage \x00" * 100, id="garbage"),
        pytest.param(b"[" * 200_000, id="deep-json"),  # also a 1.5-billion-item marshal list (hangs marshal)
        pytest.param(b"[\xff\xff\xff\x7f", id="marshal-huge-list"),
        pytest.param(b"", id="empty"),
    ],
)
def test_malformed_entries_of_every_kind_are_misses(cache: Path, tmp_path: Path, payload: bytes) -> None:
    root = _project(tmp_path)
    clean = _clean(root)
    _cached(root)
    _plant_everywhere(root, payload)
    assert _cached(root) == clean


def _entries(kind: str) -> list[Path]:
    """Current entries: result entries live under ``r?`` directories."""
    found = [p for p in parse.cache_dir().rglob("*.json")]
    return [p for p in found if p.parent.name.startswith("r") == (kind == "result")]


def _primed(tmp_path: Path) -> tuple[Path, tuple[object, object], list[Path]]:
    """A project, its uncached answer, and the summary and result entries one cached run wrote."""
    root = _project(tmp_path)
    clean = _clean(root)
    _cached(root)
    entries = _entries("summary") + _entries("result")
    assert len(entries) >= 4
    return root, clean, entries


def test_truncated_and_retyped_entries_are_misses_and_get_rewritten(cache: Path, tmp_path: Path) -> None:
    root, clean, entries = _primed(tmp_path)
    originals = {p: p.read_bytes() for p in entries}
    for index, entry in enumerate(entries):
        data = originals[entry]
        header, _, body = data.partition(b"\n")
        if index % 3 == 0:  # cut in the middle of the JSON
            entry.write_bytes(data[: len(data) // 2])
        elif index % 3 == 1:  # right header, every string turned into a number
            entry.write_bytes(header + b"\n" + json.dumps(_retype(json.loads(body))).encode())
        else:  # right header, a field missing
            entry.write_bytes(header + b"\n" + json.dumps(json.loads(body)[:-1]).encode())
    assert _cached(root) == clean
    assert {p: p.read_bytes() for p in entries} == originals  # each miss rewrote its entry


def _retype(value: object) -> object:
    if isinstance(value, list):
        return [_retype(v) for v in value]
    return 7 if isinstance(value, str) else value


def test_a_huge_entry_is_refused_unread(cache: Path, tmp_path: Path) -> None:
    root, clean, entries = _primed(tmp_path)
    for entry in entries:
        with open(entry, "r+b") as handle:  # sparse: costs no disk, would cost memory to read
            handle.truncate(store.MAX_ENTRY_BYTES + 1)
    assert _cached(root) == clean


def test_an_entry_is_read_to_its_end_whatever_fstat_said(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reader sizes its requests by fstat, and still reads a file that grew since to its
    end, and one past the bound only to the bound plus one byte (so it is refused)."""
    from flydeps.store import memofile as _memofile

    body = os.urandom(200_000)  # several requests of the 64 KiB step
    path = tmp_path / "entry"
    path.write_bytes(body)
    fd = os.open(path, os.O_RDONLY)
    try:
        assert _memofile._read_to(fd, 11) == body  # fstat said 10 bytes: it grew
        os.lseek(fd, 0, os.SEEK_SET)
        assert _memofile._read_to(fd, len(body) + 1) == body
        os.lseek(fd, 0, os.SEEK_SET)
        monkeypatch.setattr(_memofile, "MAX_ENTRY_BYTES", 100_000)
        assert _memofile._read_to(fd, 11) == body[:100_001]
    finally:
        os.close(fd)
    _memofile.write(path, "kind", b"payload")
    assert _memofile.read(path, "kind") == b"payload"
    assert _memofile.read(path, "other kind") is None


def test_an_entry_of_another_schema_version_is_a_miss(cache: Path, tmp_path: Path) -> None:
    root, clean, entries = _primed(tmp_path)
    originals = {p: p.read_bytes() for p in entries}
    for entry in entries:
        header, _, body = entry.read_bytes().partition(b"\n")
        older = header.replace(b"summary-v", b"summary-v0").replace(b"result-", b"result-old-")
        assert older != header
        entry.write_bytes(older + b"\n" + body)
    assert _cached(root) == clean
    assert {p: p.read_bytes() for p in entries} == originals  # not used: recomputed and rewritten


def test_a_valid_result_entry_copied_over_another_project_is_a_miss(cache: Path, tmp_path: Path) -> None:
    project_a = _project(tmp_path / "a", "return n + 1")
    project_b = _project(tmp_path / "b", "return n * 2")
    clean_b = _clean(project_b)
    assert _clean(project_a)[0] != clean_b[0]
    _cached(project_a)
    entries_a = set(_entries("result"))
    _cached(project_b)
    (entry_b,) = set(_entries("result")) - entries_a
    (entry_a,) = entries_a
    entry_b.write_bytes(entry_a.read_bytes())  # A's whole analysis under B's key
    assert _cached(project_b) == clean_b


def test_a_valid_summary_copied_over_another_file_is_a_miss(cache: Path, tmp_path: Path) -> None:
    root = _project(tmp_path)
    clean = _clean(root)
    _cached(root)
    directory = parse.cache_dir()
    helpers = directory / (key := blake3((root / "helpers.py").read_bytes()).hexdigest())[:2] / f"{key[2:]}.json"
    factory_key = blake3((root / "factory.py").read_bytes()).hexdigest()
    factory = directory / factory_key[:2] / f"{factory_key[2:]}.json"
    factory.write_bytes(helpers.read_bytes())
    for entry in _entries("result"):
        entry.unlink()  # force the summaries to be read
    assert _cached(root) == clean


def test_cache_directories_are_created_private(cache: Path, tmp_path: Path) -> None:
    root = _project(tmp_path)
    _cached(root)
    directory = parse.cache_dir()
    made = [cache, directory, *(p for p in directory.iterdir() if p.is_dir())]
    assert len(made) > 2
    assert {oct(stat.S_IMODE(p.stat().st_mode)) for p in made} == {oct(0o700)}
    files = [p for p in directory.rglob("*") if p.is_file()]
    assert files and all(stat.S_IMODE(p.stat().st_mode) & 0o077 == 0 for p in files)


def test_a_directory_others_can_write_is_refused_with_one_warning(
    cache: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    root = _project(tmp_path)
    clean = _clean(root)
    cache.mkdir()
    cache.chmod(0o777)
    with caplog.at_level(logging.WARNING, logger="flydeps"):
        assert _cached(root) == clean
        assert _cached(root) == clean
    assert not any(p.is_file() for p in cache.rglob("*"))  # nothing written, nothing read
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert str(cache) in warnings[0] and f"chmod 700 {cache}" in warnings[0]
    assert "FLYDEPS_CACHE_DIR" in warnings[0]


def test_a_directory_owned_by_someone_else_is_refused(cache: Path, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        cache.mkdir(mode=0o700)
        os.chown(cache, 65534, 65534)  # nobody's
        other = cache
    else:  # a directory of root's
        other = Path("/")
    root = _project(tmp_path)
    env = {**os.environ, "FLYDEPS_CACHE_DIR": str(other)}
    command = [sys.executable, "-m", "flydeps", "graph", str(root)]
    clean = subprocess.run([*command, "--no-cache"], env=env, capture_output=True, text=True, timeout=120)
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout) == (clean.returncode, clean.stdout) == (0, clean.stdout)
    lines = [line for line in done.stderr.splitlines() if str(other) in line]
    assert len(lines) == 1 and "not using the cache directory" in lines[0] and "owned by uid" in lines[0]
    if other == cache:
        assert not any(p.is_file() for p in cache.rglob("*"))


def test_unsafe_reason_names_what_is_wrong(tmp_path: Path) -> None:
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    assert store.unsafe_reason(private) is None
    private.chmod(0o770)
    assert "group or others can write it (mode 0770)" == store.unsafe_reason(private)
    (tmp_path / "file").write_text("")
    assert store.unsafe_reason(tmp_path / "file") == "it is not a directory"


def test_every_fixture_summary_survives_the_stored_form(tmp_path: Path) -> None:
    """Encode -> JSON -> decode gives back equal records for every file we ship as input."""
    from flydeps.static.extract import extract
    from flydeps.static.summary import SUMMARY_SHAPE

    here = Path(__file__).resolve().parent
    sources = sorted((here / "fixtures").rglob("*.py")) + sorted((here.parents[1] / "examples").rglob("*.py"))
    assert len(sources) > 20
    for path in sources:
        summary = extract(path.read_bytes(), str(path))
        stored = json.loads(json.dumps(SUMMARY_SHAPE.encode(summary)))
        assert SUMMARY_SHAPE.decode(stored) == summary, path
