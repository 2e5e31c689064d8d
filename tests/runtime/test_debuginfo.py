"""positions_in_ir follows FlyDSL's own reading of FLYDSL_DEBUG_ENABLE_DEBUG_INFO (issue 7.6)."""

from __future__ import annotations

import pytest

pytest.importorskip("flydsl")

from flydsl_runtime.trace.debuginfo import positions_in_ir  # noqa: E402


@pytest.mark.parametrize(
    "value,expected",
    [(None, False), ("1", True), ("true", True), ("YES", True), ("on", True), ("0", False), ("", False), ("no", False)],
)
def test_positions_follow_flydsl_debug_info(monkeypatch: pytest.MonkeyPatch, value: str | None, expected: bool) -> None:
    if value is None:
        monkeypatch.delenv("FLYDSL_DEBUG_ENABLE_DEBUG_INFO", raising=False)
    else:
        monkeypatch.setenv("FLYDSL_DEBUG_ENABLE_DEBUG_INFO", value)
    assert positions_in_ir() is expected
