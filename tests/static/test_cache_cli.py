"""``flydeps cache stats | clear | prune`` over caches a real run wrote.

The caches are populated by really running the static analysis (and, where FlyDSL and a
ROCm compile root are present, a real compile in a new process, as tests/runtime's index
tests do). The oracle for what a cache holds is an independent walk of its directory (every
``static-v*/xx/*.json`` file, every row by SQLite); for "nothing lost" the files and rows
before and after; for "oldest first" access times set explicitly with ``os.utime``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from test_cache import FACTORY

from flydeps import settings
from flydeps.cli import main
from flydeps.static.analyze import analyze
from flydeps.store import caches

HELPER = "def helper_{i}(n):\n    return n + {i}\n"


def _project(base: Path, files: int = 12) -> Path:
    root = base / "pkg"
    root.mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "factory.py").write_text(FACTORY)
    (root / "helpers.py").write_text("def helper(n):\n    return n + 1\n")
    for i in range(files):
        (root / f"mod{i}.py").write_text(HELPER.format(i=i) * 20 + f"from .helpers import helper\nX{i} = {i}\n")
    return root


@pytest.fixture()
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cache"
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(root))
    monkeypatch.setenv("FLYDSL_RUNTIME_CACHE_DIR", str(tmp_path / "flydsl-cache"))
    return root


def _entries(cache: Path) -> dict[Path, int]:
    """Every parse-cache entry on disk (the oracle) and its size."""
    return {p: p.stat().st_size for p in cache.glob("static-v*/*/*.json")}


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["cache", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _stats(capsys: pytest.CaptureFixture[str]) -> dict:
    code, out, err = _run(capsys, "stats", "--json")
    assert code == 0, err
    return json.loads(out)


def _memos(cache: Path) -> list[Path]:
    return [*cache.glob("origin/*.marshal"), *cache.glob("codegen/*/*.marshal")]


def _by_name(document: dict) -> dict[str, dict]:
    return {c["name"]: c for c in document["caches"]}


def test_stats_counts_what_an_analysis_wrote(cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _project(tmp_path)
    analyze([str(root)])
    on_disk = _entries(cache)
    assert len(on_disk) >= 14  # one summary per file and the result: the count below is not vacuous

    document = _stats(capsys)
    assert document["schema"] == caches.SCHEMA == "flydeps.cache-stats/1"
    found = _by_name(document)
    assert list(found) == ["parse", "memo", "index", "artifacts"]
    parse = found["parse"]
    assert parse["entries"] == len(on_disk)
    assert parse["bytes"] == sum(on_disk.values())
    assert parse["limit"] == 1 << 30
    assert parse["oldest"] <= parse["newest"]
    assert parse["locations"] == [str(cache / "static-v*")]
    assert found["memo"]["entries"] == len(_memos(cache))
    assert found["index"]["entries"] == 0 and found["artifacts"]["entries"] == 0
    assert document["total"] == {
        "entries": sum(c["entries"] for c in document["caches"]),
        "bytes": sum(c["bytes"] for c in document["caches"]),
    }
    for entry in document["caches"]:  # the schema: every field, its type
        assert set(entry) == {"name", "what", "locations", "entries", "bytes", "limit", "oldest", "newest", "problem"}
        assert isinstance(entry["entries"], int) and isinstance(entry["bytes"], int)
        assert entry["problem"] is None

    code, out, _ = _run(capsys, "stats")
    assert code == 0 and f"entries   {len(on_disk)}," in out and out.rstrip().splitlines()[-1].startswith("total: ")


def test_clear_empties_the_caches_and_the_next_run_is_exact(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _project(tmp_path)
    first = analyze([str(root)])
    assert _entries(cache)
    code, out, err = _run(capsys, "clear", "parse", "memo")
    assert code == 0, err
    assert _entries(cache) == {}
    assert _memos(cache) == []
    assert out.startswith("parse: ") and "memo: " in out
    assert _by_name(_stats(capsys))["parse"]["entries"] == 0

    again = analyze([str(root)])  # recomputed, and written again
    uncached = analyze([str(root)], use_cache=False)
    assert again.graph == uncached.graph == first.graph
    assert _entries(cache)


def test_prune_evicts_least_recently_used_first(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    analyze([str(_project(tmp_path))])
    entries = sorted(_entries(cache))
    for age, path in enumerate(entries):  # entries[0] used longest ago
        os.utime(path, (1_000_000 + age * 100, 1_000_000 + age * 100))
    sizes = _entries(cache)
    total = sum(sizes.values())
    oldest = entries[:5]
    limit = total - sum(sizes[p] for p in oldest[:4]) - 1  # the 4 oldest are not enough: the 5th goes too

    code, out, err = _run(capsys, "prune", "--max-size", str(limit), "parse")
    assert code == 0, err
    left = _entries(cache)
    assert set(left) == set(entries[5:])
    assert sum(left.values()) <= limit
    assert out.strip() == f"parse: 5 entries, {caches_bytes(sum(sizes[p] for p in oldest))} deleted"

    code, _, err = _run(capsys, "prune", "parse")  # under its default limit: nothing to do
    assert code == 0 and _entries(cache) == left


def caches_bytes(n: int) -> str:
    from flydeps.cli import _bytes

    return _bytes(n)


def test_prune_size_units() -> None:
    assert caches.parse_size("500M") == 500 << 20
    assert caches.parse_size("2G") == 2 << 30
    assert caches.parse_size("1.5k") == 1536
    assert caches.parse_size("64KiB") == 64 << 10
    assert caches.parse_size("0") == 0


def test_parse_cache_limit_is_enforced_while_writing(
    cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a limit, analysing 40 files leaves every entry; with one, checked on each
    write here, the cache never ends above it."""
    root = _project(tmp_path, files=40)
    monkeypatch.setattr(caches, "WRITE_CHECK_EVERY", 1)
    monkeypatch.setattr(caches, "_until_check", 1)
    monkeypatch.setenv("FLYDEPS_PARSE_CACHE_MAX_BYTES", "20000")
    result = analyze([str(root)])
    sizes = _entries(cache)
    assert 0 < sum(sizes.values()) <= 20000
    assert len(sizes) < 40  # entries were evicted (one summary per file would be 43)
    assert result.graph == analyze([str(root)], use_cache=False).graph  # evictions cost time, never answers


