"""The layer contracts of pyproject.toml ([tool.importlinter]) hold, and they would catch
the next import that climbs a layer or closes a circle: each planted violation, in a copy
of src/, fails `lint-imports` with the offending import named."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = shutil.which("lint-imports", path=os.path.dirname(sys.executable))
pytestmark = pytest.mark.skipif(LINT is None, reason="import-linter is not installed (pip install -e .[dev])")


def _lint(tree: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the repository's contracts over the packages under ``tree/src``."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    assert LINT is not None
    return subprocess.run(
        [LINT, "--no-cache"],  # the contracts of tree/pyproject.toml (read from the working directory)
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    shutil.copytree(ROOT / "src", tmp_path / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.egg-info"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_the_repository_keeps_its_contracts(tree: Path) -> None:
    done = _lint(tree)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def _plant(tree: Path, module: str, line: str) -> None:
    path = tree / "src" / Path(*module.split(".")).with_suffix(".py")
    path.write_text(path.read_text() + "\n" + line + "\n")


def test_an_import_that_climbs_a_layer_fails(tree: Path) -> None:
    # settings is the bottom of flydeps: it may import errors, nothing else.
    _plant(tree, "flydeps.settings", "from flydeps.keys import guard as _climb  # noqa")
    done = _lint(tree)
    assert done.returncode != 0
    assert "flydeps.settings is not allowed to import flydeps.keys" in done.stdout


def test_flydeps_reaching_the_runtime_fails(tree: Path) -> None:
    # flydeps stays importable without torch and FlyDSL: only its CLI reaches flydsl_runtime.
    _plant(tree, "flydeps.builds.factory", "def _late():\n    import flydsl_runtime  # noqa")
    done = _lint(tree)
    assert done.returncode != 0
    assert "flydeps.builds.factory -> flydsl_runtime" in done.stdout


def test_a_circle_inside_one_layer_fails(tree: Path) -> None:
    # Both modules are in flydeps.code (one layer): only the acyclic contract sees this.
    _plant(tree, "flydeps.code.opcodes", "def _late():\n    from . import bytecode  # noqa")
    done = _lint(tree)
    assert done.returncode != 0
    assert "No cycles are allowed in flydeps.code" in done.stdout
