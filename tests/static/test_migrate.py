"""``flydeps migrate``: the libcst codemod, its per-file results and the CLI around it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import libcst
import pytest
from libcst.codemod import TransformFailure, TransformSkip, TransformSuccess

from flydeps.cli import main
from flydeps.migrate import tree as migrate_module
from flydeps.migrate.tree import migrate_file, migrate_paths, migrate_source

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
KERNEL = "import flydsl.compiler as flyc\n"


def _factory(decorator: str, imports: str, kernel: str = "@flyc.kernel") -> str:
    return (
        f"{imports}\n\n"
        f"{decorator}\n"
        "def compile_k(n):\n"
        f"    {kernel}\n"
        "    def k(x):\n"
        "        return x + n\n"
        "    return k\n"
    )


def _migrated(source: str) -> str:
    result = migrate_source(source, "m.py")
    assert isinstance(result, TransformSuccess), result
    return result.code


def _decorators(code: str) -> list[str]:
    return [line.strip() for line in code.splitlines() if line.strip().startswith("@")]


@pytest.mark.parametrize(
    ("imports", "decorator", "expected"),
    [
        ("import functools\n", "@functools.lru_cache", "@flydeps.cached_factory"),
        ("import functools\n", "@functools.lru_cache()", "@flydeps.cached_factory()"),
        ("import functools\n", "@functools.lru_cache(maxsize=256)", "@flydeps.cached_factory(maxsize=256)"),
        ("import functools\n", "@functools.lru_cache(256, typed=True)", "@flydeps.cached_factory(256, typed=True)"),
        ("import functools as ft\n", "@ft.lru_cache(maxsize=None)", "@flydeps.cached_factory(maxsize=None)"),
        ("from functools import lru_cache\n", "@lru_cache", "@flydeps.cached_factory"),
        ("from functools import lru_cache as memo\n", "@memo(maxsize=8)", "@flydeps.cached_factory(maxsize=8)"),
        ("import functools\n", "@functools.cache", "@flydeps.cached_factory(maxsize=None)"),
        ("from functools import cache as c\n", "@c", "@flydeps.cached_factory(maxsize=None)"),
    ],
)
def test_every_factory_decorator_form(imports: str, decorator: str, expected: str) -> None:
    code = _migrated(_factory(decorator, imports + KERNEL))
    assert _decorators(code) == [expected, "@flyc.kernel"]
    assert code.count("import flydeps\n") == 1
    assert "functools" not in code  # the import was used by the decorator only
    assert code.startswith("import flydeps\nimport flydsl_runtime.flyc as flyc\n")  # isort order


@pytest.mark.parametrize(
    ("imports", "kernel"),
    [
        ("import flydsl.compiler as flyc\n", "@flyc.kernel"),
        ("import flydsl.compiler as flyc\n", "@flyc.jit"),
        ("import flydsl.compiler as flyc\n", "@flyc.jit(on_drift='raise')"),
        ("import flydsl.compiler as fc\n", "@fc.kernel()"),
        ("from flydsl.compiler import kernel\n", "@kernel"),
        ("from flydsl.compiler import jit as launcher\n", "@launcher()"),
        ("from flydsl import compiler as dsl\n", "@dsl.jit"),
        ("import flydsl\n", "@flydsl.compiler.kernel"),
        ("import flydsl_runtime.flyc as flyc\n", "@flyc.kernel"),
        ("from flydsl_runtime.flyc import jit\n", "@jit"),
    ],
)
def test_every_kernel_decorator_form_makes_a_factory(imports: str, kernel: str) -> None:
    code = _migrated(_factory("@functools.lru_cache(maxsize=4)", "import functools\n" + imports, kernel))
    assert _decorators(code) == ["@flydeps.cached_factory(maxsize=4)", kernel]


def test_kernel_at_any_depth_and_methods() -> None:
    source = (
        "import functools\nimport flydsl.compiler as flyc\n\n"
        "class Builder:\n"
        "    @functools.lru_cache(maxsize=2)\n"
        "    def build(self, n):\n"
        "        def outer():\n"
        "            class Holder:\n"
        "                def make(self):\n"
        "                    @flyc.jit\n"
        "                    def launch(x):\n"
        "                        return x\n"
        "                    return launch\n"
        "            return Holder\n"
        "        return outer\n"
    )
    assert _decorators(_migrated(source)) == ["@flydeps.cached_factory(maxsize=2)", "@flyc.jit"]


def test_plain_memoization_is_left_alone() -> None:
    source = (
        "import functools\nfrom functools import lru_cache\nimport flydsl.compiler as flyc\n"
        "from mylib import cache\n\n"
        "@functools.lru_cache(maxsize=None)\n"
        "def table(n):\n"
        "    return [i * i for i in range(n)]\n\n"
        "@lru_cache\n"
        "def launches(k):\n"
        "    return k()  # calls a kernel, defines none\n\n"
        "@cache\n"  # not functools.cache
        "def other():\n"
        "    @flyc.kernel\n"
        "    def k():\n"
        "        pass\n\n"
        "@functools.cache\n"
        "def compile_k():\n"
        "    @flyc.kernel\n"
        "    def k():\n"
        "        pass\n"
    )
    code = _migrated(source)
    assert _decorators(code) == [
        "@functools.lru_cache(maxsize=None)",
        "@lru_cache",
        "@cache",
        "@flyc.kernel",
        "@flydeps.cached_factory(maxsize=None)",
        "@flyc.kernel",
    ]
    assert "import functools\nfrom functools import lru_cache\n" in code  # still used


def test_unused_lru_cache_name_is_removed_but_other_functools_names_kept() -> None:
    imports = "from functools import lru_cache, reduce\n" + KERNEL
    code = _migrated(_factory("@lru_cache", imports) + "\nTOTAL = reduce(int.__add__, [1])\n")
    assert code.startswith("from functools import reduce\n")
    assert "lru_cache" not in code


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("import flydsl.compiler as flyc\n", "import flydsl_runtime.flyc as flyc\n"),
        ("import os, flydsl.compiler as fc  # why\n", "import os, flydsl_runtime.flyc as fc  # why\n"),
        ("from flydsl import compiler as flyc\n", "import flydsl_runtime.flyc as flyc\n"),
        ("from flydsl import compiler\n", "import flydsl_runtime.flyc as compiler\n"),
        ("from flydsl.compiler import jit, kernel\n", "from flydsl_runtime.flyc import jit, kernel\n"),
        ("from flydsl.compiler import (\n    jit,  # a\n)\n", "from flydsl_runtime.flyc import (\n    jit,  # a\n)\n"),
        ("from flydsl.compiler import *\n", "from flydsl_runtime.flyc import *\n"),
        (
            "from flydsl import compiler as fc, expr as fx\n",
            "import flydsl_runtime.flyc as fc\nfrom flydsl import expr as fx\n",  # isort: `import` first
        ),
        ("from flydsl.compiler.jit_function import JitFunction\n", None),
        ("from flydsl.compiler import _private\n", None),
        ("from flydsl.compiler import jit_function as jf\n", None),  # a submodule: not in the facade
        (
            "import flydsl.compiler as flyc\n"
            "from flydsl.compiler.jit_function import JitFunction\nflyc.jit(JitFunction)\n",
            "import flydsl_runtime.flyc as flyc\n"
            "from flydsl.compiler.jit_function import JitFunction\nflyc.jit(JitFunction)\n",
        ),
        ("from .flydsl.compiler import jit\n", None),
        ("import flydsl.expr as fx\n", None),
    ],
)
def test_import_rewrites(before: str, after: str | None) -> None:
    result = migrate_source(before, "m.py")
    assert isinstance(result, TransformSuccess)
    assert result.code == (before if after is None else after)
    assert not result.warning_messages


@pytest.mark.parametrize(
    ("source", "warning"),
    [
        ("import flydsl.compiler\n", "m.py:1: `import flydsl.compiler` has no alias, left unchanged; write `import"),
        ("\nfrom flydsl.compiler import jit, _x\n", "m.py:2: left unchanged: flydsl_runtime.flyc does not export _x; "),
        (
            "import flydsl.compiler as flyc\nX = flyc.jit_function.JitFunction\n",
            "m.py:1: left unchanged: the file uses flydsl.compiler.jit_function, which flydsl_runtime.flyc does not",
        ),
        (
            "from flydsl import compiler as fc\nfc.ast_rewriter, fc.mlir_utils.x, fc.jit\n",
            "m.py:1: left unchanged: the file uses flydsl.compiler.ast_rewriter, .mlir_utils, which",
        ),
    ],
)
def test_what_cannot_be_migrated_is_left_with_a_warning(source: str, warning: str) -> None:
    result = migrate_source(source, "m.py")
    assert isinstance(result, TransformSuccess) and result.code == source
    assert [w[: len(warning)] for w in result.warning_messages] == [warning]


@pytest.mark.flydsl
@pytest.mark.skipif(importlib.util.find_spec("flydsl") is None, reason="needs FlyDSL installed")
def test_facade_names_are_what_the_facade_exports() -> None:
    code = "import json, flydsl_runtime.flyc as f; print(json.dumps(sorted(f.__all__)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert set(json.loads(done.stdout)) == migrate_module.FACADE_NAMES


def test_the_facade_package_itself_is_skipped(tmp_path: Path) -> None:
    package = tmp_path / "flydsl_runtime"
    package.mkdir()
    (package / "flyc.py").write_text("import flydsl.compiler as _flydsl_compiler\nfrom flydsl.compiler import *\n")
    (tmp_path / "user.py").write_text("import flydsl.compiler as flyc\n")
    outcome = {Path(m.path).name: m for m in migrate_paths([str(tmp_path)])}
    assert isinstance(outcome["flyc.py"].result, TransformSkip) and not outcome["flyc.py"].changed
    assert outcome["user.py"].changed


def test_comments_and_formatting_are_kept_byte_for_byte(tmp_path: Path) -> None:
    body = (
        "# -*- coding: latin-1 -*-\r\n"
        '"""Caf\xe9 kernels."""  \r\n'
        "import   functools   # the cache\r\n"
        "import flydsl.compiler   as   flyc\r\n"
        "\r\n"
        "\r\n"
        "@functools.lru_cache( maxsize = 64 )   # keep\r\n"
        "def compile_k( n ):  # odd spacing\r\n"
        "    @flyc.kernel\r\n"
        "    def k(x):\r\n"
        "        return x+n   # \xe9\r\n"
        "    return k\r\n"
        "\x0c\r\n"
        "TAIL = ( 1,\r\n"
        "         2 )"
    )
    path = tmp_path / "m.py"
    path.write_bytes(body.encode("latin-1"))
    migration = migrate_file(str(path))
    expected = (
        body.replace("import   functools   # the cache\r\n", "")
        .replace(
            "import flydsl.compiler   as   flyc\r\n", "import flydeps\r\nimport flydsl_runtime.flyc   as   flyc\r\n"
        )
        .replace("@functools.lru_cache( maxsize = 64 )", "@flydeps.cached_factory( maxsize = 64 )")
    )
    assert migration.after == expected.encode("latin-1")
    assert (
        "-@functools.lru_cache( maxsize = 64 )   # keep\r\n+@flydeps.cached_factory( maxsize = 64 )" in migration.diff()
    )


def test_utf8_bom_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_bytes(b"\xef\xbb\xbfimport flydsl.compiler as flyc\nX = '\xc3\xa9'")
    after = migrate_file(str(path)).after
    assert after == b"\xef\xbb\xbfimport flydsl_runtime.flyc as flyc\nX = '\xc3\xa9'"


def test_diff_marks_a_changed_last_line_without_newline(tmp_path: Path) -> None:
    path = tmp_path / "m.py"
    path.write_text("import flydsl.compiler as flyc")
    diff = migrate_file(str(path)).diff()
    assert diff.startswith(f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n")
    assert diff.endswith(
        "-import flydsl.compiler as flyc\n\\ No newline at end of file\n"
        "+import flydsl_runtime.flyc as flyc\n\\ No newline at end of file\n"
    )


def _example_tree(tmp_path: Path) -> Path:
    tree = tmp_path / "kernels"
    # The original families; other subpackages (builders, realworld) have tests of their own.
    for name in ("__init__.py", "attention", "common", "norm"):
        source = EXAMPLES / "kernels" / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            tree.mkdir(exist_ok=True)
            shutil.copy(source, tree / name)
    return tree


def test_a_delegating_lru_cache_entry_point_becomes_a_factory() -> None:
    """``@lru_cache def _build_x(...): return build_x(...)`` is the entry point users call:
    it is migrated like a factory defining the kernel itself (issue 9, point 7)."""
    source = (EXAMPLES / "kernels" / "builders" / "softmax.py").read_text()
    code = migrate_source(source).code  # type: ignore[union-attr]
    assert "@flydeps.cached_factory(maxsize=32)\ndef _build_softmax(" in code
    plain = "import functools\nimport flydsl\n\ndef helper(n):\n    return n\n\n"
    plain += "@functools.lru_cache\ndef memo(n):\n    return helper(n)\n"
    # ``helper`` defines no kernel: plain memoization, kept.
    assert migrate_source(plain).code.count("lru_cache") == 1  # type: ignore[union-attr]


def test_idempotent_on_the_examples(tmp_path: Path) -> None:
    tree = _example_tree(tmp_path)
    first = {m.path: m for m in migrate_paths([str(tree)])}
    assert sorted(Path(p).name for p, m in first.items() if m.changed) == ["flash.py", "rmsnorm.py"]
    assert all(m.problem is None and not m.warnings for m in first.values())
    for migration in first.values():
        assert migration.write() is None
    assert not any(m.changed for m in migrate_paths([str(tree)]))
    unmentioned = first[str(tree / "__init__.py")]
    assert isinstance(unmentioned.result, TransformSkip)  # no `flydsl` in it: not even parsed


def _snapshot(tree: Path) -> dict[str, tuple[bytes, int, int, int]]:
    return {
        p.name: (p.read_bytes(), p.stat().st_ino, p.stat().st_mtime_ns, stat.S_IMODE(p.stat().st_mode))
        for p in sorted(tree.rglob("*"))
        if p.is_file()
    }


def test_write_replaces_only_changed_files_atomically(tmp_path: Path, capsys) -> None:
    tree = _example_tree(tmp_path)
    flash = tree / "attention" / "flash.py"
    flash.chmod(0o640)
    before = _snapshot(tree)
    assert main(["migrate", str(tree), "--write"]) == 0
    after = _snapshot(tree)
    assert sorted(before) == sorted(after)  # no temporary file left behind
    changed = {name for name in before if before[name] != after[name]}
    assert changed == {"flash.py", "rmsnorm.py"}
    assert after["flash.py"][1] != before["flash.py"][1]  # a new inode: renamed into place
    assert after["flash.py"][3] == 0o640
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.endswith("rmsnorm.py\n2 files changed\n")


def test_a_failed_write_leaves_the_file_and_no_temporary(tmp_path: Path, monkeypatch, capsys) -> None:
    tree = _example_tree(tmp_path)
    before = _snapshot(tree)

    def refuse(src: str, dst: str) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(migrate_module.os, "replace", refuse)
    assert main(["migrate", str(tree), "--write"]) == 1
    assert _snapshot(tree) == before
    err = capsys.readouterr().err
    assert (
        f"{tree}/attention/flash.py:1: cannot write: Permission denied; left unchanged, make it writable and rerun"
        in err
    )
    assert err.endswith("0 files changed\n")


def test_check_exit_status_and_diff_output(tmp_path: Path, capsys) -> None:
    tree = _example_tree(tmp_path)
    assert main(["migrate", str(tree), "--check"]) == 1
    captured = capsys.readouterr()
    assert f"--- a/{tree}/attention/flash.py\n+++ b/{tree}/attention/flash.py\n" in captured.out
    assert "-@functools.cache\n+@flydeps.cached_factory(maxsize=None)\n" in captured.out
    assert captured.err == "2 files would change\n"
    assert main(["migrate", str(tree)]) == 0  # a diff without --check is not a failure
    assert main(["migrate", str(tree), "--write", "--check"]) == 1  # written, and says so
    assert main(["migrate", str(tree), "--check"]) == 0
    assert capsys.readouterr().err.endswith("0 files would change\n")


def test_bad_files_are_reported_and_the_rest_migrated(tmp_path: Path, capsys) -> None:
    (tmp_path / "bad.py").write_text("import flydsl.compiler as flyc\n\ndef broken(:\n    pass\n")
    (tmp_path / "latin.py").write_bytes(b"import flydsl.compiler as flyc\n# ok\nX = '\xff'\n")
    (tmp_path / "cookie.py").write_bytes(b"# coding: nosuch\nimport flydsl.compiler as flyc\n")
    (tmp_path / "good.py").write_text("import flydsl.compiler as flyc\n")
    bad_before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    missing = tmp_path / "missing"
    assert main(["migrate", str(tmp_path), str(missing), "--write"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert err[0] == f"rewrote {tmp_path}/good.py"
    assert err[1].startswith(f"{tmp_path}/bad.py:3: syntax error: ")
    assert err[1] == f"{tmp_path}/bad.py:3: syntax error: invalid syntax; fix the file"
    assert err[2] == f"{tmp_path}/cookie.py:1: unknown encoding: nosuch; fix the coding declaration"
    assert err[3].startswith(f"{tmp_path}/latin.py:3: cannot decode as utf-8: invalid start byte (byte 0xff); ")
    assert err[4] == f"{missing}:1: no such file or directory; check the PATH argument"
    assert err[5:] == ["1 file changed"]
    assert (tmp_path / "good.py").read_text() == "import flydsl_runtime.flyc as flyc\n"
    for name in ("bad.py", "latin.py", "cookie.py"):
        assert (tmp_path / name).read_bytes() == bad_before[name]


def test_a_libcst_parse_gap_is_told_apart_from_a_syntax_error(tmp_path: Path, monkeypatch) -> None:
    def unparsable(command: object, code: str) -> TransformFailure:
        try:
            libcst.parse_module("x = '")
        except libcst.ParserSyntaxError as exc:
            return TransformFailure(error=exc, traceback_str="", warning_messages=[])
        raise AssertionError("libcst parsed invalid code")

    monkeypatch.setattr(migrate_module, "transform_module", unparsable)
    path = tmp_path / "m.py"
    path.write_text("import flydsl.compiler as flyc\n")  # valid Python
    migration = migrate_file(str(path))
    version = importlib.metadata.version("libcst")
    assert str(migration.problem).startswith(f"{path}:1: libcst {version} cannot parse this file (tokenizer error: ")
    assert str(migration.problem).endswith("upgrade libcst (pip install -U libcst) or migrate the file by hand")
    assert not migration.changed and migration.write() is None


def test_a_crash_in_the_codemod_is_reported_with_its_traceback(tmp_path: Path, monkeypatch, capsys) -> None:
    def crash(self: object, original_node: object, updated_node: object) -> None:
        raise RuntimeError("boom")

    monkeypatch.setattr(migrate_module.MigrateCommand, "leave_Import", crash)
    monkeypatch.chdir(tmp_path)
    Path("m.py").write_text("import flydsl.compiler as flyc\n")
    Path("n.py").write_text("from flydsl.compiler import jit\n")
    assert main(["migrate", ".", "--write", "-v"]) == 1
    err = capsys.readouterr().err
    assert "m.py:1: flydeps migrate failed: RuntimeError: boom; please report this with the file\n" in err
    assert "Traceback (most recent call last)" in err and "in crash" in err
    assert Path("m.py").read_text() == "import flydsl.compiler as flyc\n"
    assert Path("n.py").read_text() == "from flydsl_runtime.flyc import jit\n"


def test_write_keeps_symlinks_and_refuses_files_changed_since_read(tmp_path: Path) -> None:
    real = tmp_path / "real.py"
    real.write_text("import flydsl.compiler as flyc\n")
    link = tmp_path / "link.py"
    link.symlink_to(real.name)
    assert migrate_file(str(link)).write() is None
    assert link.is_symlink() and real.read_text() == "import flydsl_runtime.flyc as flyc\n"
    real.write_text("import flydsl.compiler as flyc\n")
    migration = migrate_file(str(real))
    real.write_text("import flydsl.compiler as flyc  # edited meanwhile\n")
    problem = migration.write()
    assert str(problem) == f"{real}:1: changed while being migrated; not written, rerun flydeps migrate"
    assert real.read_text() == "import flydsl.compiler as flyc  # edited meanwhile\n"


def test_usage_errors_exit_2(capsys) -> None:
    assert main(["migrate"]) == 2
    assert main(["migrate", "x.py", "--wrte"]) == 2
    assert "usage: flydeps" in capsys.readouterr().err


def test_migrated_examples_still_analyse_with_cached_factory(tmp_path: Path, capsys) -> None:
    tree = _example_tree(tmp_path)
    assert main(["migrate", str(tree), "--write"]) == 0
    assert main(["graph", str(tree), "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["diagnostics"] == []
    factories = sorted(n["id"] for n in doc["nodes"] if "factory" in n["tags"])
    assert factories == [
        "kernels.attention.flash:compile_flash_attention",
        "kernels.attention.flash:compile_row_reduce",
    ]
    decorators = {(e["src"], e["dst"]) for e in doc["edges"] if e["kind"] == "decorates"}
    assert {(f, "external:flydeps.cached_factory") for f in factories} <= decorators
    kernels = {dst for _, dst in decorators if "flyc" in dst}
    assert kernels == {"external:flydsl_runtime.flyc.kernel", "external:flydsl_runtime.flyc.jit"}
