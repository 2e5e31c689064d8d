"""What ``flydeps migrate --write`` leaves on disk (issue 11, item 7): line endings exactly as
they were, imports where isort/ruff put them, delegating factories by choice, a second run
that changes nothing, and files that cannot change never parsed."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from libcst.codemod import TransformSkip, TransformSuccess

from flydeps.cli import main
from flydeps.migrate.tree import migrate_file, migrate_paths, migrate_source

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

BEFORE = [
    "import functools",
    "import flydsl.compiler as flyc",
    "",
    "",
    "@functools.lru_cache",
    "def compile_k(n):",
    "    @flyc.kernel",
    "    def k(x):",
    "        return x + n",
    "",
    "    return k",
]
# Line i of AFTER comes from line FROM[i] of BEFORE (None: a line the codemod adds).
AFTER = ["import flydeps", "import flydsl_runtime.flyc as flyc", *BEFORE[2:4], "@flydeps.cached_factory", *BEFORE[5:]]
FROM = [None, 1, *range(2, len(BEFORE))]
MIXED = ["\r\n", "\n", "\r"]


def _join(lines: list[str], ends: list[str], final: bool = True) -> str:
    text = "".join(line + end for line, end in zip(lines, ends))
    return text if final else text[: -len(ends[-1])]


@pytest.mark.parametrize(
    ("name", "ends", "final", "bom"),
    [
        ("lf", ["\n"] * len(BEFORE), True, False),
        ("crlf", ["\r\n"] * len(BEFORE), True, False),
        ("cr", ["\r"] * len(BEFORE), True, False),
        ("cr-no-final", ["\r"] * len(BEFORE), False, False),
        ("lf-no-final", ["\n"] * len(BEFORE), False, False),
        ("mixed", [MIXED[i % 3] for i in range(len(BEFORE))], True, False),
        ("mixed-cr-last", [MIXED[(i + 1) % 3] for i in range(len(BEFORE))], True, False),
        ("crlf-bom", ["\r\n"] * len(BEFORE), True, True),
        ("cr-bom", ["\r"] * len(BEFORE), True, True),
    ],
)
def test_write_keeps_every_line_ending(tmp_path: Path, name: str, ends: list[str], final: bool, bom: bool) -> None:
    """Each kept line keeps its own ending; an added line takes the file's first ending."""
    expected_ends = [ends[0] if source is None else ends[source] for source in FROM]
    prefix = b"\xef\xbb\xbf" if bom else b""
    path = tmp_path / "m.py"
    path.write_bytes(prefix + _join(BEFORE, ends, final).encode())
    assert main(["migrate", str(tmp_path), "--write"]) == 0
    assert path.read_bytes() == prefix + _join(AFTER, expected_ends, final).encode()
    assert main(["migrate", str(tmp_path), "--check"]) == 0  # and a second run changes nothing


@pytest.mark.parametrize(
    "tail", ["# built by the compiler\r", "# built by the compiler\r\r", "X = 1\r", "def f():\r    pass\r"]
)
def test_a_cr_file_with_nothing_to_change_is_left_byte_for_byte(tmp_path: Path, tail: str) -> None:
    """Parsed (it names ``compiler``) but nothing to rewrite: the old code dropped the final CR."""
    path = tmp_path / "m.py"
    data = f"import flydsl_runtime.flyc as flyc  # the compiler facade\r{tail}".encode()
    path.write_bytes(data)
    assert not migrate_file(str(path)).changed
    assert main(["migrate", str(tmp_path), "--write", "--check"]) == 0
    assert path.read_bytes() == data