def test_parse_cache_limit_setting_is_documented() -> None:
    assert settings.SETTINGS["FLYDEPS_PARSE_CACHE_MAX_BYTES"].default == str(1 << 30)
    assert caches.limit("parse") == 1 << 30


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (("clear", "parse", "bogus"), "'bogus'"),
        (("prune", "--max-size", "12Q"), "--max-size '12Q'"),
        (("prune", "--max-size=-5M"), "--max-size '-5M'"),
        (("stats", "nope"), "'nope'"),
    ],
)
def test_bad_arguments_exit_2_and_delete_nothing(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: tuple[str, ...], named: str
) -> None:
    analyze([str(_project(tmp_path))])
    before = _entries(cache)
    code, out, err = _run(capsys, *argv)
    assert code == 2
    assert named in err and out == ""
    assert _entries(cache) == before


@pytest.mark.parametrize("where", ["root", "static"])
def test_untrusted_directory_is_refused_before_anything_is_deleted(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], where: str
) -> None:
    analyze([str(_project(tmp_path))])
    before = _entries(cache)
    memo_before = sorted(_memos(cache))
    directory = cache if where == "root" else next(cache.glob("static-v*"))
    directory.chmod(0o770)  # group can write it: whoever can write a cache decides what is believed
    try:
        for argv in (("clear",), ("prune", "--max-size", "0"), ("clear", "memo", "parse")):
            code, out, err = _run(capsys, *argv)
            assert code == 2, argv
            assert str(directory) in err and "nothing was deleted" in err and "group or others can write" in err
            assert _entries(cache) == before
            assert sorted(_memos(cache)) == memo_before
        code, out, err = _run(capsys, "stats", "--json")
        assert code == 1 and str(directory) in err
        problems = [c["problem"] for c in json.loads(out)["caches"] if c["problem"]]
        assert problems and all(str(directory) in p for p in problems)
    finally:
        directory.chmod(0o700)


