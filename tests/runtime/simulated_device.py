"""A GPU behind ``torch.cuda``'s device queries, on a machine without one (this one).

torch's own ``torch.cuda.get_device_properties`` runs (its argument resolution, its range
check); what it would ask the driver is answered here: ``_lazy_init`` has nothing to start,
CUDA (HIP) is available, one device (index 0) exists and is current, and ``_get_device_properties`` (what torch's
CUDA/HIP module defines at initialization) returns :class:`Properties`: an MI300-class part
whose compute-unit count the test chooses (304 for an MI300X, 228 for an MI300A: one arch,
gfx942) and whose UUID names one card. Only the driver's answer is simulated: there is no
GPU here to ask.
"""

from __future__ import annotations

import uuid
from typing import Any

import torch


class Properties:
    """The fields of torch's ``_CudaDeviceProperties`` a ROCm build reports."""

    def __init__(self, cus: int) -> None:
        self.name = "AMD Instinct MI300X" if cus == 304 else "AMD Instinct MI300A"
        self.gcnArchName = "gfx942:sramecc+:xnack-"
        self.major, self.minor = 9, 4
        self.multi_processor_count = cus
        self.total_memory = 192 * 2**30
        self.warp_size = 64
        self.uuid = uuid.uuid4().hex  # this card: not part of what the device is

    def __repr__(self) -> str:
        return f"_CudaDeviceProperties(name={self.name!r}, multi_processor_count={self.multi_processor_count})"


class Device:
    """The simulated device; ``cus`` may be changed between calls."""

    def __init__(self, cus: int) -> None:
        self.cus = cus

    def properties(self, index: int) -> Properties:
        if index != 0:
            raise AssertionError("Invalid device id")
        return Properties(self.cus)


def install(cus: int, setattr_: Any = setattr) -> Device:
    """Answer torch.cuda's driver queries with one simulated device of ``cus`` compute units
    (``setattr_``: ``monkeypatch.setattr`` in a test, plain ``setattr`` in a child process)."""
    device = Device(cus)
    cuda = torch.cuda
    setattr_(cuda, "_lazy_init", lambda: None)
    setattr_(cuda, "is_available", lambda: True)
    setattr_(cuda, "device_count", lambda: 1)
    setattr_(cuda, "current_device", lambda: 0)
    if hasattr(cuda, "_get_device_properties"):
        setattr_(cuda, "_get_device_properties", device.properties)
    else:  # a CPU build of torch defines it only on initialization
        if setattr_ is setattr:
            cuda._get_device_properties = device.properties  # type: ignore[attr-defined]
        else:
            setattr_(cuda, "_get_device_properties", device.properties, raising=False)
    return device
