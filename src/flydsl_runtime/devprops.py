"""Device properties read while tracing: reads of the trace, keyed by what the device answers.

Contract
--------
A trace that sizes a kernel from ``torch.cuda.get_device_properties(d)`` (the compute units
of a persistent kernel, the device's name or memory) bakes the answer into the IR, and the
key's target is an arch: two parts of one arch (gfx942 with 304 or with 228 compute units)
would share entries and persistent rows. While a trace records
(:func:`flydeps._environ.recording`), each call of ``torch.cuda.get_device_properties``
notes a derived read of the trace, ``=torch.cuda.get_device_properties:<device>``
(``current`` for the current device, else its index), whose value is :func:`describe` of
what it answered: every public field but those naming one physical device (its UUID, PCI
location), so a row holds on every device that answers the same and on no other.
``torch.cuda.get_device_name`` and ``get_device_capability`` ask through it and count too;
a call that raises (no GPU, a CPU build of torch) is a read of that failure. What torch
reads to answer (``HIP_VISIBLE_DEVICES`` picks the device behind an index) is not a read of
the trace: the answer covers it (as for :func:`flydeps._environ.derive`). The family is
registered with :func:`flydeps._environ.derive_family`, so an entry's re-check and a
persistent row's lookup in any process evaluate the read by its name (a process that loads
a row built for a 304-CU part on a 228-CU one traces instead).

:func:`install` (from :func:`flydsl_runtime._hooks.ensure_hooks`) replaces
``torch.cuda.get_device_properties`` in ``torch.cuda`` with a wrapper that calls the
original and returns its result unchanged; outside a recording it adds one check of the
thread's recordings. A module imported earlier that bound torch's function under its own
name (``from torch.cuda import get_device_properties``) is rebound to the wrapper; under
another name it is not seen (docs/guarantees.md). Touches nothing else; imports ``torch``
only where it was already imported.
"""

from __future__ import annotations

import ast
import functools
import operator
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

from flydeps._environ import derive_family, paused, recording_in_thread

__all__ = ["PREFIX", "describe", "difference", "install", "rebind_early_imports"]

PREFIX = "=torch.cuda.get_device_properties:"
# Fields naming one physical device, not what it is: a row keyed by them would hold on one
# card only.
_IDENTITY = frozenset({"uuid", "pci_bus_id", "pci_device_id", "pci_domain_id", "luid", "luid_device_node_mask"})

_original: Callable[..., Any] | None = None  # torch.cuda.get_device_properties as torch defines it


def describe(properties: object) -> str:
    """The properties of a device as one string: its type's name, then each public,
    non-callable field as ``name=repr(value)`` in name order (one per line: ``repr`` never
    writes a raw newline), the physical device's identity left out."""
    fields = []
    for name in sorted(dir(properties)):
        if name.startswith("_") or name in _IDENTITY:
            continue
        try:
            value = getattr(properties, name)
        except Exception:  # noqa: BLE001 - a field that cannot be read is part of the answer
            value = "<unreadable>"
        if not callable(value):
            fields.append(f"{name}={value!r}")
    return "\n".join([type(properties).__qualname__, *fields])


def difference(old: str | None, new: str | None) -> str | None:
    """What differs between two :func:`describe` answers (``multi_processor_count: 304 ->
    228``); None when either is not one (a failure, an unset read)."""
    if not old or not new or old.startswith("\0") or new.startswith("\0"):
        return None
    before = dict(line.partition("=")[::2] for line in old.split("\n")[1:])
    after = dict(line.partition("=")[::2] for line in new.split("\n")[1:])
    changed = [
        f"{name}: {before.get(name, '<absent>')} -> {after.get(name, '<absent>')}"
        for name in sorted(before.keys() | after.keys())
        if before.get(name) != after.get(name)
    ]
    return ", ".join(changed) if changed else None


def _failure(error: BaseException) -> str:
    """A call that raised, as the read's value (never what a device's properties describe)."""
    return f"\0raised {type(error).__qualname__}: {error}"


