"""``flydsl_runtime``'s public API is imported on first use (PEP 562): a subpackage that needs
neither FlyDSL nor torch (``persist``, which ``flydeps aot list`` reads a built directory
with) imports neither, while every way to a launcher still installs the hooks launchers rely
on (FlyDSL's trace recorded, torch's state queries observed), as the eager package did."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("flydsl")

_SAYS = """
import sys
{code}
from flydsl.compiler.jit_function import JitFunction
print(sorted(m for m in ("flydsl", "torch") if m in sys.modules), hasattr(JitFunction._trace, "__flydeps_original__"))
"""


def _run(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", _SAYS.format(code=code)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


def test_the_persist_subpackage_imports_neither_flydsl_nor_torch() -> None:
    code = (
        "import flydsl_runtime.persist.strict, flydsl_runtime.persist.index\n"
        "print(sorted(m for m in ('flydsl', 'torch') if m in sys.modules))\n"
        "sys.exit(0)"
    )
    assert _run(code) == "[]"


@pytest.mark.parametrize(
    "code",
    [
        "import flydsl_runtime.flyc",
        "from flydsl_runtime import jit",
        "from flydsl_runtime import Launcher",
        "import flydsl_runtime; flydsl_runtime.install(); flydsl_runtime.uninstall()",
        "from flydsl_runtime import ArgumentSignatureError",
    ],
)
def test_every_way_to_the_api_installs_the_hooks(code: str) -> None:
    assert _run(code) == "['flydsl', 'torch'] True"


def test_a_launcher_made_through_its_module_alone_installs_the_hooks(tmp_path: Path) -> None:
    """``flydsl_runtime.launch.jit`` imported by its path (the package's API never asked):
    the first launcher installs them."""
    (tmp_path / "fdk_plain_launcher.py").write_text("def launch(n):\n    pass\n")
    code = (
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "from flydsl.compiler.jit_function import JitFunction\n"
        "import flydsl_runtime.launch.jit as launch\n"
        "import fdk_plain_launcher\n"
        "before = hasattr(JitFunction._trace, '__flydeps_original__')\n"
        "launch.Launcher(JitFunction(fdk_plain_launcher.launch))\n"
        "print('before', before)"
    )
    assert _run(code).splitlines() == ["before False", "['flydsl', 'torch'] True"]
