"""Value snapshots cover every stdlib container and subclasses of builtins, and a rebinding
is always a change whatever the size (the value-type table of docs/guarantees.md).

The oracle is a value read back: a ``cached_factory`` build returns what a trace could
observe of a global (``observe(V)``, plain Python: iteration order, bits of a float, a
defaultdict's factory, a deque's maxlen, ...). After each change the factory must return the
observation of the new value, computed afresh: a stale build shows up as the old one.
"""

from __future__ import annotations

import array
import collections
import dataclasses
import decimal
import enum
import fractions
import json
import os
import struct
import subprocess
import sys
import types
import typing

import pytest

import flydeps
from flydeps.values.snapshot import snapshot

BIG = 1 << 20  # above the streamed-content threshold of str/bytes-like values


class Color(enum.Enum):
    RED = 1
    BLUE = 2


class Flag(enum.IntEnum):
    A = 1
    B = 2


Point = collections.namedtuple("Point", "x y")
Other = collections.namedtuple("Other", "x y")


class Pair(typing.NamedTuple):
    x: int
    y: int


@dataclasses.dataclass
class Conf:
    block: int = 4
    mode: str = "fast"


@dataclasses.dataclass(frozen=True)
class Frozen:
    block: int = 4


class MyInt(int):
    pass


class MyStr(str):
    pass


class MyDict(dict):
    pass


class MyList(list):
    pass


class MyTuple(tuple):
    pass


class Liar(int):
    """An int subclass whose == says every Liar is equal: contents must be read, not compared."""

    def __eq__(self, other: object) -> bool:
        return True

    __hash__ = int.__hash__


def nan(payload: int) -> float:
    return struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000000 | payload))[0]


def with_attr(obj: object, **attrs: object) -> object:
    for k, v in attrs.items():
        setattr(obj, k, v)
    return obj


def big_list(last: int) -> list[int]:
    return [0] * 299 + [last]


def observe(v: object) -> object:
    """What a trace could see of ``v``: plain Python, independent of flydeps."""
    if isinstance(v, float):
        return ("float", struct.pack("<d", v))
    if isinstance(v, complex):
        return ("complex", struct.pack("<dd", v.real, v.imag))
    if isinstance(v, enum.Enum):
        return (type(v).__name__, v.name, v.value)
    if isinstance(v, collections.defaultdict):
        return (v.default_factory, list(v.items()))
    if isinstance(v, collections.deque):
        return (v.maxlen, list(v))
    if isinstance(v, collections.ChainMap):
        return [list(m.items()) for m in v.maps]
    if isinstance(v, (set, frozenset)):
        return (type(v).__name__, sorted(v))
    if isinstance(v, array.array):
        return (v.typecode, v.tobytes())
    if isinstance(v, (bytearray, memoryview)):
        return bytes(v)
    if dataclasses.is_dataclass(v):
        return (type(v).__name__, dataclasses.astuple(v))  # type: ignore[arg-type]  # values are instances
    if isinstance(v, types.SimpleNamespace):
        return list(vars(v).items())
    if isinstance(v, (fractions.Fraction, decimal.Decimal)):
        return str(v)
    state = dict(getattr(v, "__dict__", {}))
    if isinstance(v, dict):
        return (type(v).__name__, list(v.items()), state)
    if isinstance(v, (list, tuple)):
        if len(v) > 256:
            return (type(v).__name__, len(v), v[-1])
        return (type(v).__name__, list(v), state)
    if isinstance(v, (str, bytes)):
        return (type(v).__name__, len(v), v[-2:], state)
    if isinstance(v, int):
        return (type(v).__name__, int.__index__(v), state)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(v, np.ndarray):
        return (v.dtype.str, v.shape, v.tobytes()[-8:])
    raise AssertionError(f"no observation for {type(v)}")