def _member(device: object) -> str | None:
    """The read's name for ``get_device_properties(device)``, the device as torch resolves it
    (an index, a ``"cuda:1"`` string, a ``torch.device``, a ``torch.cuda.device``; ``None``
    or an index-less ``cuda`` device: the current one); None for an argument naming no CUDA
    device (torch refuses it the same way on every machine: nothing machine-dependent)."""
    if device is None:
        return PREFIX + "current"
    try:
        import torch
        from torch.cuda._utils import _get_device_index  # what get_device_properties resolves with

        return PREFIX + str(operator.index(_get_device_index(device, optional=False)))
    except (ImportError, TypeError, ValueError, RuntimeError, AssertionError):
        pass
    try:
        parsed = torch.device(device) if isinstance(device, str) else device
    except (TypeError, ValueError, RuntimeError):
        return None
    if isinstance(parsed, torch.device) and parsed.type == "cuda" and parsed.index is None:
        return PREFIX + "current"
    return None


def _evaluate(name: str) -> str | None:
    """What ``get_device_properties`` answers now for the read ``name`` (any process)."""
    original = _original if _original is not None else _torch_function()
    if original is None:
        return "\0torch.cuda is not available in this process"
    which = name[len(PREFIX) :]
    try:
        return describe(original(None if which == "current" else int(which)))
    except Exception as error:  # noqa: BLE001 - the failure is the answer
        return _failure(error)


def _what(name: str) -> str:
    which = name[len(PREFIX) :]
    return f"torch.cuda.get_device_properties({'' if which == 'current' else which})"


def _shown(value: str | None) -> str:
    """A :func:`describe` answer in a message: the device's name, arch and compute units."""
    if not value or value.startswith("\0"):
        return repr((value or "").lstrip("\0"))
    fields = dict(line.partition("=")[::2] for line in value.split("\n")[1:])
    name, arch = _text(fields.get("name", "?")), fields.get("gcnArchName")
    details = [_text(arch)] if arch is not None else []
    if "multi_processor_count" in fields:
        details.append(f"{fields['multi_processor_count']} compute units")
    return f"{name} ({', '.join(details)})" if details else name


def _text(field: str) -> str:
    """A field's ``repr`` as the text it stands for, when it is a string's."""
    try:
        value = ast.literal_eval(field)
    except (ValueError, SyntaxError):
        return field
    return value if isinstance(value, str) else field


_note = derive_family(PREFIX, _evaluate, _what, _shown, difference)


def _torch_function() -> Callable[..., Any] | None:
    cuda = sys.modules.get("torch.cuda")
    found = getattr(cuda, "get_device_properties", None) if cuda is not None else None
    return getattr(found, "__flydeps_original__", found)


def _recorded(original: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(original)
    def get_device_properties(device: Any = None) -> Any:
        if not recording_in_thread():
            return original(device)
        name = _member(device)
        try:
            with paused():  # keyed by the answer, not by what torch reads to give it
                properties = original(device)
        except Exception as error:
            if name is not None:
                _note(name, _failure(error))
            raise
        if name is not None:
            _note(name, describe(properties))
        return properties

    get_device_properties.__flydeps_original__ = original  # type: ignore[attr-defined]
    return get_device_properties


def install() -> None:
    """Wrap ``torch.cuda.get_device_properties`` (once; where ``torch.cuda`` is imported),
    and rebind the modules that imported torch's function under its own name before
    (:func:`rebind_early_imports`)."""
    global _original
    cuda = sys.modules.get("torch.cuda")
    current = getattr(cuda, "get_device_properties", None) if cuda is not None else None
    if current is None or hasattr(current, "__flydeps_original__"):
        return
    _original = current
    wrapper = _recorded(current)
    cuda.get_device_properties = wrapper  # type: ignore[union-attr]
    rebind_early_imports(current, wrapper)


def rebind_early_imports(original: object, wrapper: object) -> list[str]:
    """Modules imported before this one that did ``from torch.cuda import
    get_device_properties`` hold torch's function: their ``get_device_properties`` is
    rebound to ``wrapper`` (the same answers; their reads are then seen). Read and written
    through the namespace dicts of module objects only (no ``__getattr__`` runs, and an object
    a library put in ``sys.modules`` is not read); another name for it
    (``... import get_device_properties as props``) is left as it is. Returns the modules
    rebound."""
    rebound = []
    for name, module in list(sys.modules.items()):
        if not issubclass(type(module), ModuleType):  # an object a library put there: not read
            continue
        namespace = object.__getattribute__(module, "__dict__")  # no __getattr__ of a lazy module
        if type(namespace) is dict and namespace.get("get_device_properties") is original:
            namespace["get_device_properties"] = wrapper
            rebound.append(name)
    return rebound
