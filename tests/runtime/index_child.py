"""One fresh process of the persistent-index tests: import a kernel package, call one
launcher once under COMPILE_ONLY=1, print what happened as one JSON line.

    python index_child.py ROOT PACKAGE MODULE LAUNCHER|INSTANCE.LAUNCHER [--wait-file F] [--dtype float16]
        [--fresh-ir] [--first OTHER] [--key-format N] [--device-cus N]

Prints ``{"traces": n, "ir_key": "...", "loaded": bool, ...}``: FlyDSL traces run in this process
(counted by a spy on ``JitFunction._trace``), the IR key of the launcher's entry,
whether the entry came from the persistent index, whether the call imported FlyDSL's
ROCDL binding module (``call_imported_rocdl_binding``) and what FlyDSL's ``get_rocm_arch()``
answers (``rocm_arch``); when the call raises,
``{"error": type name, "message": ...}`` instead. ``--fresh-ir`` adds ``fresh_ir``: FlyDSL's
IR key from a fresh trace of the same call, made after it (the oracle). ``--wait-file``: spin until F exists
before calling (two children started together then call at about the same time).
``--first OTHER``: call launcher OTHER of the same module first (its trace's writes stay;
its traces count in ``traces``). ``--key-format N``: run as a flydeps whose
``KEY_FORMAT`` is N. ``--device-cus N``: torch.cuda's device queries answered by a
simulated MI300-class GPU of N compute units (``simulated_device.py``; there is no GPU here).
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import os
import sys
import time
from typing import Any

# Launchers of (tensor, tensor, n); the others take (tensor, tensor, tensor, n).
THREE_ARGUMENTS = (
    "partial_sum",
    "logged_copy",
    "counted_copy",
    "wait_launch",
    "env_launch",
    "persistent_launch",
    "named_device_launch",
)


def main() -> int:
    root, package, module, launcher = sys.argv[1:5]
    if "--wait-file" in sys.argv:
        gate = sys.argv[sys.argv.index("--wait-file") + 1]
        while not os.path.exists(gate):
            time.sleep(0.005)
    sys.path.insert(0, root)
    from flydsl.compiler.jit_function import JitFunction

    traced: list[str] = []
    real = JitFunction._trace

    def spy(self: JitFunction, *args: object, **kwargs: object) -> object:
        traced.append(self.func.__name__)
        return real(self, *args, **kwargs)

    JitFunction._trace = spy  # type: ignore[method-assign]
    notes: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            notes.append(record.getMessage())

    logging.getLogger("flydsl_runtime").addHandler(Keep())
    logging.getLogger("flydsl_runtime").setLevel(logging.INFO)
    if "--key-format" in sys.argv:  # a flydeps whose keys follow other rules (an older one)
        import flydeps

        flydeps.KEY_FORMAT = int(sys.argv[sys.argv.index("--key-format") + 1])
    import torch

    if "--device-cus" in sys.argv:  # a GPU of that many compute units behind torch.cuda's queries
        import simulated_device

        simulated_device.install(int(sys.argv[sys.argv.index("--device-cus") + 1]))
    launch_module = importlib.import_module(f"{package}.{module}")
    launch: Any = launch_module
    first = sys.argv[sys.argv.index("--first") + 1] if "--first" in sys.argv else None
    for part in launcher.split("."):  # INSTANCE.method: a launcher bound to an instance
        launch = getattr(launch, part)
    bound = launch.args if isinstance(launch, functools.partial) else ()
    owner = launch.func.__self__ if bound else launch  # the Launcher behind a bound call
    dtype = getattr(torch, sys.argv[sys.argv.index("--dtype") + 1]) if "--dtype" in sys.argv else torch.float32
    tensors = [torch.zeros(1024, dtype=dtype) for _ in range(3)]
    binding = "flydsl._mlir._mlir_libs._mlirDialectsFlyROCDL"  # FlyDSL's ROCDL Python binding module
    binding_before = binding in sys.modules
    if first is not None:  # another launcher of the module first, in this process (its trace's writes)
        getattr(launch_module, first)(tensors[0], tensors[1], 256)
    try:
        if launcher in THREE_ARGUMENTS:
            launch(tensors[0], tensors[1], 256)
        else:
            launch(*tensors, 1024)
    except Exception as exc:  # reported, for tests of errors (FLYDEPS_AOT=strict)
        error = {"traces": len(traced), "error": type(exc).__name__, "message": str(exc), "notes": notes}
        sys.stdout.write(json.dumps(error) + "\n")
        return 0
    (entry,) = owner.entries()
    loaded = any("loaded from the persistent index" in n for n in notes)
    result = {"traces": len(traced), "ir_key": entry.ir_key, "loaded": loaded, "notes": notes}
    result["call_imported_rocdl_binding"] = binding in sys.modules and not binding_before
    from flydsl.runtime.device import get_rocm_arch

    result["rocm_arch"] = get_rocm_arch()  # what FlyDSL's arch queries answer in this process
    if "--fresh-ir" in sys.argv:  # the oracle: FlyDSL's IR key from a fresh trace of the same call
        jf = owner.jit_function
        call = (tensors[0], tensors[1], 256) if launcher in THREE_ARGUMENTS else (*tensors, 1024)
        jf._compile_or_execute((*bound, *call), {}, execute=False)
        result["fresh_ir"] = jf._last_compiled[0]
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
