"""The built distribution: what ``pip install flydeps[flydsl]`` asks for, and what it ships.

Builds the wheel from this checkout (``pip wheel --no-deps --no-build-isolation``, the C
extensions included) and reads its metadata and file list, as an installer would.
"""

from __future__ import annotations

import subprocess
import sys
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0 and "No module named" in done.stderr and "setuptools" in done.stderr:
        pytest.skip("setuptools is not installed in this environment (CI installs it)")
    assert done.returncode == 0, done.stderr
    (built,) = out.glob("flydeps-*.whl")
    return zipfile.ZipFile(built)


def _metadata(wheel: zipfile.ZipFile) -> list[str]:
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    return Parser().parsestr(wheel.read(name).decode()).get_all("Requires-Dist") or []


def test_the_flydsl_extra_keeps_the_users_torch(wheel: zipfile.ZipFile) -> None:
    """A ROCm environment's torch (``2.5.1+rocm6.2``) satisfies the extra: no exact pin that
    pip would answer by replacing it with another build (issue 38)."""
    compact = [(r, r.replace(" ", "")) for r in _metadata(wheel)]
    torch = [r for r, c in compact if c.startswith("torch") and 'extra=="flydsl"' in c]
    assert torch, _metadata(wheel)
    assert not any("==" in r.partition(";")[0] for r in torch), torch
    from packaging.requirements import Requirement

    assert all(Requirement(r).specifier.contains("2.5.1+rocm6.2") for r in torch), torch


def test_the_packages_are_marked_typed(wheel: zipfile.ZipFile) -> None:
    names = set(wheel.namelist())
    assert {"flydeps/py.typed", "flydsl_runtime/py.typed"} <= names
