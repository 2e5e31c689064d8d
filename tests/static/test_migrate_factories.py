"""``flydeps migrate`` decides compile caches with the whole-tree graph (issue 38, item 1) and
answers unchanged files from a persistent memo (item 2).

A small package in ``tmp_path``: ``pkg/builder.py`` defines a ``@flyc.kernel`` inside
``build_module``; ``pkg/iface.py`` has an ``lru_cache`` factory that imports that builder
inside its body (the per-file rules cannot see it reaches a kernel) and an ``lru_cache``
environment reader.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flydeps.cli import main
from flydeps.migrate.memo import Memo
from flydeps.migrate.tree import migrate_paths

BUILDER = """\
import flydsl.compiler as flyc


def build_module(n):
    @flyc.kernel
    def k(x):
        return x + n

    return k
"""

IFACE = """\
import functools
import os


@functools.lru_cache(maxsize=8)
def _build_dense(n):
    from pkg.builder import build_module

    return build_module(n)


@functools.lru_cache(maxsize=None)
def _env_flag():
    return os.environ.get("PKG_FLAG", "")
"""

# lru_cache re-exported by another module: the graph resolves it, libcst's names do not
REEXPORT = """\
from functools import lru_cache
"""
VIA_REEXPORT = """\
from pkg.util import lru_cache


@lru_cache(maxsize=4)
def _build_other(n):
    from pkg.builder import build_module

    return build_module(n)
