"""Environment and target key segments: live, effect-keyed, arch selectors resolved not raw."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("flydsl")

from flydsl_runtime.trace import envkey, target  # noqa: E402
from flydsl_runtime.trace.envkey import ARCH_SELECTORS, CODEGEN_ENV_VARS, describe_env_change, env_key  # noqa: E402

PLAIN_VARS = [n for n in CODEGEN_ENV_VARS if n not in envkey.PATH_LIKE_ENV_VARS]


def test_arch_selectors_never_enter_the_env_key(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not set(ARCH_SELECTORS) & set(CODEGEN_ENV_VARS)
    before = env_key("gfx942")
    for name in ARCH_SELECTORS:
        monkeypatch.setenv(name, "gfx950")
    assert env_key("gfx942") == before


@pytest.mark.parametrize("name", PLAIN_VARS)
def test_every_codegen_var_changes_the_key_live(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    arch = "gfx1250" if name.startswith("LLVM_GFX1250") else "gfx942"
    monkeypatch.delenv(name, raising=False)
    before = env_key(arch)
    monkeypatch.setenv(name, "3")
    after = env_key(arch)
    assert after != before
    assert describe_env_change(before, after, arch) == (f"env {name}: '' -> '3'",)


def test_arch_specific_var_only_keys_its_arch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LLVM_GFX1250_ANY_XNACK_CODEGEN", raising=False)
    before = (env_key("gfx942"), env_key("gfx1250"))
    monkeypatch.setenv("LLVM_GFX1250_ANY_XNACK_CODEGEN", "1")
    assert env_key("gfx942") == before[0]
    assert env_key("gfx1250") != before[1]


def _fake_llvm(root: Path, tool: bytes) -> Path:
    (root / "bin").mkdir(parents=True)
    (root / "lib").mkdir()
    (root / "bin" / "mlir-opt").write_bytes(tool)
    (root / "lib" / "libLLVM.so.19").write_bytes(b"llvm")
    return root


def test_llvm_dir_is_keyed_by_toolchain_content_not_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    a = _fake_llvm(tmp_path / "build-host" / "llvm", b"mlir-opt v19")
    b = _fake_llvm(tmp_path / "runtime" / "opt" / "llvm", b"mlir-opt v19")
    c = _fake_llvm(tmp_path / "other", b"mlir-opt v20")
    keys = []
    for prefix in (a, b, c):
        monkeypatch.setenv("FLYDSL_COMPILE_LLVM_DIR", str(prefix))
        keys.append(env_key("gfx942"))
    assert keys[0] == keys[1]
    assert keys[0] != keys[2]
    assert describe_env_change(keys[0], keys[2], "gfx942") == ("env FLYDSL_COMPILE_LLVM_DIR: content changed",)


def test_llvm_dir_rebuilt_in_place_changes_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    prefix = _fake_llvm(tmp_path / "llvm", b"v19")
    monkeypatch.setenv("FLYDSL_COMPILE_LLVM_DIR", str(prefix))
    before = env_key("gfx942")
    tool = prefix / "bin" / "mlir-opt"
    tool.write_bytes(b"v19-patched")
    os.utime(tool, ns=(tool.stat().st_atime_ns, tool.stat().st_mtime_ns + 10_000_000))
    assert env_key("gfx942") != before


def test_extra_source_dirs_keyed_by_content(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("host", "deploy"):
        (tmp_path / name / "pkg").mkdir(parents=True)
        (tmp_path / name / "pkg" / "k.py").write_text("X = 1\n")
    monkeypatch.setenv("FLYDSL_EXTRA_SOURCE_DIRS", str(tmp_path / "host"))
    host = env_key("gfx942")
    monkeypatch.setenv("FLYDSL_EXTRA_SOURCE_DIRS", str(tmp_path / "deploy"))
    assert env_key("gfx942") == host
    (tmp_path / "deploy" / "pkg" / "new.py").write_text("Y = 2\n")
    os.utime(tmp_path / "deploy", ns=(0, (tmp_path / "deploy").stat().st_mtime_ns + 10_000_000))
    assert env_key("gfx942") != host


def test_env_fast_read_agrees_with_public_api(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLYDSL_COMPILE_OPT_LEVEL", "1")
    fast = env_key("gfx942")
    monkeypatch.setattr(envkey, "_FAST", False)
    assert env_key("gfx942") == fast


def test_arch_env_and_detection_resolve_to_the_same_target(monkeypatch: pytest.MonkeyPatch) -> None:
    """Seed 003: ARCH=gfx942 on a build host vs detection at run time must key alike."""
    monkeypatch.setenv("ARCH", "gfx942")
    given = target.current_target()
    for name in ARCH_SELECTORS:
        monkeypatch.delenv(name, raising=False)
    detected = target.current_target()
    assert detected[0][1] == "gfx942"  # FlyDSL's detection on a machine without a GPU agent
    assert given == detected


def test_target_follows_arch_change_live(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ARCH", "gfx942")
    first = target.current_target()
    monkeypatch.setenv("ARCH", "gfx950")
    second = target.current_target()
    assert (first[0][1], second[0][1]) == ("gfx942", "gfx950")


def test_persisted_target_has_no_device_id() -> None:
    key = target.current_target()
    assert target.persistent_target(key) == ("rocm", key[0][1], 64)
    assert target.persistent_target((key[0], 3)) == target.persistent_target((key[0], 0))