# Each layout is ruff-I clean before migration (checked), and must stay clean after.
ISORT_CASES = {
    "full.py": (
        "#!/usr/bin/env python3\n"
        '"""Every section."""\n\n'
        "from __future__ import annotations\n\n"
        "import functools\nimport os\n\n"
        "import flydsl.compiler as flyc\nimport flydsl.expr as fx\nimport numpy as np\n\n"
        "from pkg import helpers\n\n"
        "from . import helpers as h\n\n\n"
        "@functools.lru_cache(maxsize=8)\n"
        "def compile_k(n):\n"
        "    @flyc.kernel\n"
        "    def k(x: fx.Tensor):\n"
        "        return x + n + os.getpid() + np.pi + helpers.X + h.X\n\n"
        "    return k\n"
    ),
    "no_third_party_left.py": (
        '"""The stdlib section goes away, flydeps opens the third-party one."""\n\n'
        "import functools\n\n"
        "from flydsl.compiler import kernel\n\n"
        "from . import helpers\n\n\n"
        "@functools.cache\n"
        "def compile_k(n):\n"
        "    @kernel\n"
        "    def k(x):\n"
        "        return x + n + helpers.X\n\n"
        "    return k\n"
    ),
    "split_from.py": (
        "from functools import lru_cache, reduce\n\n"
        "from flydsl import compiler as fc\n"
        "from flydsl import expr as fx\n"
        "from zzz import thing\n\n\n"
        "@lru_cache\n"
        "def compile_k(n):\n"
        "    @fc.jit\n"
        "    def k(x):\n"
        "        return reduce(fx.max, [x, n, thing])\n\n"
        "    return k\n"
    ),
    "comments.py": (
        "# header comment\n"
        "import functools\n\n"
        "import aaa\n\n"  # ruff wants a blank line above a commented import
        "# the compiler facade\n"
        "import flydsl.compiler as flyc  # trailing\n"
        "import zzz\n\n"
        "from pkg.helpers import X\n\n\n"
        "@functools.lru_cache\n"
        "def compile_k(n):\n"
        "    @flyc.kernel\n"
        "    def k(x):\n"
        "        return x + n + aaa.A + zzz.Z + X\n\n"
        "    return k\n"
    ),
    "first_party_only.py": (
        "import functools\n\n"
        "from flydsl.compiler import jit\n\n"
        "from pkg import helpers\n\n\n"
        "@functools.lru_cache\n"
        "def compile_k(n):\n"
        "    @jit\n"
        "    def k(x):\n"
        "        return helpers.X\n\n"
        "    return k\n"
    ),
}


def _ruff_command() -> list[str]:
    return [sys.executable, "-m", "ruff", "check", "--isolated", "--select", "I", "--target-version", "py310", "."]


def _ruff(cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(_ruff_command(), cwd=cwd, capture_output=True, text=True)


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="needs ruff")
def test_imports_land_where_ruff_isort_puts_them(tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "helpers.py").write_text("X = 1\n")
    for name, source in ISORT_CASES.items():
        (package / name).write_text(source)
    before = _ruff(tmp_path)
    assert before.returncode == 0, before.stdout  # the oracle's precondition: sorted to begin with
    assert main(["migrate", str(package), "--write"]) == 0
    for name, source in ISORT_CASES.items():
        after = (package / name).read_text()
        assert after != source and "import flydeps\n" in after, name
        if name == "full.py":
            assert after.startswith(
                '#!/usr/bin/env python3\n"""Every section."""\n\nfrom __future__ import annotations\n'
            )
    done = _ruff(tmp_path)
    assert done.returncode == 0, done.stdout
    snapshot = {p.name: p.read_bytes() for p in package.iterdir()}
    assert main(["migrate", str(package), "--write"]) == 0
    assert {p.name: p.read_bytes() for p in package.iterdir()} == snapshot  # idempotent


def test_delegating_factories_by_choice() -> None:
    """``_build_softmax`` only forwards to ``build_softmax_module``: migrated by default,
    kept (with a warning naming the line and the way back) under ``skip_delegating``."""
    path = EXAMPLES / "kernels" / "builders" / "softmax.py"
    source = path.read_text()
    default = migrate_source(source, str(path))
    assert isinstance(default, TransformSuccess)
    assert "@flydeps.cached_factory(maxsize=32)\ndef _build_softmax(" in default.code
    kept = migrate_source(source, str(path), skip_delegating=True)
    assert isinstance(kept, TransformSuccess)
    assert "@functools.lru_cache(maxsize=32)\ndef _build_softmax(" in kept.code
    assert "import flydeps" not in kept.code
    line = source.splitlines().index('def _build_softmax(M, N, dtype="f16"):') + 1
    assert kept.warning_messages == [
        f"{path}:{line}: delegating factory _build_softmax kept its cache (--skip-delegating): it returns its "
        "first build even after build_softmax_module changes; rerun without --skip-delegating to migrate it"
    ]