"""


def _package(root: Path, **extra: str) -> Path:
    pkg = root / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "builder.py").write_text(BUILDER)
    (pkg / "iface.py").write_text(IFACE)
    for name, text in extra.items():
        (pkg / f"{name}.py").write_text(text)
    return pkg


def _records(pkg: Path, **kwargs: object) -> dict[str, object]:
    return {Path(m.path).name: m for m in migrate_paths([str(pkg)], workers=1, **kwargs)}  # type: ignore[arg-type]


def test_cache_calling_a_builder_of_another_module_is_converted(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    iface = _records(pkg)["iface.py"]
    assert iface.changed  # type: ignore[attr-defined]
    after = iface.after.decode()  # type: ignore[attr-defined]
    assert "@flydeps.cached_factory(maxsize=8)\ndef _build_dense" in after
    assert "@functools.lru_cache(maxsize=None)\ndef _env_flag" in after  # the env reader keeps its cache
    assert iface.remaining == ()  # type: ignore[attr-defined]


def test_per_file_rules_alone_leave_it(tmp_path: Path) -> None:
    """Without the graph (as before issue 38) the factory stays: the test above is not vacuous."""
    pkg = _package(tmp_path)
    iface = _records(pkg, graph=False)["iface.py"]
    assert not iface.changed  # type: ignore[attr-defined]


def test_kept_cache_is_reported_with_file_and_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pkg = _package(tmp_path)
    iface = _records(pkg)["iface.py"]
    notes = [str(n) for n in iface.kept]  # type: ignore[attr-defined]
    line = IFACE.splitlines().index("def _env_flag():") + 1
    assert notes == [
        f"{pkg / 'iface.py'}:{line}: note: kept functools.lru_cache on _env_flag: reaches no kernel or launcher"
    ]
    assert main(["migrate", str(pkg)]) == 0
    err = capsys.readouterr().err
    assert f"iface.py:{line}: note: kept functools.lru_cache on _env_flag: reaches no kernel or launcher" in err


def test_check_fails_while_a_kernel_reaching_cache_remains(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pkg = _package(tmp_path, util=REEXPORT, other=VIA_REEXPORT)
    assert main(["migrate", "--write", str(pkg)]) == 0
    capsys.readouterr()
    assert "@flydeps.cached_factory(maxsize=8)" in (pkg / "iface.py").read_text()
    assert (pkg / "other.py").read_text() == VIA_REEXPORT  # libcst cannot tell it is functools' lru_cache
    assert main(["migrate", "--check", str(pkg)]) == 1
    err = capsys.readouterr().err
    line = VIA_REEXPORT.splitlines().index("def _build_other(n):") + 1
    assert f"other.py:{line}: this cache reaches pkg.builder:build_module.<locals>.k but stays a cache" in err
    (pkg / "other.py").write_text(VIA_REEXPORT.replace("@lru_cache(maxsize=4)", "@flydeps.cached_factory(maxsize=4)"))
    (pkg / "other.py").write_text("import flydeps\n" + (pkg / "other.py").read_text())
    assert main(["migrate", "--check", str(pkg)]) == 0, capsys.readouterr().err


def test_skip_delegating_keeps_the_cross_module_factory_with_a_warning(tmp_path: Path) -> None:
    pkg = _package(tmp_path)
    iface = _records(pkg, skip_delegating=True)["iface.py"]
    assert not iface.changed  # type: ignore[attr-defined]
    assert any("_build_dense kept its cache (--skip-delegating)" in w for w in iface.warnings)  # type: ignore[attr-defined]
    assert iface.remaining == ()  # type: ignore[attr-defined]


def test_single_file_outside_a_package_keeps_the_per_file_rules(tmp_path: Path) -> None:
    file = tmp_path / "lone.py"
    file.write_text(
        BUILDER + "\n\nimport functools\n\n\n@functools.lru_cache\ndef _get(n):\n    return build_module(n)\n"
    )
    (record,) = migrate_paths([str(file)], workers=1)
    assert "@flydeps.cached_factory\ndef _get" in record.after.decode()


def _check_hits(pkg: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    capsys.readouterr()
    status = main(["migrate", "--check", "-v", str(pkg)])
    hits = [line for line in capsys.readouterr().err.splitlines() if line.startswith("migrate memo hit: ")]
    return status, hits


def test_noop_check_answers_from_the_memo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pkg = _package(tmp_path)
    assert main(["migrate", "--write", str(pkg)]) == 0  # seeds the memo with the written files
    status, hits = _check_hits(pkg, capsys)
    assert status == 0
    assert [h for h in hits if h.endswith("iface.py")]  # the written file, seeded by --write
    # an edited file misses (and is migrated again); the others still hit
    (pkg / "iface.py").write_text(
        (pkg / "iface.py").read_text() + "\n\n@functools.lru_cache\ndef _x():\n    return 1\n"
    )
    status, hits = _check_hits(pkg, capsys)
    assert status == 0
    assert not [h for h in hits if h.endswith("iface.py")]
    status, hits = _check_hits(pkg, capsys)  # the edited file's outcome is memoized in turn
    assert status == 0 and [h for h in hits if h.endswith("iface.py")]


def test_memo_never_answers_for_changed_migrate_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flydeps.migrate import memo as migrate_state

    memo = Memo.open("skip_delegating=False")
    data = b"x = 1\n"
    memo.put("a.py", data, migrate_state.MemoRecord(("w",), ()))
    assert memo.get("a.py", data) is not None
    assert memo.get("a.py", data + b"\n") is None  # other bytes
    assert Memo.open("skip_delegating=True").get("a.py", data) is None  # other options
    monkeypatch.setattr(migrate_state, "code_digest", lambda: "another version")
    assert memo.get("a.py", data) is None


def test_damaged_memo_entry_is_ignored_with_a_warning(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pkg = _package(tmp_path)
    assert main(["migrate", "--write", str(pkg)]) == 0
    written = (pkg / "iface.py").read_bytes()
    memo = Memo.open("skip_delegating=False")
    entry = memo._file(memo.key(str(pkg / "iface.py"), written))
    assert entry is not None and entry.exists()
    entry.write_bytes(entry.read_bytes()[:-5] + b"XXXXX")
    capsys.readouterr()
    assert main(["migrate", "--check", str(pkg)]) == 0
    assert "ignoring a damaged memo entry" in capsys.readouterr().err
    assert (pkg / "iface.py").read_bytes() == written  # nothing lost
    assert memo.get(str(pkg / "iface.py"), written) is not None  # rewritten by the run


def test_memo_hit_is_not_used_when_the_graph_now_reaches_a_kept_cache(tmp_path: Path) -> None:
    """A file's bytes unchanged, another module edited so that its cache now reaches a kernel:
    the memo (which knows nothing of the graph) must not answer 'nothing to change'."""
    pkg = _package(tmp_path)
    (pkg / "builder.py").write_text("def build_module(n):\n    return n\n")
    memo = Memo.open("skip_delegating=False")
    first = _records(pkg, memo=memo)["iface.py"]
    assert not first.changed  # type: ignore[attr-defined]
    (pkg / "builder.py").write_text(BUILDER)
    again = _records(pkg, memo=memo)["iface.py"]
    assert again.changed  # type: ignore[attr-defined]
    assert os.path.exists(pkg / "iface.py")


def test_progress_line_only_after_the_delay(capsys: pytest.CaptureFixture[str]) -> None:
    from flydeps.cli import _Progress

    quiet = _Progress("flydeps migrate", delay=3600.0)
    quiet(1, 4)
    assert capsys.readouterr().err == ""
    shown = _Progress("flydeps migrate", delay=0.0)
    shown(1, 4)
    shown.clear()
    assert capsys.readouterr().err == "\rflydeps migrate: 1/4 files (25%)\r\x1b[K"


def test_no_progress_line_when_stderr_is_not_a_terminal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pkg = _package(tmp_path)
    assert main(["migrate", str(pkg)]) == 0
    assert "\r" not in capsys.readouterr().err
