"""Data a launcher reads, some of which never reaches its IR (tests/runtime/test_drift_by_ir.py)."""

import os

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

BLOCK = 64


class Config:
    def __init__(self) -> None:
        self.factor = 2
        self.note = "read by nothing"


CONFIG = Config()
TABLE = {"factor": 3, "unused": 0}


@flyc.kernel
def scale_kernel(a: fx.Tensor, c: fx.Tensor, factor: fx.Constexpr[int]):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid] * factor


@flyc.jit
def scale(a: fx.Tensor, c: fx.Tensor, n: fx.Int32, mode: fx.Constexpr[int]):
    factor = TABLE["factor"] if mode == 1 else CONFIG.factor
    scale_kernel(a, c, factor).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


_FACTOR_CACHE: dict = {}  # a hand-written memo over an environment variable


def cached_factor():
    if "factor" not in _FACTOR_CACHE:
        _FACTOR_CACHE["factor"] = int(os.environ.get("FLYDEPS_TEST_DRIFT_FACTOR", "2"))
    return _FACTOR_CACHE["factor"]


@flyc.jit
def memo_scale(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    scale_kernel(a, c, cached_factor()).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.jit
def memo_fill(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    scale_kernel(a, c, cached_factor()).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


RACE_HOOKS: list = []  # tests: run before each environment read of env_scale's trace


def env_factor():
    if RACE_HOOKS:
        RACE_HOOKS.pop(0)()
    return int(os.environ.get("FLYDEPS_TEST_RACE_FACTOR", "2"))


@flyc.jit
def env_scale(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    factor = env_factor() + env_factor() + env_factor()
    scale_kernel(a, c, factor).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))