# (id, before, change): change is ("rebind", new value) or ("mutate", fn(value)).
CASES = [
    ("float -0.0", 0.0, ("rebind", -0.0)),
    ("float nan payload", nan(1), ("rebind", nan(2))),
    ("complex signed zero", complex(0.0, 0.0), ("rebind", complex(0.0, -0.0))),
    ("dict order", {"a": 1, "b": 2}, ("rebind", {"b": 2, "a": 1})),
    ("OrderedDict order", collections.OrderedDict(a=1, b=2), ("mutate", lambda v: v.move_to_end("a"))),
    (
        "defaultdict factory",
        collections.defaultdict(list, a=[1]),
        ("mutate", lambda v: setattr(v, "default_factory", set)),
    ),
    ("defaultdict content", collections.defaultdict(int, a=1), ("mutate", lambda v: v.__setitem__("a", 2))),
    ("deque maxlen", collections.deque([1, 2], maxlen=4), ("rebind", collections.deque([1, 2], maxlen=5))),
    ("deque content", collections.deque([1, 2]), ("mutate", lambda v: v.rotate(1))),
    ("Counter", collections.Counter("aab"), ("mutate", lambda v: v.update("b"))),
    ("ChainMap", collections.ChainMap({"a": 1}, {"b": 2}), ("mutate", lambda v: v.maps[1].__setitem__("b", 3))),
    ("set", {1, 2}, ("mutate", lambda v: v.add(3))),
    ("frozenset", frozenset({1, 2}), ("rebind", frozenset({1, 3}))),
    ("array.array typecode", array.array("i", [1, 2]), ("rebind", array.array("l", [1, 2]))),
    ("array.array content", array.array("i", [1, 2]), ("mutate", lambda v: v.__setitem__(0, 5))),
    ("bytearray", bytearray(b"ab"), ("mutate", lambda v: v.__setitem__(0, 0x7A))),
    ("memoryview", memoryview(bytearray(b"ab")), ("mutate", lambda v: v.__setitem__(0, 0x7A))),
    ("enum member", Color.RED, ("rebind", Color.BLUE)),
    ("IntEnum member", Flag.A, ("rebind", Flag.B)),
    ("namedtuple", Point(1, 2), ("rebind", Point(1, 3))),
    ("namedtuple type", Point(1, 2), ("rebind", Other(1, 2))),
    ("NamedTuple", Pair(1, 2), ("rebind", Pair(2, 1))),
    ("dataclass", Conf(), ("mutate", lambda v: setattr(v, "block", 8))),
    ("frozen dataclass", Frozen(4), ("rebind", Frozen(8))),
    ("SimpleNamespace", types.SimpleNamespace(a=1), ("mutate", lambda v: setattr(v, "a", 2))),
    ("Fraction", fractions.Fraction(1, 3), ("rebind", fractions.Fraction(2, 3))),
    ("Decimal", decimal.Decimal("1.10"), ("rebind", decimal.Decimal("1.1"))),
    ("Decimal negative zero", decimal.Decimal("0"), ("rebind", decimal.Decimal("-0"))),
    ("int subclass", MyInt(3), ("rebind", MyInt(4))),
    ("int subclass vs int", MyInt(3), ("rebind", 3)),
    ("int subclass __dict__", with_attr(MyInt(3), tag="a"), ("mutate", lambda v: setattr(v, "tag", "b"))),
    ("int subclass lying __eq__", Liar(3), ("rebind", Liar(4))),
    ("str subclass", MyStr("ab"), ("rebind", MyStr("ac"))),
    ("dict subclass", MyDict(a=1), ("mutate", lambda v: v.__setitem__("a", 2))),
    ("list subclass", MyList([1, 2]), ("mutate", lambda v: v.append(3))),
    ("tuple subclass", MyTuple((1, 2)), ("rebind", MyTuple((1, 3)))),
    ("list above the bound", big_list(1), ("rebind", big_list(2))),
    ("dict above the bound", {i: 0 for i in range(300)}, ("rebind", {**{i: 0 for i in range(299)}, 299: 1})),
    ("str over 1 MiB", "a" * BIG + "b", ("rebind", "a" * BIG + "c")),
    ("bytes over 1 MiB", b"a" * BIG + b"b", ("rebind", b"a" * BIG + b"c")),
    ("bytearray over 1 MiB", bytearray(b"a" * BIG + b"b"), ("rebind", bytearray(b"a" * BIG + b"c"))),
]


