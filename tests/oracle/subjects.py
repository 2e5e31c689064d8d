"""The oracle's subjects: the launchers of ``examples/kernels/realworld`` and how callers call them.

Contract
--------
A :class:`Subject` names one launcher of the real-world example package by module and
attribute path (``"QUANT.launch"`` is a ``@flyc.jit`` method bound to a module-level
instance), the call a caller makes (positional arguments built by :func:`call_args`, keyword
arguments, defaults such as ``eps`` and ``stream`` omitted as callers omit them), the
modules its trace can reach (mutations of other modules are not paired with it), its
``fx.Constexpr[float]`` parameters (the float-key mutations) and the directories of data
files its helpers read while tracing (the data-file mutations). The tensors are CPU
placeholders: FlyDSL compiles from them and, under ``COMPILE_ONLY=1``, never launches.

:data:`CONTROL` is a subject whose helper is reached through a computed ``getattr`` -- a
documented limit of the analysis -- so a mutation of that helper must come out STALE: it
proves the oracle can see a stale answer when there is one.
"""

from __future__ import annotations

from dataclasses import dataclass

ROWS = 64
WIDTH = 4


@dataclass(frozen=True)
class Subject:
    name: str
    module: str  # module of the real-world package that defines the launcher
    path: str  # attribute path from that module to the callable a caller holds
    tensors: tuple[int, ...]  # element counts of the tensor arguments, in order
    scalars: tuple[tuple[str, object], ...]  # the remaining positional arguments, by parameter name
    kwargs: tuple[tuple[str, object], ...] = ()
    reaches: tuple[str, ...] = ()  # modules of the package the trace can read
    float_params: tuple[tuple[str, float], ...] = ()  # Constexpr[float] parameter -> value callers pass
    width_param: str | None = None  # a Constexpr[int] width parameter (other-launcher writes use it)
    data: tuple[str, ...] = ()  # directories of the package whose files its helpers may read while tracing


SUBJECTS: tuple[Subject, ...] = (
    Subject(
        "rmsnorm",
        "norms",
        "rmsnorm",
        (ROWS * WIDTH, WIDTH, ROWS * WIDTH),
        (("rows", ROWS), ("width", WIDTH)),
        reaches=("norms", "memops"),
        float_params=(("eps", 1e-6),),
        width_param="width",
    ),
    Subject(
        "layernorm",
        "norms",
        "layernorm",
        (ROWS * WIDTH, WIDTH, WIDTH, ROWS * WIDTH),
        (("rows", ROWS),),
        kwargs=(("width", WIDTH), ("eps", 1e-5)),
        reaches=("norms", "memops"),
        float_params=(("eps", 1e-5),),
        width_param="width",
    ),
    Subject(
        "softmax",
        "softmax",
        "softmax_w4",
        (ROWS * WIDTH, ROWS * WIDTH),
        (("rows", ROWS),),
        reaches=("softmax", "memops"),
    ),
    Subject(
        "softmax_scaled",
        "softmax",
        "softmax_w4_scaled",
        (ROWS * WIDTH, ROWS * WIDTH),
        (("rows", ROWS),),
        reaches=("softmax", "memops"),
    ),
    Subject(
        "fp8_quant",
        "quant",
        "QUANT.launch",
        (ROWS, ROWS),
        (("n", ROWS),),
        reaches=("quant", "memops"),
        float_params=(("bias", 0.0),),
    ),
    Subject(
        "tuned",
        "tuned",
        "tuned_scale",
        (ROWS * WIDTH, ROWS * WIDTH),
        (("rows", ROWS),),
        reaches=("tuned", "memops"),
        width_param="width",
        data=("tuning",),
    ),
)

CONTROL_HELPER = "_transform_v1"
CONTROL = Subject("control_getattr", "dynamic", "gather", (ROWS * WIDTH, ROWS), (("rows", ROWS),), reaches=("dynamic",))

BY_NAME = {s.name: s for s in (*SUBJECTS, CONTROL)}


def call_args(subject: Subject, overrides: dict[str, object] | None = None) -> tuple[tuple, dict]:
    """Fresh CPU placeholder tensors and the call's arguments.

    ``overrides`` replace an argument where the caller passes it (positionally or by keyword)
    and are passed by keyword otherwise.
    """
    import torch

    overrides = dict(overrides or {})
    scalars = tuple(overrides.pop(name, value) for name, value in subject.scalars)
    args = (*(torch.zeros(n) for n in subject.tensors), *scalars)
    kwargs = dict(subject.kwargs)
    kwargs.update(overrides)
    return args, kwargs
