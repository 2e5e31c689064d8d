"""Fixtures for the core tests: throwaway packages written to a temp dir and imported."""

from __future__ import annotations

import importlib
import itertools
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType

import pytest

_counter = itertools.count()


class Pkg:
    """A package on disk: ``write`` files, ``load`` modules, ``edit`` + ``reload`` them."""

    def __init__(self, root: Path, name: str) -> None:
        self.root, self.name = root, name
        (root / name).mkdir()
        (root / name / "__init__.py").write_text("")

    def write(self, module: str, source: str) -> Path:
        path = self.root / self.name / f"{module}.py"
        path.write_text(textwrap.dedent(source))
        return path

    def load(self, module: str) -> ModuleType:
        importlib.invalidate_caches()
        return importlib.import_module(f"{self.name}.{module}")

    def edit(self, module: str, old: str, new: str) -> ModuleType:
        """Replace text in a module's file and reload it (as an editor + hot-reload would)."""
        path = self.root / self.name / f"{module}.py"
        text = path.read_text()
        assert old in text, f"{old!r} not in {path}"
        path.write_text(text.replace(old, new))
        mod = sys.modules[f"{self.name}.{module}"]
        importlib.invalidate_caches()
        # Same-second edits: make sure the bytecode cache is not reused.
        for cached in (path.parent / "__pycache__").glob(f"{module}.*"):
            cached.unlink()
        return importlib.reload(mod)


@pytest.fixture
def pkg(tmp_path: Path) -> Iterator[Pkg]:
    name = f"fdpkg{next(_counter)}"
    sys.path.insert(0, str(tmp_path))
    package = Pkg(tmp_path, name)
    try:
        yield package
    finally:
        sys.path.remove(str(tmp_path))
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]


@pytest.fixture
def make_pkg(tmp_path: Path) -> Iterator[Callable[[], Pkg]]:
    """Several packages in one test."""
    made: list[str] = []
    sys.path.insert(0, str(tmp_path))

    def make() -> Pkg:
        name = f"fdpkg{next(_counter)}"
        made.append(name)
        return Pkg(tmp_path, name)

    try:
        yield make
    finally:
        sys.path.remove(str(tmp_path))
        for mod in [m for m in sys.modules if m.split(".")[0] in made]:
            del sys.modules[mod]
