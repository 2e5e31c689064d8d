"""Static analyzer tests: strict AST mode (unknown syntax fails), a private parse cache,
FlyDSL counted as a library on every interpreter."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
EXAMPLES = HERE.parents[1] / "examples"


@pytest.fixture(autouse=True)
def _static_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("FLYDEPS_STRICT_AST", "1")

    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "flydeps-cache"))


@pytest.fixture(autouse=True, scope="session")
def _flydsl_is_a_library() -> Iterator[None]:
    """The fixtures are FlyDSL kernel repositories; on interpreters without FlyDSL (3.10,
    3.12, 3.13) its imports are still library imports, not missing project modules.
    Session-wide: module-scoped fixtures analyse too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("FLYDEPS_ASSUME_INSTALLED", "flydsl,torch")
        yield
