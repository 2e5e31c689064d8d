"""Shared setup of the FlyDSL runtime tests: a real ROCm compile root, found or made.

FlyDSL's ROCm backend needs ``$ROCM_PATH/llvm/bin/ld.lld`` and ``$ROCM_PATH/amdgcn/bitcode``.
When ``ROCM_PATH`` is not set, this builds that root out of symlinks to Debian's ``lld-19``
and ``rocm-device-libs`` (installed by ``.ci/setup_rocm.sh``) under a cache directory, and
selects ``ARCH=gfx942``, so a bare ``pytest`` compiles real code objects on a CPU-only box.
The FlyDSL disk cache and flydeps' persistent index go to per-session temporary directories
so no test reads an artifact or a row another run left behind. Every test here is marked
``flydsl`` and the whole directory is skipped (not failed) only where ``flydsl`` cannot be
imported; a missing compile root fails with the command that installs it.
"""

from __future__ import annotations

import importlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
import types
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

_LLD = Path("/usr/bin/ld.lld-19")
_BITCODE = Path("/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")
KERNELS = Path(__file__).parent / "kernels"


def _rocm_root() -> Path | None:
    """An existing usable root, or one made of symlinks under the user cache directory."""
    for candidate in (os.environ.get("ROCM_PATH"), os.environ.get("FLYDEPS_ROCM_ROOT"), "/opt/flydeps-rocm"):
        if (
            candidate
            and (Path(candidate) / "llvm/bin/ld.lld").exists()
            and (Path(candidate) / "amdgcn/bitcode").is_dir()
        ):
            return Path(candidate)
    if not (_LLD.exists() and _BITCODE.is_dir()):
        return None
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "flydeps" / "rocm-root"
    (root / "llvm/bin").mkdir(parents=True, exist_ok=True)
    (root / "amdgcn").mkdir(parents=True, exist_ok=True)
    for link, target in ((root / "llvm/bin/ld.lld", _LLD), (root / "amdgcn/bitcode", _BITCODE)):
        if not link.exists():
            link.unlink(missing_ok=True)
            link.symlink_to(target)
    return root


ROCM_ROOT = _rocm_root()
if ROCM_ROOT is not None:
    os.environ["ROCM_PATH"] = str(ROCM_ROOT)
    os.environ.setdefault("ARCH", "gfx942")
os.environ["FLYDSL_RUNTIME_CACHE_DIR"] = tempfile.mkdtemp(prefix="flydeps-flydsl-cache-")
os.environ["FLYDEPS_CACHE_DIR"] = tempfile.mkdtemp(prefix="flydeps-index-")  # persistent index, per session
os.environ.pop("COMPILE_ONLY", None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.flydsl)


@pytest.fixture
def rocm_root() -> Path:
    """The compile root; a missing one fails with the command that installs it."""
    if ROCM_ROOT is None:
        pytest.fail("no ROCm compile root: run .ci/setup_rocm.sh (installs lld-19 and rocm-device-libs)")
    return ROCM_ROOT


@pytest.fixture
def compile_only(monkeypatch: pytest.MonkeyPatch, rocm_root: Path) -> None:
    """Compile for real but never launch (there is no GPU here)."""
    monkeypatch.setenv("COMPILE_ONLY", "1")


class KernelPackage:
    """A private, editable copy of ``kernels/fdk`` imported under a unique package name."""

    def __init__(self, root: Path, name: str) -> None:
        self.root, self.name = root, name
        self._mtime_step = 0

    def module(self, short: str) -> types.ModuleType:
        return importlib.import_module(f"{self.name}.{short}")

    def path(self, short: str) -> Path:
        return self.root / self.name / f"{short}.py"

    def edit(self, short: str, old: str, new: str) -> types.ModuleType:
        """Replace ``old`` by ``new`` in the module's file and reload it."""
        path = self.path(short)
        text = path.read_text()
        if old not in text:
            raise AssertionError(f"{old!r} not in {path}")
        path.write_text(text.replace(old, new))
        # Move mtime forward so neither the bytecode cache nor FlyDSL's rewrite cache reuses
        # the old file's compiled code when an edit keeps the size.
        self._mtime_step += 2
        stamp = int(time.time()) + self._mtime_step
        os.utime(path, (stamp, stamp))
        importlib.invalidate_caches()
        return importlib.reload(self.module(short))


@pytest.fixture
def fdk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[KernelPackage]:
    name = f"fdk_{uuid.uuid4().hex[:10]}"
    shutil.copytree(KERNELS / "fdk", tmp_path / name)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield KernelPackage(tmp_path, name)
    for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
        del sys.modules[mod]


@pytest.fixture
def traces(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the launchers FlyDSL traced during the test (a spy: the real trace runs)."""
    from flydsl.compiler.jit_function import JitFunction

    from flydsl_runtime.launch.hooks import ensure_hooks

    ensure_hooks()  # first: wrapped after the spy, the trace recording would leave with it
    seen: list[str] = []
    real = JitFunction._trace

    def spy(self: JitFunction, *args: object, **kwargs: object) -> object:
        seen.append(self.func.__name__)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(JitFunction, "_trace", spy)
    return seen


@pytest.fixture
def read_only_view(tmp_path: Path) -> Iterator[Callable[[Path], Path]]:
    """``view(directory)``: ``directory`` bind-mounted read-only at a new path (what a shipped
    cache on a read-only volume is: nothing, not even root, can write through it). Skipped
    where this process may not mount (it needs root with mount rights)."""
    mounted: list[Path] = []

    def view(directory: Path) -> Path:
        target = tmp_path / f"read-only-{len(mounted)}"
        target.mkdir()
        bind = subprocess.run(["mount", "--bind", str(directory), str(target)], capture_output=True, text=True)
        if bind.returncode != 0:
            pytest.skip(f"a read-only bind mount needs root with mount rights: {bind.stderr.strip()}")
        mounted.append(target)
        subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True, capture_output=True)
        assert not os.access(target, os.W_OK)
        return target

    try:
        yield view
    finally:
        for target in reversed(mounted):
            subprocess.run(["umount", str(target)], check=False, capture_output=True)
