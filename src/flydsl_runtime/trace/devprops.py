"""Device properties read while tracing: reads of the trace, keyed by what the device answers.

Contract
--------
A trace that sizes a kernel from ``torch.cuda.get_device_properties(d)`` (the compute units
of a persistent kernel, the device's name or memory) bakes the answer into the IR, and the
key's target is an arch: two parts of one arch (gfx942 with 304 or with 228 compute units)
would share entries and persistent rows. While a trace records
(:func:`flydeps.observe.environ.recording`), each call of ``torch.cuda.get_device_properties``
notes a derived read of the trace, ``=torch.cuda.get_device_properties:<device>``
(``current`` for the current device, else its index), whose value is :func:`describe` of
what it answered: every public field but those naming one physical device (its UUID, PCI
location), so a row holds on every device that answers the same and on no other.
``torch.cuda.get_device_name`` and ``get_device_capability`` ask through it and count too;
a call that raises (no GPU, a CPU build of torch) is a read of that failure. What torch
reads to answer (``HIP_VISIBLE_DEVICES`` picks the device behind an index) is not a read of
the trace: the answer covers it (as for :func:`flydeps.observe.environ.derive`). It is one row
of :mod:`.statequery`'s table (a *fixed* call query with an argument, :data:`QUERY`): its
family is registered with :func:`flydeps.observe.environ.derive_family`, so an entry's re-check
and a persistent row's lookup in any process evaluate the read by its name (a process that
loads a row built for a 304-CU part on a 228-CU one traces instead).

:func:`install` (:func:`.statequery.install`, from :func:`flydsl_runtime.launch.hooks.ensure_hooks`)
replaces ``torch.cuda.get_device_properties`` in ``torch.cuda`` with a wrapper that calls the
original and returns its result unchanged; outside a recording it adds one check of the
thread's recordings. A module imported earlier that bound torch's function under its own
name (``from torch.cuda import get_device_properties``) is rebound to the wrapper; under
another name it is not seen (docs/guarantees.md). Touches nothing else; imports ``torch``
only where it was already imported.
"""

from __future__ import annotations

import ast
import operator

from . import statequery

__all__ = ["PREFIX", "QUERY", "describe", "difference", "install", "rebind_early_imports"]

# Fields naming one physical device, not what it is: a row keyed by them would hold on one
# card only.
_IDENTITY = frozenset({"uuid", "pci_bus_id", "pci_device_id", "pci_domain_id", "luid", "luid_device_node_mask"})


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


def _suffix(device: object = None) -> str | None:
    """The member of ``get_device_properties(device)``: the device as torch resolves it (an
    index, a ``"cuda:1"`` string, a ``torch.device``, a ``torch.cuda.device``; ``None`` or an
    index-less ``cuda`` device: ``current``); None for an argument naming no CUDA device
    (torch refuses it the same way on every machine: nothing machine-dependent)."""
    if device is None:
        return "current"
    try:
        import torch
        from torch.cuda._utils import _get_device_index  # what get_device_properties resolves with

        return str(operator.index(_get_device_index(device, optional=False)))
    except (ImportError, TypeError, ValueError, RuntimeError, AssertionError):
        pass
    try:
        parsed = torch.device(device) if isinstance(device, str) else device
    except (TypeError, ValueError, RuntimeError):
        return None
    if isinstance(parsed, torch.device) and parsed.type == "cuda" and parsed.index is None:
        return "current"
    return None


def _member(device: object) -> str | None:
    """The read's name for ``get_device_properties(device)`` (see :func:`_suffix`)."""
    suffix = _suffix(device)
    return None if suffix is None else PREFIX + suffix


def _arguments(which: str) -> tuple:
    return (None if which == "current" else int(which),)


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


QUERY = statequery.StateQuery(
    "torch.cuda",
    "get_device_properties",
    "call",
    "the compute units a persistent kernel sizes its grid by, the device's name or memory",
    fixed=True,
    member=_suffix,
    arguments=_arguments,
    describe=describe,
    what=_what,
    show=_shown,
    differ=difference,
)
PREFIX = QUERY.prefix  # "=torch.cuda.get_device_properties:"
statequery.add(QUERY)


def install() -> None:
    """Wrap ``torch.cuda.get_device_properties`` (once; where ``torch.cuda`` is imported) with
    the other queries of :mod:`.statequery`'s table, and rebind the modules that imported
    torch's function under its own name before (:func:`rebind_early_imports`)."""
    statequery.install()


def rebind_early_imports(original: object, wrapper: object) -> list[str]:
    """:func:`.statequery.rebind_early_imports` of ``get_device_properties``: modules imported
    before this one that did ``from torch.cuda import get_device_properties`` are rebound to
    ``wrapper``; another name for it (``... import get_device_properties as props``) is left
    as it is. Returns the modules rebound."""
    return statequery.rebind_early_imports(original, wrapper, "get_device_properties")