def _factory(pkg, value: object):
    pkg.write("cfg", "V = None\nOBSERVE = None\ndef make():\n    return OBSERVE(V)\n")
    m = pkg.load("cfg")
    m.V = value
    builds: list[object] = []

    def counting(v: object) -> object:
        builds.append(1)
        return observe(v)

    m.OBSERVE = counting
    return m, flydeps.cached_factory(maxsize=None)(m.make), builds


@pytest.mark.parametrize("before,change", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_every_change_of_a_value_is_seen(pkg, before: object, change: tuple) -> None:
    m, make, builds = _factory(pkg, before)
    seen = observe(before)
    assert make() == seen
    assert make() == seen and len(builds) == 1  # a hit
    how, what = change
    if how == "rebind":
        m.V = what
    else:
        what(m.V)
    now = observe(m.V)
    assert now != seen, "the case must change what a trace observes"
    assert make() == now  # rebuilt: the read-back value is the new one
    assert len(builds) == 2


def test_large_numpy_array_rebound_to_same_length(pkg) -> None:
    np = pytest.importorskip("numpy")
    a = np.zeros((1 << 18) + 16, dtype=np.float32)  # over 1 MiB of data
    b = a.copy()
    b[-1] = 1.0
    m, make, builds = _factory(pkg, a)
    assert make() == observe(a)
    m.V = b
    assert make() == observe(b) and len(builds) == 2
    assert snapshot(a).digest != snapshot(b).digest
    assert snapshot(a).digest == snapshot(a.copy()).digest  # content, not identity


EQUAL = [
    ("float nan same bits", nan(1), nan(1)),
    ("namedtuple", Point(1, 2), Point(1, 2)),
    ("OrderedDict", collections.OrderedDict(a=1), collections.OrderedDict(a=1)),
    ("defaultdict", collections.defaultdict(list, a=[1]), collections.defaultdict(list, a=[1])),
    ("deque", collections.deque([1], maxlen=3), collections.deque([1], maxlen=3)),
    ("int subclass", MyInt(3), MyInt(3)),
    ("dataclass", Conf(), Conf()),
    ("Decimal", decimal.Decimal("1.10"), decimal.Decimal("1.10")),
    ("array", array.array("i", [1]), array.array("i", [1])),
    ("str over 1 MiB", "a" * BIG, "a" * BIG),
]


@pytest.mark.parametrize("a,b", [c[1:] for c in EQUAL], ids=[c[0] for c in EQUAL])
def test_equal_contents_in_new_objects_are_not_a_change(pkg, a: object, b: object) -> None:
    assert a is not b and observe(a) == observe(b)
    assert snapshot(a).digest == snapshot(b).digest
    m, make, builds = _factory(pkg, a)
    make()
    m.V = b  # the guard fails (a new object); the digest is equal: no rebuild
    make()
    assert len(builds) == 1


def test_oversized_values_keep_their_inner_watches(pkg) -> None:
    # The small dict around a big table is still watched in place.
    conf = {"table": list(range(1000)), "mode": 1}
    m, make, builds = _factory(pkg, conf)
    make()
    conf["mode"] = 2
    assert make() == observe(conf) and len(builds) == 2


def test_digests_are_stable_across_processes() -> None:
    script = (
        "import collections, json, flydeps\n"
        "from flydeps.values.snapshot import snapshot\n"
        "vals = [{'b': 1, 'a': frozenset({'x', 'y', 'z'})}, collections.OrderedDict(q={'s', 't'}), -0.0, (1, 'é')]\n"
        "print(json.dumps([snapshot(v).digest for v in vals]))\n"
    )
    outs = set()
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
        outs.add(tuple(json.loads(out.stdout)))
    assert len(outs) == 1