def test_cli_skip_delegating(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copy(EXAMPLES / "kernels" / "builders" / "softmax.py", tmp_path / "softmax.py")
    assert main(["migrate", str(tmp_path), "--skip-delegating", "--check"]) == 1  # the flyc import still moves
    captured = capsys.readouterr()
    assert "-@functools.lru_cache(maxsize=32)" not in captured.out
    assert "delegating factory _build_softmax kept its cache (--skip-delegating)" in captured.err
    assert main(["migrate", str(tmp_path), "--check"]) == 1
    assert "-@functools.lru_cache(maxsize=32)\n+@flydeps.cached_factory(maxsize=32)\n" in capsys.readouterr().out


def _corpus() -> list[Path]:
    dirs = [EXAMPLES, ROOT / "tests" / "static" / "fixtures"]
    return sorted(p for d in dirs for p in d.rglob("*.py") if "__pycache__" not in p.parts)


def test_the_pre_filter_only_skips_files_the_codemod_leaves_alone() -> None:
    """Oracle: the codemod itself, run on every file the pre-filter would skip."""
    from flydeps.migrate.tree import may_change

    files = _corpus()
    skipped = [p for p in files if not may_change(p.read_bytes())]
    assert len(skipped) >= 20 and len(skipped) < len(files)
    for path in skipped:
        text = path.read_text(encoding="utf-8")
        result = migrate_source(text, str(path))
        assert isinstance(result, TransformSuccess) and result.code == text, path
        assert isinstance(migrate_file(str(path)).result, TransformSkip)  # and it is not parsed


def test_a_skipped_file_is_never_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Names flydsl, but no compiler and no functools: no rewrite can apply."""
    import flydeps.migrate.tree as migrate_module

    def parse(*args: object, **kwargs: object) -> None:
        raise AssertionError("parsed")

    monkeypatch.setattr(migrate_module, "transform_module", parse)
    path = tmp_path / "m.py"
    path.write_text("import flydsl.expr as fx\n\n\ndef helper(x):\n    return fx.exp2(x)\n")
    assert isinstance(migrate_file(str(path)).result, TransformSkip)
    assert [m.changed for m in migrate_paths([str(tmp_path)])] == [False]


def test_parallel_workers_give_the_in_process_results(tmp_path: Path) -> None:
    tree = tmp_path / "kernels"
    shutil.copytree(EXAMPLES / "kernels", tree, ignore=shutil.ignore_patterns("__pycache__"))
    files = sorted(str(p) for p in tree.rglob("*.py"))
    alone = [(m.path, m.after, str(m.problem), list(m.warnings)) for m in map(migrate_file, files)]
    for workers in (1, 2):
        pooled = [(m.path, m.after, str(m.problem), list(m.warnings)) for m in migrate_paths(files, workers=workers)]
        assert pooled == alone
    assert any(m[1] != Path(m[0]).read_bytes() for m in alone)  # something to migrate


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_a_fifo_named_py_is_skipped_with_a_note(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe.py")
    (tmp_path / "good.py").write_text("import flydsl.compiler as flyc\n")
    code = "import sys\nfrom flydeps.cli import main\nsys.exit(main(sys.argv[1:]))"
    done = subprocess.run(
        [sys.executable, "-c", code, "migrate", ".", "--write"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "pipe.py:1: note: not a regular file (a FIFO, socket or device); skipped\n" in done.stderr
    assert (tmp_path / "good.py").read_text() == "import flydsl_runtime.flyc as flyc\n"


@pytest.mark.skipif(importlib.util.find_spec("ruff") is None, reason="needs ruff")
def test_the_examples_sorted_by_ruff_stay_sorted_after_migration(tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "kernels", tmp_path / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    fix = subprocess.run([*_ruff_command(), "--fix"], cwd=tmp_path, capture_output=True, text=True)
    assert _ruff(tmp_path).returncode == 0, fix.stdout
    before = {p: p.read_bytes() for p in tmp_path.rglob("*.py")}
    assert main(["migrate", str(tmp_path / "kernels"), "--write"]) == 0
    assert sum(p.read_bytes() != data for p, data in before.items()) >= 3
    done = _ruff(tmp_path)
    assert done.returncode == 0, done.stdout
