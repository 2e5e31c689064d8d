"""``flydeps migrate`` places the imports it adds or rewrites by the project's own ruff or isort
settings, so the project's import lint stays clean (issue 38); without a readable configuration
or the tool it keeps isort's default placement and says why."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from libcst.codemod import TransformSuccess

from flydeps.cli import main
from flydeps.migrate import imports as import_order
from flydeps.migrate.imports import ImportConfig, apply_project_order, find_import_config
from flydeps.migrate.tree import migrate_file

pytestmark = pytest.mark.skipif(import_order._ruff_binary() is None, reason="needs ruff (a dev dependency)")

#: Shaped like FlyDSL's kernels/norm/*.py: an ``lru_cache`` factory defining ``@flyc.kernel``,
#: ``import flydsl.compiler as flyc``, first-party imports of the kernels package.
DOCSTRING = '''"""Softmax kernel, shaped like FlyDSL's kernels/norm/softmax_kernel.py."""
'''
KERNEL = (
    DOCSTRING
    + """
import functools
import math

import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import arith, gpu

from kernels.common import elem_type, warp_size

KERNEL_NAME = "softmax_kernel"


@functools.lru_cache(maxsize=64)
def build_softmax_module(m: int, n: int, dtype_str: str = "f32"):
    width = warp_size() * math.ceil(n / 64)

    @flyc.kernel
    def softmax_kernel(x: fx.Tensor, y: fx.Tensor):
        row = gpu.block_id("x")
        y[row] = arith.exp(x[row]) / width + elem_type(dtype_str)

    return softmax_kernel
"""
)

#: Differs from ruff's defaults: flydsl is first party (FlyDSL's own setting), imports sorted
#: by module whatever their form, first party before third party, one line after the imports.
RUFF_CUSTOM = """[tool.ruff]
line-length = 120

[tool.ruff.lint]
select = ["E", "F", "W", "I"]

[tool.ruff.lint.isort]
known-first-party = ["flydsl"]
force-sort-within-sections = true
section-order = ["future", "standard-library", "first-party", "third-party", "local-folder"]
lines-after-imports = 1
"""

#: The same file sorted for RUFF_CUSTOM (checked by ruff in the test before migrating).
KERNEL_CUSTOM = KERNEL.replace(
    """import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import arith, gpu

from kernels.common import elem_type, warp_size

KERNEL_NAME""",
    """import flydsl.compiler as flyc
import flydsl.expr as fx
from flydsl.expr import arith, gpu
from kernels.common import elem_type, warp_size

KERNEL_NAME""",
)


def _ruff(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    binary = import_order._ruff_binary()
    assert binary is not None
    return subprocess.run([binary, *args], cwd=cwd, capture_output=True, text=True, check=False)


def _project(root: Path, kernel: str, config: dict[str, str]) -> Path:
    """A repository: its config files, kernels/common.py and kernels/norm/softmax_kernel.py."""
    root.mkdir(parents=True)
    for name, text in config.items():
        (root / name).write_text(text)
    (root / "kernels" / "norm").mkdir(parents=True)
    (root / "kernels" / "__init__.py").write_text("")
    (root / "kernels" / "norm" / "__init__.py").write_text("")
    (root / "kernels" / "common.py").write_text(
        "def warp_size():\n    return 64\n\n\ndef elem_type(s):\n    return s\n"
    )
    path = root / "kernels" / "norm" / "softmax_kernel.py"
    path.write_text(kernel)
    return path


def _body(text: str) -> str:
    """What follows the import block (the code the migration rewrites but never moves)."""
    return text[text.index("KERNEL_NAME") :]


def _migrated_body() -> str:
    return _body(KERNEL).replace("@functools.lru_cache(maxsize=64)", "@flydeps.cached_factory(maxsize=64)")


def _default_placement(tmp_path: Path, kernel: str) -> str:
    """The text migrate writes where no configuration governs the file (isort's defaults)."""
    root = tmp_path / "plain"
    while root.exists():
        root = root.with_name(root.name + "_")
    path = _project(root, kernel, {})
    migration = migrate_file(str(path))
    assert isinstance(migration.result, TransformSuccess), migration.result
    return migration.after.decode()


def test_custom_ruff_config_stays_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _project(tmp_path / "p", KERNEL_CUSTOM, {"pyproject.toml": RUFF_CUSTOM})
    assert _ruff("check", "kernels", cwd=tmp_path / "p").returncode == 0  # clean before: the test is not vacuous
    assert main(["migrate", str(tmp_path / "p" / "kernels"), "--write"]) == 0
    after = path.read_text()
    assert "import flydeps\n" in after and "import flydsl_runtime.flyc as flyc\n" in after
    assert "flydsl.compiler" not in after
    checked = _ruff("check", "kernels", cwd=tmp_path / "p")
    assert checked.returncode == 0, checked.stdout + after
    assert _body(after) == _migrated_body()  # only the import block moved
    assert after.startswith(DOCSTRING + "\nimport math\n")  # the blank line after the docstring stays
    assert _ruff("format", "--check", "kernels", cwd=tmp_path / "p").returncode == 0
    # isort's default placement (what migrate wrote before issue 38) breaks this project's lint
    assert _default_placement(tmp_path, KERNEL_CUSTOM) != after
    assert "imports placed by" not in capsys.readouterr().err


def test_flydsl_config_first_party_flydsl(tmp_path: Path) -> None:
    """FlyDSL's own setting (known-first-party = ["flydsl"], the rest default)."""
    config = '[tool.ruff.lint]\nselect = ["I"]\n\n[tool.ruff.lint.isort]\nknown-first-party = ["flydsl"]\n'
    kernel = KERNEL.replace("from flydsl.expr import arith, gpu\n\n", "from flydsl.expr import arith, gpu\n")
    path = _project(tmp_path / "p", kernel, {"pyproject.toml": config})
    assert _ruff("check", "kernels", cwd=tmp_path / "p").returncode == 0
    assert main(["migrate", str(path), "--write"]) == 0
    after = path.read_text()
    assert "import flydsl_runtime.flyc as flyc\n\nimport flydsl.expr as fx\n" in after  # third party, then flydsl
    assert _ruff("check", "kernels", cwd=tmp_path / "p").returncode == 0, after


def test_ruff_toml_wins_and_default_settings_stay_clean(tmp_path: Path) -> None:
    path = _project(tmp_path / "p", KERNEL, {"ruff.toml": '[lint]\nselect = ["I"]\n'})
    assert find_import_config(str(path)) == ImportConfig("ruff", str(tmp_path / "p" / "ruff.toml"))
    assert _ruff("check", "kernels", cwd=tmp_path / "p").returncode == 0
    assert main(["migrate", str(path), "--write"]) == 0
    after = path.read_text()
    assert "import flydeps\n" in after
    assert _ruff("check", "kernels", cwd=tmp_path / "p").returncode == 0, after
    assert _body(after) == _migrated_body()
    assert after.startswith(DOCSTRING + "\nimport math\n")


def test_no_config_keeps_isort_defaults(tmp_path: Path) -> None:
    path = _project(tmp_path / "p", KERNEL, {})
    assert find_import_config(str(path)) is None
    assert main(["migrate", str(path), "--write"]) == 0
    after = path.read_text()
    assert "import flydeps\n" in after
    checked = _ruff("check", "--isolated", "--select", "I", "kernels", cwd=tmp_path / "p")
    assert checked.returncode == 0, checked.stdout + after
    assert after.startswith(DOCSTRING + "\nimport math\n")  # libcst's removal of `import functools` kept it


def test_unparseable_pyproject_keeps_placement_and_names_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = "[tool.ruff\nline-length = 120\n"
    path = _project(tmp_path / "bad", KERNEL, {"pyproject.toml": bad})
    expected = _default_placement(tmp_path, KERNEL)
    capsys.readouterr()
    assert main(["migrate", str(path), "--write"]) == 0
    assert path.read_text() == expected  # migrated, imports where isort's defaults put them
    assert (tmp_path / "bad" / "pyproject.toml").read_text() == bad
    err = capsys.readouterr().err
    assert f"{path}: imports placed by isort's defaults" in err
    assert f"{tmp_path / 'bad' / 'pyproject.toml'}: cannot read it as TOML" in err
    assert "line 1" in err  # what is wrong, where


def test_ruff_rejecting_the_config_keeps_placement(tmp_path: Path) -> None:
    """A configuration TOML can read but ruff refuses (an unknown option): ruff's own message."""
    config = '[tool.ruff.lint]\nselect = ["I"]\nno-such-option = 1\n'
    path = _project(tmp_path / "odd", KERNEL, {"pyproject.toml": config})
    migration = migrate_file(str(path))
    assert migration.after.decode() == _default_placement(tmp_path, KERNEL)
    [warning] = [w for w in migration.warnings if "imports placed by" in w]
    assert str(path) in warning and "no-such-option" in warning


def test_unsorted_original_is_not_sorted(tmp_path: Path) -> None:
    """The project's file was already unsorted: only our imports move (isort's defaults),
    the rest of its imports stay as they were, and a warning says how to sort them."""
    unsorted = KERNEL.replace("import functools\nimport math\n", "import math\nimport functools\n")
    path = _project(tmp_path / "p", unsorted, {"pyproject.toml": RUFF_CUSTOM})
    migration = migrate_file(str(path))
    after = migration.after.decode()
    assert after == _default_placement(tmp_path, unsorted)
    assert "import math\n" in after and "flydsl_runtime" in after
    [warning] = [w for w in migration.warnings if "already unsorted" in w]
    assert warning.startswith(f"{path}:3: ") and "ruff check --select I --fix" in warning


def test_missing_tool_logs_once_and_keeps_placement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(import_order, "_ruff_binary", lambda: None)
    monkeypatch.setattr(import_order, "_announced", set())
    first = _project(tmp_path / "p", KERNEL_CUSTOM, {"pyproject.toml": RUFF_CUSTOM})
    second = first.with_name("other_kernel.py")
    second.write_text(KERNEL_CUSTOM)
    with caplog.at_level(logging.INFO, logger="flydeps.static"):
        results = [migrate_file(str(p)) for p in (first, second)]
    assert all(r.after.decode() == _default_placement(tmp_path, KERNEL_CUSTOM) for r in results)
    assert all(not r.warnings for r in results)
    lines = [r.getMessage() for r in caplog.records if "could not be applied" in r.getMessage()]
    assert lines == [
        f"{tmp_path / 'p' / 'pyproject.toml'}: the import settings there could not be applied (ruff is not "
        "installed); added imports follow isort's defaults: `pip install ruff` to place them by the project's settings"
    ]


def test_a_tool_result_changing_other_code_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _project(tmp_path / "p", KERNEL, {"ruff.toml": '[lint]\nselect = ["I"]\n'})
    text = path.read_text()

    def rogue(binary: str, config: ImportConfig, file: str, original: str, rewritten: str) -> import_order.Placement:
        return import_order.Placement(rewritten.replace("maxsize=64", "maxsize=65"))

    monkeypatch.setattr(import_order, "_with_ruff", rogue)
    placed = apply_project_order(str(path), text, text)
    assert placed.text == text
    assert placed.warning is not None and "changed more than the imports" in placed.warning


@pytest.mark.parametrize(
    ("files", "tool", "name"),
    [
        ({"pyproject.toml": "[tool.ruff]\n", ".isort.cfg": "[settings]\nprofile = black\n"}, "isort", ".isort.cfg"),
        ({"pyproject.toml": '[tool.ruff.lint]\nselect = ["I"]\n[tool.isort]\n'}, "ruff", "pyproject.toml"),
        ({"pyproject.toml": "[tool.ruff.lint.isort]\n", "setup.cfg": "[isort]\n"}, "ruff", "pyproject.toml"),
        ({"setup.cfg": "[tool:isort]\nprofile = black\n", "pyproject.toml": "[project]\n"}, "isort", "setup.cfg"),
        ({".ruff.toml": "", "ruff.toml": "", "pyproject.toml": "[tool.ruff]\n"}, "ruff", ".ruff.toml"),
    ],
)
def test_which_configuration_governs(tmp_path: Path, files: dict[str, str], tool: str, name: str) -> None:
    path = _project(tmp_path / "p", KERNEL, files)
    assert find_import_config(str(path)) == ImportConfig(tool, str(tmp_path / "p" / name))


def test_nearest_directory_wins(tmp_path: Path) -> None:
    path = _project(tmp_path / "p", KERNEL, {"pyproject.toml": "[tool.ruff]\n"})
    (tmp_path / "p" / "kernels" / ".isort.cfg").write_text("[settings]\n")
    assert find_import_config(str(path)) == ImportConfig("isort", str(tmp_path / "p" / "kernels" / ".isort.cfg"))


def test_isort_config_is_applied(tmp_path: Path) -> None:
    isort = pytest.importorskip("isort")
    config = "[settings]\nprofile = black\nknown_first_party = flydsl,kernels\nforce_sort_within_sections = true\n"
    path = _project(tmp_path / "p", KERNEL_CUSTOM, {".isort.cfg": config})
    settings = isort.Config(settings_path=str(tmp_path / "p"))
    assert isort.code(KERNEL_CUSTOM, config=settings, file_path=path) == KERNEL_CUSTOM  # sorted before
    migration = migrate_file(str(path))
    after = migration.after.decode()
    assert "import flydeps\n" in after and not migration.warnings
    assert isort.code(after, config=settings, file_path=path) == after
    assert after != _default_placement(tmp_path, KERNEL_CUSTOM)


def test_flydeps_imports_without_ruff_or_isort(tmp_path: Path) -> None:
    """ruff and isort are dev tools, not dependencies: with neither importable nor on PATH,
    flydeps imports and finds no tool."""
    code = (
        "import sys; sys.modules['ruff'] = None; sys.modules['isort'] = None\n"
        "import flydeps.cli, flydeps.migrate.tree\n"
        "from flydeps.migrate import imports as import_order\n"
        "assert import_order._ruff_binary() is None\n"
    )
    env = {**os.environ, "PATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0, done.stderr