def test_symlinks_inside_the_cache_are_not_followed(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    analyze([str(_project(tmp_path))])
    real = _entries(cache)
    outside = tmp_path / "outside"
    (outside / "ab").mkdir(parents=True)
    victim = outside / "ab" / "cdef.json"  # looks like an entry flydeps wrote: deleted if reached
    victim.write_bytes(b"flydeps-store-1 summary-v1-x abcdef\n[]")
    marshal_victim = outside / ("0" * 64 + ".marshal")
    marshal_victim.write_bytes(b"flydeps-store-1 codegen-x " + b"0" * 64 + b"\n")
    static = next(cache.glob("static-v*"))
    (cache / "static-v99-planted").symlink_to(outside)  # a whole cache directory
    (static / "zz").symlink_to(outside / "ab")  # a shard directory
    shard = next(p for p in static.iterdir() if p.is_dir() and not p.is_symlink())
    (shard / "link.json").symlink_to(victim)  # one entry
    (cache / "codegen").mkdir(mode=0o700, exist_ok=True)
    (cache / "codegen" / "planted").symlink_to(outside)
    artifacts = tmp_path / "flydsl-cache"
    artifacts.mkdir(mode=0o700)
    (artifacts / "kernel").symlink_to(outside)
    pkl = outside / ("1" * 64 + ".pkl")
    pkl.write_bytes(b"not yours")

    stats = _by_name(_stats(capsys))
    assert stats["parse"]["entries"] == len(real)  # nothing reached through a symlink is counted
    assert stats["artifacts"]["entries"] == 0
    code, _, err = _run(capsys, "clear")
    assert code == 0, err
    assert victim.read_bytes().startswith(b"flydeps-store-1") and marshal_victim.exists() and pkl.exists()
    assert (shard / "link.json").is_symlink() and (static / "zz").is_symlink()  # left alone, not removed
    assert (cache / "static-v99-planted").is_symlink() and (artifacts / "kernel").is_symlink()
    assert not set(_entries(cache)) & set(real)  # every real entry went


def test_files_flydeps_did_not_write_are_kept(cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    analyze([str(_project(tmp_path))])
    static = next(cache.glob("static-v*"))
    shard = next(p for p in static.iterdir() if p.is_dir())
    foreign = shard / "notes.json"  # the right name, not an entry's header
    foreign.write_text('{"mine": true}')
    other = cache / "README.txt"
    other.write_text("keep me")
    code, _, err = _run(capsys, "clear")
    assert code == 0, err
    assert foreign.read_text() == '{"mine": true}' and other.read_text() == "keep me"


# --- the runtime index and FlyDSL's artifacts, from real compiles ---------------------

ROCM = Path("/opt/flydeps-rocm")
RUNTIME = Path(__file__).resolve().parents[1] / "runtime"


def _compile(tmp_path: Path, package: str, *more: str) -> dict:
    """One new process calling ``launcher`` under COMPILE_ONLY=1 (tests/runtime/index_child.py)."""
    env = dict(
        os.environ,
        ROCM_PATH=str(ROCM),
        ARCH="gfx942",
        COMPILE_ONLY="1",
        FLYDSL_RUNTIME_ENABLE_CACHE="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    command = [
        sys.executable,
        str(RUNTIME / "index_child.py"),
        str(tmp_path / "src"),
        package,
        "reduce",
        "partial_sum",
        *more,
    ]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _rows(cache: Path) -> list[tuple[str, float]]:
    with sqlite3.connect(cache / caches.INDEX_NAME) as conn:
        return [(str(k), float(c)) for k, c in conn.execute("SELECT key, created FROM specializations")]


@pytest.mark.flydsl
def test_runtime_index_and_artifacts(
    cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("flydsl")
    if not (ROCM / "llvm/bin/ld.lld").exists():
        pytest.skip(f"no ROCm compile root at {ROCM}")
    from flydsl_runtime.persist import index

    assert caches.INDEX_NAME == index.INDEX_NAME
    package = f"fdkc_{uuid.uuid4().hex[:8]}"
    shutil.copytree(RUNTIME / "kernels" / "fdk", tmp_path / "src" / package)
    assert _compile(tmp_path, package)["traces"] == 1
    (first,) = _rows(cache)
    assert _compile(tmp_path, package, "--dtype", "float16")["traces"] == 1
    rows = _rows(cache)
    assert len(rows) == 2
    second = next(k for k, _ in rows if k != first[0])
    artifacts = sorted((tmp_path / "flydsl-cache").glob("*/*.pkl"))
    assert len(artifacts) == 2

    found = _by_name(_stats(capsys))
    assert found["memo"]["entries"] == len(_memos(cache)) >= 1  # the children's codegen and origin memos
    assert found["memo"]["bytes"] == sum(p.stat().st_size for p in _memos(cache))
    assert found["index"]["entries"] == 2
    assert found["index"]["oldest"] == min(c for _, c in rows) and found["index"]["newest"] == max(c for _, c in rows)
    assert found["artifacts"]["entries"] == 2
    assert found["artifacts"]["bytes"] == sum(p.stat().st_size for p in artifacts)

    # prune: the oldest row goes first (its created time set older explicitly)
    with sqlite3.connect(cache / caches.INDEX_NAME) as conn:
        conn.execute("UPDATE specializations SET created = 1000 WHERE key = ?", (second,))
        page, pages, free = (
            conn.execute(f"PRAGMA {n}").fetchone()[0] for n in ("page_size", "page_count", "freelist_count")
        )
    removed = caches.prune(["index"], (pages - free) * page - 1)
    assert removed[0].entries == 1
    assert [k for k, _ in _rows(cache)] == [first[0]]

    # clear artifacts while another process holds FlyDSL's lock on one: that one is kept (exit 1)
    held = artifacts[0].with_suffix(".lock")
    monkeypatch.setattr(caches, "LOCK_TIMEOUT", 0.2)
    with held.open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)
        code, out, err = _run(capsys, "clear", "artifacts")
    assert code == 1 and "in use" in err and str(artifacts[0]) in err
    assert artifacts[0].exists() and not artifacts[1].exists()
    code, out, err = _run(capsys, "clear", "artifacts", "index")
    assert code == 0, err
    assert not artifacts[0].exists() and _rows(cache) == []
    assert held.exists()  # lock files stay: removing one another process opens would break the lock

    # the store is intact: a new process traces and records, the next one loads the row
    assert _compile(tmp_path, package)["traces"] == 1
    again = _compile(tmp_path, package)
    assert again["traces"] == 0 and again["loaded"] is True


def test_damaged_index_is_named_and_left_as_it_is(cache: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache.mkdir(mode=0o700)
    damaged = cache / caches.INDEX_NAME
    damaged.write_bytes(b"not an SQLite file at all" * 100)
    damaged.chmod(0o600)
    code, out, err = _run(capsys, "stats", "--json")
    assert code == 1 and str(damaged) in err
    assert _by_name(json.loads(out))["index"]["problem"] is not None
    for argv in (("clear", "index"), ("prune", "--max-size", "0", "index")):
        code, out, err = _run(capsys, *argv)
        assert code == 1 and str(damaged) in err and "left as it is" in err
        assert damaged.read_bytes() == b"not an SQLite file at all" * 100


def test_index_symlink_is_refused(cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cache.mkdir(mode=0o700)
    elsewhere = tmp_path / "elsewhere.sqlite3"
    with sqlite3.connect(elsewhere) as conn:
        conn.execute("CREATE TABLE specializations (key TEXT, created REAL)")
        conn.execute("INSERT INTO specializations VALUES ('k', 1.0)")
    conn.close()
    (cache / caches.INDEX_NAME).symlink_to(elsewhere)
    code, _, err = _run(capsys, "clear", "index")
    assert code == 2 and "symbolic link" in err and "nothing was deleted" in err
    with sqlite3.connect(elsewhere) as conn:
        assert conn.execute("SELECT count(*) FROM specializations").fetchone()[0] == 1
    conn.close()


def test_the_migrate_memo_is_a_memo_cache_too(cache: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``flydeps migrate --check`` remembers the files that need nothing; those files are
    counted and cleared with the other memos (every cache flydeps writes, issue 38)."""
    project = tmp_path / "mig"
    project.mkdir()
    (project / "k.py").write_text(
        "import functools\n\nimport flydsl_runtime.flyc as flyc\n\n\n@functools.lru_cache\ndef env_table(n):\n"
        "    return n\n"
    )
    main(["migrate", "--check", str(project)])
    capsys.readouterr()
    migrate_memos = list(cache.glob("migrate-*/*/*"))
    assert migrate_memos, "migrate wrote no memo: nothing to count"
    memo = _by_name(_stats(capsys))["memo"]
    assert memo["entries"] == len(_memos(cache)) + len(migrate_memos)
    assert str(cache / "migrate-*") in memo["locations"]
    code, _, err = _run(capsys, "clear", "memo")
    assert code == 0, err
    assert list(cache.glob("migrate-*/*/*")) == []
