"""install() on an unmodified kernel module, and verify mode as the analyzer's safety net."""

from __future__ import annotations

import pytest

pytest.importorskip("flydsl")

import flydsl.compiler  # noqa: E402
import torch  # noqa: E402

import flydsl_runtime  # noqa: E402
from flydsl_runtime import Launcher, StaleArtifactError  # noqa: E402

pytestmark = pytest.mark.usefixtures("compile_only")

N = 1024


@pytest.fixture
def installed():
    flydsl_runtime.install()
    flydsl_runtime.install()  # idempotent
    yield
    flydsl_runtime.uninstall()


def test_install_gives_an_unmodified_module_the_dependency_aware_jit(installed, fdk, traces, monkeypatch) -> None:
    mod = fdk.module("unmodified")
    assert isinstance(mod.launch_twice, Launcher)
    a, c = torch.zeros(N), torch.zeros(N)
    mod.launch_twice(a, c, N)
    mod.launch_twice(a, c, N)
    assert traces == ["launch_twice"]
    monkeypatch.setattr(mod, "twice", lambda x: x * 2)
    mod.launch_twice(a, c, N)
    assert traces == ["launch_twice", "launch_twice"]
    assert len({e.ir_key for e in mod.launch_twice.entries()}) == 2
    compiled = flydsl.compiler.compile(mod.launch_twice, a, c, N)  # COMPILE_ONLY: FlyDSL returns None
    assert compiled is None and len(traces) == 2  # ... and the patched compile reused the entry


def test_uninstall_restores_flydsl_and_is_idempotent() -> None:
    from flydsl.compiler.jit_function import JitFunction

    original = flydsl.compiler.jit
    flydsl_runtime.install()
    assert flydsl_runtime.installed() and flydsl.compiler.jit is not original
    flydsl_runtime.uninstall()
    flydsl_runtime.uninstall()
    assert not flydsl_runtime.installed() and flydsl.compiler.jit is original

    def launcher(a):
        pass

    assert isinstance(flydsl.compiler.jit(launcher), JitFunction)


def test_computed_getattr_dependency_is_missed_without_verify(fdk, traces, monkeypatch) -> None:
    """The documented limit: a helper reached through getattr(module, computed_name) is unseen."""
    dyn, helpers = fdk.module("dynamic"), fdk.module("reduce_helpers")
    a, c = torch.zeros(N), torch.zeros(N)
    dyn.launch_dyn(a, c, N)
    monkeypatch.setattr(helpers, "combine", lambda acc, x: acc - x)
    dyn.launch_dyn(a, c, N)
    assert traces == ["launch_dyn"]  # stale hit: exactly what verify mode exists to catch


def test_verify_mode_catches_the_computed_getattr_dependency(fdk, monkeypatch) -> None:
    dyn, helpers = fdk.module("dynamic"), fdk.module("reduce_helpers")
    a, c = torch.zeros(N), torch.zeros(N)
    monkeypatch.setenv("FLYDEPS_VERIFY", "1")
    dyn.launch_dyn(a, c, N)
    dyn.launch_dyn(a, c, N)  # verified hit: same IR
    monkeypatch.setattr(helpers, "combine", lambda acc, x: acc - x)
    with pytest.raises(StaleArtifactError) as info:
        dyn.launch_dyn(a, c, N)
    err = info.value
    assert err.recorded != err.current and "launch_dyn" in str(err)
    assert "computed getattr" in str(err)


def test_verify_mode_passes_hits_whose_ir_is_unchanged(fdk, traces, monkeypatch) -> None:
    vadd = fdk.module("vadd")
    a, b, c = torch.zeros(N), torch.zeros(N), torch.zeros(N)
    monkeypatch.setenv("FLYDEPS_VERIFY", "1")
    for _ in range(3):
        vadd.vadd(a, b, c, N)
    assert len(traces) == 3 and vadd.vadd.cache_info().hits == 2  # every hit re-traced, none failed
