"""Fixtures shared by the core and runtime tests: a library really installed by pip.

``site_library`` installs a small library, ``fdk-helperlib`` 1.0 (package ``fdk_helperlib``,
module ``helpers``), with pip from a source tree the test edits, into a user site directory
of its own (``PYTHONUSERBASE`` under the test's temp dir): a library directory of this
interpreter, so the library is library code there (a leaf), as a kernel author's own helper
library is after ``pip install .``. Processes started with :attr:`SiteLibrary.env` import it
(the directory is put on ``PYTHONPATH``: a virtual environment does not add its user site).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

_LIB_PROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "fdk-helperlib"
version = "1.0"

[project.scripts]
fdk-helper = "fdk_helperlib.helpers:main"
"""


@dataclass(frozen=True)
class SiteLibrary:
    """Where the library is installed, its source tree, and what a process needs to see it."""

    site_dir: Path
    source: Path
    env: dict[str, str]

    @property
    def helpers(self) -> Path:
        return self.source / "fdk_helperlib" / "helpers.py"

    def install(self, helpers: str) -> None:
        """``helpers.py`` becomes ``helpers`` and pip installs the library again (a wheel built
        from the tree, replacing the installed one, at the same version)."""
        self.helpers.write_text(helpers)
        command = [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--no-build-isolation"]
        done = subprocess.run(
            [*command, "--upgrade", "--force-reinstall", "--target", str(self.site_dir), str(self.source)],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]


@pytest.fixture
def site_library(tmp_path: Path) -> SiteLibrary:
    pytest.importorskip("setuptools")
    env = {**os.environ, "PYTHONUSERBASE": str(tmp_path / "userbase")}
    query = "import site; print(site.getusersitepackages())"
    asked = subprocess.run([sys.executable, "-c", query], env=env, capture_output=True, text=True, check=True)
    site_dir = Path(asked.stdout.strip())
    assert str(site_dir).startswith(str(tmp_path)), site_dir
    site_dir.mkdir(parents=True)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(site_dir), os.environ.get("PYTHONPATH")) if p)
    source = tmp_path / "helperlib"
    (source / "fdk_helperlib").mkdir(parents=True)
    (source / "pyproject.toml").write_text(_LIB_PROJECT)
    (source / "fdk_helperlib" / "__init__.py").write_text("")
    return SiteLibrary(site_dir, source, env)
