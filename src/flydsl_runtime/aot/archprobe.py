"""Whether FlyDSL's compiler knows a GPU processor name: asked of the compiler itself.

Contract
--------
:func:`unknown_arches` compiles one empty kernel per arch, each in a child forked from this
process (``COMPILE_ONLY=1``, FlyDSL's disk cache off: nothing is written anywhere), with the
child's standard error captured, and reports the arches for which LLVM printed
``'<arch>' is not a recognized processor for this target`` (it then goes on with no
processor at all, and a real kernel aborts in instruction selection, its process killed by
SIGABRT, or fails to link, once per specialization), or whose name MLIR's AMDGPU chipset
parser refuses (``Invalid chipset name: gfx94``, raised by every specialization's trace).
No list of processors is kept here: the answer is the compiler's own, so a FlyDSL built
with a newer LLVM knows newer chips.

A probe that fails for any other reason (no linker under the ROCm root, another backend)
proves nothing about the name and reports nothing; so does a probe that outlives
``timeout`` seconds (it is killed). POSIX only (``fork``): elsewhere nothing is reported.
Reads and writes no flydeps state; the parent's FlyDSL state is untouched (the children
are forks).
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from typing import IO

log = logging.getLogger("flydsl_runtime")

__all__ = ["unknown_arches"]

# What the compiler says of a processor name it does not know: LLVM's subtarget (printed,
# then ignored) and MLIR's chipset parser (raised).
_UNKNOWN_NAME = ("is not a recognized processor for this target", "Invalid chipset name")


def unknown_arches(arches: Sequence[str], *, timeout: float = 120.0) -> Mapping[str, str]:
    """``arch -> the compiler's line`` for each of ``arches`` FlyDSL's compiler does not know (see the
    module docstring); an empty mapping when it knows them all or cannot tell."""
    if not hasattr(os, "fork") or not arches:
        return {}
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    children: dict[int, tuple[str, IO[bytes]]] = {}
    pending: set[int] = set()  # children not reaped yet: killed if this function is left early
    try:
        for arch in dict.fromkeys(arches):
            capture: IO[bytes] = tempfile.TemporaryFile()
            try:
                pid = os.fork()
            except OSError:
                capture.close()
                raise
            if pid == 0:  # pragma: no cover - the child (its coverage is not collected)
                code = 1
                try:
                    os.dup2(capture.fileno(), 1)  # FlyDSL's and LLVM's words, both streams
                    os.dup2(capture.fileno(), 2)
                    code = _compile_empty_kernel(arch)
                finally:
                    os._exit(code)
            children[pid] = (arch, capture)
            pending.add(pid)
        _wait_all(children, pending, timeout)
        found: dict[str, str] = {}
        for arch, said in children.values():
            said.seek(0)
            text = said.read().decode("utf-8", "replace")
            line = next((ln.strip() for ln in text.splitlines() if any(w in ln for w in _UNKNOWN_NAME)), None)
            if line is not None:
                found[arch] = line
        return found
    finally:
        for pid in pending:  # an interruption (Ctrl-C) while the probes ran
            _kill(pid)
        for _arch, said in children.values():
            said.close()


def _wait_all(children: Mapping[int, tuple[str, IO[bytes]]], pending: set[int], timeout: float) -> None:
    """Reap every child of ``pending`` (removed as reaped); one still running after
    ``timeout`` seconds is killed first."""
    deadline = time.monotonic() + timeout
    while pending:
        for pid in list(pending):
            done, _status = os.waitpid(pid, os.WNOHANG)
            if done:
                pending.discard(pid)
        if not pending:
            return
        if time.monotonic() > deadline:
            for pid in list(pending):
                log.warning("flydsl_runtime: the compiler probe of %s did not end in %.0f s", children[pid][0], timeout)
                _kill(pid)
                pending.discard(pid)
            return
        time.sleep(0.01)


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, ChildProcessError):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def _compile_empty_kernel(arch: str) -> int:  # pragma: no cover - runs in the probe's child
    """Compile an empty kernel for ``arch`` with FlyDSL's own decorators (never flydsl_runtime's
    facade: no index is read or written); 0 when it compiled."""
    os.environ.pop("HSA_OVERRIDE_GFX_VERSION", None)  # FlyDSL's arch query answers the arch asked about
    os.environ["ARCH"] = os.environ["FLYDSL_GPU_ARCH"] = arch
    os.environ["COMPILE_ONLY"] = "1"
    os.environ["FLYDSL_RUNTIME_ENABLE_CACHE"] = "0"
    logging.disable(logging.CRITICAL)
    import flydsl.expr as fx
    from flydsl.compiler.jit_function import jit
    from flydsl.compiler.kernel_function import kernel

    @kernel
    def flydeps_arch_probe_kernel(n: fx.Int32):  # type: ignore[no-untyped-def]
        pass

    @jit
    def flydeps_arch_probe(n: fx.Int32, stream: fx.Stream = fx.Stream(None)):  # type: ignore[no-untyped-def]
        flydeps_arch_probe_kernel(n).launch(grid=(1, 1, 1), block=(64, 1, 1), stream=stream)

    try:
        flydeps_arch_probe(1)
    except Exception as exc:
        os.write(2, f"{type(exc).__name__}: {exc}\n".splitlines()[0].encode() + b"\n")  # the captured descriptor
        return 1
    return 0
