"""Child processes of the static analyzer: pool workers that die with their parent, and a
one-job child for work that may crash the interpreter.

Contract
--------
* :func:`pool` is a ``ProcessPoolExecutor`` whose workers exit when the process that
  started them dies, even by SIGKILL (a pool worker otherwise finishes its current file
  and lingers for a minute or more). On Linux each worker asks the kernel for SIGKILL on
  parent death (``prctl(PR_SET_PDEATHSIG)`` through ctypes); elsewhere, or when that call
  is unavailable, a daemon thread polls ``os.getppid()`` twice a second.
* :func:`run_isolated` runs ``function(argument)`` (which returns bytes) in a child process
  of its own and returns those bytes, or an :class:`Abort` saying how the child ended
  (killed by a signal, a non-zero exit, the time limit): a crash of the child never takes
  the caller down. The child dies with its parent too.
"""

from __future__ import annotations

import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

__all__ = ["Abort", "context", "die_with_parent", "pool", "run_isolated"]

_PR_SET_PDEATHSIG = 1


def context() -> multiprocessing.context.BaseContext:
    """fork starts in milliseconds; it is only safe while this process has a single thread."""
    if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    return multiprocessing.get_context("spawn")


def pool(workers: int) -> ProcessPoolExecutor:
    """A process pool whose workers exit as soon as this process dies."""
    return ProcessPoolExecutor(
        max_workers=workers, mp_context=context(), initializer=die_with_parent, initargs=(os.getpid(),)
    )


def die_with_parent(parent: int) -> None:
    """Make the calling (child) process exit when process ``parent`` dies."""
    if sys.platform.startswith("linux") and _set_parent_death_signal():
        if os.getppid() != parent:  # the parent died before the request took effect
            os._exit(1)
        return
    threading.Thread(target=_watch_parent, args=(parent,), name="flydeps-parent-watch", daemon=True).start()


def _set_parent_death_signal() -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) == 0)
    except (OSError, AttributeError):  # no libc symbol: fall back to polling
        return False


def _watch_parent(parent: int) -> None:
    while os.getppid() == parent:
        time.sleep(0.5)
    os._exit(1)


@dataclass(frozen=True)
class Abort:
    """How an isolated child ended without an answer: ``signal`` (e.g. ``SIGSEGV``), or
    ``exitcode``, or ``timeout`` (seconds) when it was killed for running too long."""

    signal: str = ""
    exitcode: int = 0
    timeout: float = 0.0

    def __str__(self) -> str:
        if self.timeout:
            return f"took longer than {self.timeout:g} s"
        if self.signal:
            return f"crashed ({self.signal})"
        return f"exited with status {self.exitcode}"


def run_isolated(function: Callable[[Any], bytes], argument: Any, timeout: float) -> bytes | Abort:
    """``function(argument)`` computed in a child process (see the module contract)."""
    ctx: Any = context()
    reader, writer = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(writer, function, argument, os.getpid()), daemon=True)
    child.start()
    writer.close()
    try:
        if reader.poll(timeout):
            try:
                answer = reader.recv_bytes()
                child.join()
                return answer
            except (EOFError, OSError):  # the child died before answering
                pass
        else:
            child.kill()
            child.join()
            return Abort(timeout=timeout)
    finally:
        reader.close()
    child.join()
    code = child.exitcode or 0
    if code < 0:
        return Abort(signal=signal.Signals(-code).name if -code in signal.valid_signals() else str(-code))
    return Abort(exitcode=code)


def _child(writer: Connection, function: Callable[[Any], bytes], argument: Any, parent: int) -> None:
    die_with_parent(parent)
    try:
        answer = function(argument)
    except BaseException:  # the parent reports the exit status; no traceback on the user's terminal
        os._exit(1)
    writer.send_bytes(answer)
    writer.close()
