"""Static analyzer tests: strict AST mode (unknown syntax fails), a private parse cache."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
EXAMPLES = HERE.parents[1] / "examples"


@pytest.fixture(autouse=True)
def _static_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    monkeypatch.setenv("FLYDEPS_STRICT_AST", "1")
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "flydeps-cache"))
