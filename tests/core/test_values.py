"""Value snapshots: stable, bounded, and precise for library values used by kernels."""

from __future__ import annotations

import enum

import pytest

import flydeps
from flydeps._values import snapshot


class Mode(enum.Enum):
    FAST = 1
    EXACT = 2


@pytest.mark.parametrize(
    "a,b",
    [
        (1, True),
        (1, 1.0),
        (0.0, -0.0),
        ("a", b"a"),
        ((1, 2), [1, 2]),
        ({1: "a"}, {1: "b"}),
        ({"x", "y"}, {"x", "z"}),
        (Mode.FAST, Mode.EXACT),
        (frozenset({1}), {1}),
    ],
)
def test_distinct_values_have_distinct_digests(a, b) -> None:
    assert snapshot(a).digest != snapshot(b).digest


def test_equal_values_have_equal_digests_regardless_of_order() -> None:
    assert snapshot({"b": 2, "a": 1}).digest == snapshot({"a": 1, "b": 2}).digest
    assert snapshot({3, 1, 2}).digest == snapshot({1, 2, 3}).digest


def test_torch_dtypes_and_tensors_are_told_apart() -> None:
    torch = pytest.importorskip("torch")
    assert snapshot(torch.float16).digest != snapshot(torch.bfloat16).digest
    assert snapshot(torch.float16).summary == "torch.float16"
    assert snapshot(torch.zeros(3)).digest != snapshot(torch.ones(3)).digest


def test_numpy_ufuncs_are_named_leaves() -> None:
    np = pytest.importorskip("numpy")
    OP = np.add

    def kernel(x):
        return OP(x, x)

    before = flydeps.fingerprint(kernel)
    assert "external:numpy.add" in before.graph.nodes
    OP = np.multiply  # noqa: F841 - rebinding the closure cell
    after = flydeps.fingerprint(kernel)
    assert after.digest != before.digest


def test_global_dtype_rebinding_is_a_change(pkg) -> None:
    pytest.importorskip("torch")
    pkg.write("m", "import torch\nDTYPE = torch.float16\ndef k():\n    return DTYPE\n")
    m = pkg.load("m")
    before = flydeps.fingerprint(m.k)
    import torch

    m.DTYPE = torch.bfloat16
    after = flydeps.fingerprint(m.k)
    assert after.explain(before) == (f"global {pkg.name}.m:DTYPE changed: torch.float16 -> torch.bfloat16",)
