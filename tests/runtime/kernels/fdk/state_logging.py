"""Kernels whose IR depends on a logger's level and on a relative path's existence (issue 35).

A process of the persistent-index tests sets the state at import from variables no trace
reads: ``FDK_LOG_LEVEL`` (a level name) sets the level of this package's logger (the
kernel module's logger's parent), ``FDK_LOG_DISABLE`` calls ``logging.disable`` with that
level, ``FDK_CWD`` is the working directory the process moves to.
"""

import logging
import os
from pathlib import Path

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

BLOCK = 64
LOG = logging.getLogger(__name__)

if "FDK_LOG_LEVEL" in os.environ:
    logging.getLogger(__name__.rpartition(".")[0]).setLevel(os.environ["FDK_LOG_LEVEL"])
if "FDK_LOG_DISABLE" in os.environ:
    logging.disable(os.environ["FDK_LOG_DISABLE"])  # type: ignore[arg-type]  # a level name, as _checkLevel accepts
if "FDK_CWD" in os.environ:
    os.chdir(os.environ["FDK_CWD"])


def debugging() -> bool:
    LOG.debug("tracing the logged kernel")  # emitting a record reads the level: not a read of the trace
    return LOG.isEnabledFor(logging.DEBUG)


@flyc.kernel
def logged_kernel(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    if debugging():  # a checked variant while debugging
        c[tid] = a[tid] + b[tid]
    else:
        c[tid] = a[tid] * b[tid]


@flyc.jit
def logged_launch(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    logged_kernel(a, b, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


def tuned() -> bool:
    return Path("fdk_tuning.flag").exists()  # relative to the working directory


@flyc.kernel
def flagged_kernel(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    if tuned():
        c[tid] = a[tid] + b[tid]
    else:
        c[tid] = a[tid] * b[tid]


@flyc.jit
def flagged_launch(a: fx.Tensor, b: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    flagged_kernel(a, b, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))
