"""Value snapshots: stable, bounded, and precise for library values used by kernels."""

from __future__ import annotations

import enum

import pytest

import flydeps
from flydeps.values.snapshot import snapshot


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


def test_set_digests_ignore_order_and_dict_digests_follow_it() -> None:
    # A set's iteration order is the hash table's (PYTHONHASHSEED for strings): not in the digest.
    assert snapshot({3, 1, 2}).digest == snapshot({1, 2, 3}).digest
    assert snapshot(frozenset("abc")).digest == snapshot(frozenset("cba")).digest
    # A dict iterates in insertion order, and so does a trace that loops over it.
    assert snapshot({"b": 2, "a": 1}).digest != snapshot({"a": 1, "b": 2}).digest
    assert snapshot({"b": 2, "a": 1}).digest == snapshot(dict([("b", 2), ("a", 1)])).digest


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


REGISTRY_MODULE = """
import collections

REGISTRY = {f"k{i}": i for i in range(100)}
ITEMS = list(range(100))
SEEN = set(range(100))
QUEUE = collections.deque(range(100))
ORDER = collections.OrderedDict((i, i) for i in range(100))


class Table:
    pass


for _i in range(100):
    setattr(Table, f"a{_i}", _i)


def kernel(x):
    return REGISTRY, ITEMS, SEEN, QUEUE, ORDER, Table.a0, x
"""


def test_concurrent_mutation_never_escapes(pkg) -> None:
    """A thread resizes every container a kernel reads (a registry dict, a list, a set, a
    deque, an OrderedDict, a class namespace) while this one fingerprints, checks guards
    and calls a cached factory in a loop: no exception escapes (issue 8.3)."""
    import sys
    import threading

    pkg.write("reg", REGISTRY_MODULE)
    m = pkg.load("reg")
    stop = threading.Event()
    mutations = [0]

    def mutate() -> None:
        n = 0
        while not stop.is_set():
            n += 1
            new, old = n % 50, (n + 25) % 50
            m.REGISTRY[f"x{new}"] = n
            m.REGISTRY.pop(f"x{old}", None)
            m.ITEMS.append(n)
            del m.ITEMS[-1]
            m.SEEN.add(1000 + new)
            m.SEEN.discard(1000 + old)
            m.QUEUE.append(n)
            m.QUEUE.popleft()
            m.ORDER[1000 + new] = n
            m.ORDER.pop(1000 + old, None)
            setattr(m.Table, f"x{new}", n)
            if hasattr(m.Table, f"x{old}"):
                delattr(m.Table, f"x{old}")
            mutations[0] = n

    make = flydeps.cached_factory(maxsize=None)(lambda: m.kernel)
    errors: list[BaseException] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=mutate, daemon=True)
    thread.start()
    try:
        for _ in range(150):
            try:
                fp = flydeps.fingerprint(m.kernel)
                guard = fp.guard()
                guard.check()
                guard.changes()
                make()
            except Exception as exc:  # noqa: BLE001 - counted: none may escape
                errors.append(exc)
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(interval)
    assert mutations[0] > 0
    assert [f"{type(e).__name__}: {e}" for e in errors] == []
