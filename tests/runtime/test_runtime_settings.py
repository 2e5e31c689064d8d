"""``FLYDEPS_LOG`` and ``FLYDEPS_VERIFY`` on real FlyDSL compiles (issue 11, items 8 and 9)."""

from __future__ import annotations

import pytest

pytest.importorskip("flydsl")

import torch  # noqa: E402

from flydeps import SettingError  # noqa: E402

pytestmark = pytest.mark.usefixtures("compile_only")

N = 1024


def _tensors() -> tuple[torch.Tensor, ...]:
    return tuple(torch.zeros(N) for _ in range(3))


def test_flydeps_log_rebuilds_alias_prints_recompile_reasons(fdk, monkeypatch, capfd) -> None:
    monkeypatch.setenv("FLYDEPS_LOG", "rebuilds")
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    vadd.vadd(a, b, c, N)
    vadd.vadd(a.double(), b, c, N)
    err = capfd.readouterr().err
    assert "flydsl_runtime: retracing" in err and "argument 'a'" in err and "float64" in err


def test_bad_flydeps_log_raises_naming_it_on_a_miss(fdk, monkeypatch) -> None:
    monkeypatch.setenv("FLYDEPS_LOG", "recompile")  # a typo of "recompiles"
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    vadd.vadd(a, b, c, N)  # the first call explains nothing: it is not read
    with pytest.raises(SettingError, match="FLYDEPS_LOG='recompile' names 'recompile'"):
        vadd.vadd(a.double(), b, c, N)


@pytest.mark.parametrize("word", ["yes", "ON", "true"])
def test_verify_accepts_every_true_word(fdk, traces, monkeypatch, word) -> None:
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    monkeypatch.setenv("FLYDEPS_VERIFY", word)
    for _ in range(3):
        vadd.vadd(a, b, c, N)
    assert len(traces) == 3 and vadd.vadd.cache_info().hits == 2  # each hit re-traced


@pytest.mark.parametrize("word", ["no", "off", "0", ""])
def test_verify_off_words_do_not_retrace(fdk, traces, monkeypatch, word) -> None:
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    monkeypatch.setenv("FLYDEPS_VERIFY", word)
    for _ in range(3):
        vadd.vadd(a, b, c, N)
    assert len(traces) == 1 and vadd.vadd.cache_info().hits == 2


def test_bad_verify_value_raises_on_a_hit(fdk, monkeypatch) -> None:
    vadd = fdk.module("vadd")
    a, b, c = _tensors()
    vadd.vadd(a, b, c, N)
    monkeypatch.setenv("FLYDEPS_VERIFY", "always")
    with pytest.raises(SettingError, match="FLYDEPS_VERIFY='always' is not a switch"):
        vadd.vadd(a, b, c, N)
