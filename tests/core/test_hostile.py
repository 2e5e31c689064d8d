"""The hostile-object gallery: discovery, fingerprints, guards and cached_factory never run
user code and never raise, whatever the objects a kernel reads.

Every hook of the gallery (an instance dunder, a metaclass method, a property, a
descriptor, an overridden builtin method) records its name, writes a file into a trap
directory and raises. The oracle is that side effect: after discovering, fingerprinting,
guarding and caching a kernel that reads the object in every way the bytecode allows
(global, attribute chain, default, closure cell, ``self.`` attribute, dispatch table), no
hook ran (no name recorded, no file written) and nothing was raised.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import flydeps
from flydeps import discover, fingerprint

GALLERY_SOURCE = r"""
import array, collections, dataclasses, enum, functools, os, types, typing, weakref

HITS = []
WHERE = []  # the flydeps frame that ran each hook, for the failure message
TRAP_DIR = [None]


def _hit(what):
    HITS.append(what)
    import traceback
    WHERE.append([f"{f.filename.rpartition('/')[2]}:{f.lineno} {f.name}" for f in traceback.extract_stack()[-6:-1]])
    if TRAP_DIR[0] is not None:
        with open(os.path.join(TRAP_DIR[0], "%d-%s" % (len(HITS), what.strip("_"))), "w") as f:
            f.write(what)
    raise RuntimeError("user code ran: " + what)


def _trap(what):
    def hook(*args, **kwargs):
        _hit(what)
    return hook


def _prop(what):
    return property(_trap(what))


class _Descriptor:
    def __init__(self, what):
        self.what = what
    def __get__(self, obj, owner=None):
        _hit(self.what + ".__get__")


class _DataDescriptor(_Descriptor):
    def __set__(self, obj, value):
        _hit(self.what + ".__set__")


def _traps(*names):
    return {name: _trap(name) for name in names}


G = {}

# -- instances: each dunder of the class raises and writes a file ------------------------
INSTANCE_DUNDERS = [
    "__getattribute__", "__getattr__", "__eq__", "__ne__", "__hash__", "__lt__", "__repr__",
    "__str__", "__format__", "__len__", "__iter__", "__bool__", "__contains__", "__getitem__",
    "__reduce__", "__reduce_ex__", "__getstate__", "__copy__", "__deepcopy__", "__call__",
    "__index__", "__int__", "__float__", "__bytes__", "__fspath__", "__dir__", "__sizeof__",
    "__instancecheck__", "__subclasscheck__", "__mro_entries__",
]
for _name in INSTANCE_DUNDERS:
    G["inst" + _name] = type("Inst" + _name.strip("_"), (), {_name: _trap(_name)})()
G["inst_all_dunders"] = type("InstAll", (), _traps(*INSTANCE_DUNDERS))()

# -- properties and descriptors standing for the attributes discovery reads ---------------
for _attr in ["__class__", "__dict__", "__module__", "__name__", "__wrapped__", "__code__", "__func__",
              "__self__", "__doc__", "__annotations__", "__signature__", "func", "fget"]:
    G["prop" + _attr] = type("Prop" + _attr.strip("_"), (), {_attr: _prop("property " + _attr)})()
G["data_descriptor_dict"] = type("DescDict", (), {"__dict__": _DataDescriptor("__dict__")})()
G["data_descriptor_class"] = type("DescClass", (), {"__class__": _DataDescriptor("__class__")})()
G["slots_object"] = type("Slotted", (), {"__slots__": ("a", "b")})()
object.__setattr__(G["slots_object"], "a", 1)
G["hidden_dict_with_state"] = type("Hidden", (), {"__dict__": _prop("hidden __dict__")})()
object.__setattr__(G["hidden_dict_with_state"], "x", 1)

# -- metaclasses: the class and an instance of it ------------------------------------------
META_DUNDERS = [
    "__getattribute__", "__getattr__", "__eq__", "__ne__", "__hash__", "__len__", "__iter__",
    "__bool__", "__repr__", "__str__", "__instancecheck__", "__subclasscheck__", "__call__",
    "__contains__", "__getitem__", "__or__", "__lt__",
]
for _name in META_DUNDERS:
    _meta = type("Meta" + _name.strip("_"), (type,), {_name: _trap("metaclass " + _name)})
    _cls = _meta("MetaCls" + _name.strip("_"), (), {"value": 1, "run": lambda self: 1})
    G["meta" + _name] = _cls
    G["meta_instance" + _name] = type.__call__(_cls)
for _attr in ["__module__", "__name__", "__dict__", "__mro__", "__bases__", "__class__"]:
    _meta = type("MetaProp" + _attr.strip("_"), (type,), {_attr: _prop("metaclass property " + _attr)})
    _cls = _meta("MetaPropCls" + _attr.strip("_"), (), {"value": 1})
    G["meta_prop" + _attr] = _cls
    G["meta_prop_instance" + _attr] = type.__call__(_cls)
_BAD_MODULE = type("BadModuleName", (), _traps("__eq__", "__hash__", "__str__", "__repr__", "__format__"))()
G["class_module_not_str"] = type("ModuleInt", (), {"value": 1})
type.__dict__["__module__"].__set__(G["class_module_not_str"], 3)
G["class_module_hostile"] = type("ModuleHostile", (), {"value": 1})
type.__dict__["__module__"].__set__(G["class_module_hostile"], _BAD_MODULE)
G["instance_of_module_not_str"] = G["class_module_hostile"]()
G["class_with_descriptors"] = type("WithDescriptors", (), {
    "data": _DataDescriptor("class data descriptor"),
    "nondata": _Descriptor("class non-data descriptor"),
    "prop": _prop("class property"),
    "__wrapped__": _prop("class __wrapped__"),
})
type.__setattr__(G["class_with_descriptors"], "__slots__", type("SlotsSeq", (), _traps("__iter__", "__len__"))())


class _HostileModule(types.ModuleType):
    def __getattribute__(self, name):
        _hit("module __getattribute__ " + name)
    def __getattr__(self, name):
        _hit("module __getattr__ " + name)
    def __eq__(self, other):
        _hit("module __eq__")
    __hash__ = _trap("module __hash__")
    __repr__ = _trap("module __repr__")


G["module_subclass"] = _HostileModule("gallery_hostile_module")
types.ModuleType.__dict__["__dict__"].__get__(G["module_subclass"])["value"] = 3

# -- subclasses of builtins whose methods are all overridden -------------------------------
def _overriding(base, *names):
    return type("Hostile" + base.__name__, (base,), _traps(*names))

_COMMON = ("__eq__", "__ne__", "__hash__", "__repr__", "__str__", "__len__", "__iter__", "__getitem__",
           "__contains__", "__bool__", "__reduce__", "__reduce_ex__", "__getattribute__", "__format__")
G["dict_subclass"] = _overriding(dict, *_COMMON, "items", "keys", "values", "get", "copy")({"a": 1, "b": [2]})
G["list_subclass"] = _overriding(list, *_COMMON, "copy", "__reversed__")([1, 2, [3]])
G["tuple_subclass"] = _overriding(tuple, *_COMMON)((1, 2))
G["set_subclass"] = _overriding(set, *_COMMON, "copy")({1, 2})
G["frozenset_subclass"] = _overriding(frozenset, *_COMMON, "copy")({1, 2})
G["str_subclass"] = _overriding(str, *_COMMON, "encode", "__add__")("text")
G["int_subclass"] = _overriding(int, *_COMMON, "__index__", "__int__", "bit_length", "__float__")(7)
G["float_subclass"] = _overriding(float, *_COMMON, "__float__", "hex", "__int__")(1.5)
G["complex_subclass"] = _overriding(complex, *_COMMON, "__complex__")(1 + 2j)
G["bytes_subclass"] = _overriding(bytes, *_COMMON, "__bytes__", "hex")(b"raw")
G["bytearray_subclass"] = _overriding(bytearray, *_COMMON, "copy", "hex")(b"raw")
G["odict_subclass"] = _overriding(collections.OrderedDict, *_COMMON, "items", "keys", "values", "move_to_end")(a=1)
G["defaultdict_hostile_factory"] = collections.defaultdict(_trap("default_factory called"), {"a": 1})
G["defaultdict_subclass"] = _overriding(collections.defaultdict, *_COMMON, "__missing__", "items")(list)
G["deque_subclass"] = _overriding(collections.deque, *_COMMON, "copy", "__copy__")([1, 2], 5)
G["counter_subclass"] = collections.Counter("aab")  # made first: Counter.__init__ is Python
G["counter_subclass"].__class__ = _overriding(collections.Counter, *_COMMON, "items", "elements")
G["chainmap"] = collections.ChainMap({"a": 1}, G["dict_subclass"])
G["array_subclass"] = _overriding(array.array, *_COMMON, "tobytes", "tolist")("i", [1, 2])
G["memoryview_of_hostile_bytes"] = memoryview(G["bytearray_subclass"])

_Point = collections.namedtuple("_Point", "x y")
G["namedtuple_subclass"] = type("HostilePoint", (_Point,), _traps(*_COMMON, "_asdict", "__getnewargs__"))(1, 2)


class _NT(typing.NamedTuple):
    x: int
    y: int
    def __iter__(self):
        _hit("NamedTuple __iter__")
    def __getitem__(self, i):
        _hit("NamedTuple __getitem__")


G["typing_namedtuple"] = _NT(1, 2)


class _Color(enum.Enum):
    RED = 1
    def __eq__(self, other):
        _hit("enum __eq__")
    __hash__ = _trap("enum __hash__")
    __repr__ = _trap("enum __repr__")
    __str__ = _trap("enum __str__")
    __reduce_ex__ = _trap("enum __reduce_ex__")


G["enum_member"] = _Color.RED


class _Level(enum.IntEnum):
    LOW = 1
    __index__ = _trap("IntEnum __index__")
    __repr__ = _trap("IntEnum __repr__")


G["int_enum_member"] = _Level.LOW


@dataclasses.dataclass(frozen=True)
class _Conf:
    block: int = 4
    def __getattribute__(self, name):
        _hit("dataclass __getattribute__ " + name)
    __eq__ = _trap("dataclass __eq__")
    __hash__ = _trap("dataclass __hash__")
    __repr__ = _trap("dataclass __repr__")


G["dataclass_instance"] = _Conf()
G["namespace_subclass"] = _overriding(types.SimpleNamespace, *_COMMON)(a=1)

# -- functions with hostile attributes -----------------------------------------------------
def _plain(x, y=1, *, z=2):
    return x + y + z

_f = types.FunctionType(_plain.__code__, _plain.__globals__, "odd_defaults")
_f.__defaults__ = _overriding(tuple, *_COMMON)((5,))
_f.__kwdefaults__ = _overriding(dict, *_COMMON, "items", "keys", "get")(z=3)
_f.__annotations__ = _overriding(dict, *_COMMON, "items", "keys")(x=int)
_f.__module__ = _BAD_MODULE
G["function_odd_attributes"] = _f
_g = types.FunctionType(_plain.__code__, _plain.__globals__, "odd_dict")
_g.__dict__ = _overriding(dict, *_COMMON, "items", "get", "keys")()
G["function_odd_dict"] = _g
_w = types.FunctionType(_plain.__code__, _plain.__globals__, "wraps_hostile")
_w.__wrapped__ = G["inst_all_dunders"]
G["function_wrapping_hostile"] = _w
_loop = types.FunctionType(_plain.__code__, _plain.__globals__, "wraps_itself")
_loop.__wrapped__ = _loop
G["function_wrapping_itself"] = _loop

# -- wrappers and bound methods around hostile objects --------------------------------------
G["partial_subclass"] = type("HostilePartial", (functools.partial,), {
    "__getattribute__": _trap("partial __getattribute__"), "func": _prop("partial func property"),
})(_plain, 1)
G["partial_of_hostile"] = functools.partial(G["inst__call__"], G["inst__eq__"], k=G["inst__hash__"])
G["property_subclass"] = type("HostileProperty", (property,), {
    "__getattribute__": _trap("property __getattribute__"), "fget": _prop("property fget property"),
})(_plain)
G["staticmethod_subclass"] = type("HostileStatic", (staticmethod,), {
    "__getattribute__": _trap("staticmethod __getattribute__"), "__func__": _prop("staticmethod __func__"),
})(_plain)
G["staticmethod_of_hostile"] = staticmethod(G["inst__call__"])
G["bound_to_hostile_instance"] = types.MethodType(_plain, G["inst_all_dunders"])
G["bound_to_meta_instance"] = types.MethodType(_plain, G["meta_instance__getattribute__"])
G["bound_hostile_callable"] = types.MethodType(G["inst_all_dunders"], 1)
G["weakref_proxy"] = weakref.proxy(G["inst_all_dunders"])
_target = type("Callable", (), {"__call__": _trap("proxied __call__"), "__getattribute__": _trap("proxied attr")})()
G["weakref_callable_proxy"] = weakref.proxy(_target)
G["weakref_ref"] = weakref.ref(_target)

# -- containers holding hostile objects (keys, values, nested) ------------------------------
_EqKey = type("EqKey", (), {**_traps("__eq__", "__ne__", "__lt__", "__repr__", "__getattribute__"),
                             "__hash__": object.__hash__})
G["dict_hostile_keys"] = {_EqKey(): G["inst_all_dunders"], _EqKey(): 1, "k": G["dict_subclass"]}
G["set_of_hostile"] = {_EqKey(), _EqKey(), G["inst__repr__"]}
G["tuple_of_hostile"] = (G["inst_all_dunders"], G["meta__eq__"], G["module_subclass"])
G["table_of_hostile_callables"] = {"a": G["inst__call__"], "b": G["meta__call__"], "c": G["partial_subclass"]}


class Owner:
    data = _DataDescriptor("self.data descriptor")
    nondata = _Descriptor("self.nondata descriptor")
    prop = _prop("self.prop property")
    hostile = G["inst_all_dunders"]
    meta = G["meta__getattribute__"]

    def run(self):
        return self.data, self.nondata, self.prop, self.hostile, self.meta, self.missing


globals().update({"H_" + k: v for k, v in G.items()})
NAMES = list(G)
"""


def _kernels(names: list[str]) -> str:
    """One kernel per gallery entry, reading it in every way the bytecode allows."""
    out = []
    for name in names:
        out.append(
            f"""
def kernel_{name}(x, d=H_{name}, *, k=H_{name}):
    cell = H_{name}
    def inner():
        return cell
    return H_{name}, H_{name}.attr, H_{name}.value.deeper, inner, d, k, TABLE_{name}["a"](x), x
TABLE_{name} = {{"a": H_{name}}}
"""
        )
    out.append(
        """
def kernel_all(x):
    return [K(x) for K in ALL], Owner().run(), Owner.run
ALL = [v for n, v in list(globals().items()) if n.startswith("kernel_") and n != "kernel_all"]
"""
    )
    return "".join(out)


@pytest.fixture(scope="module")
def gallery(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("gallery")
    trap = root / "trap"
    trap.mkdir()
    (root / "hostile_gallery.py").write_text(GALLERY_SOURCE)
    sys.path.insert(0, str(root))
    try:
        import hostile_gallery as g  # noqa: PLC0415 - written above

        kernels = root / "hostile_gallery_kernels.py"
        kernels.write_text("from hostile_gallery import *\nfrom hostile_gallery import Owner\n" + _kernels(g.NAMES))
        import hostile_gallery_kernels as k  # noqa: PLC0415

        g.TRAP_DIR[0] = str(trap)
        yield g, k, trap
    finally:
        sys.path.remove(str(root))
        sys.modules.pop("hostile_gallery", None)
        sys.modules.pop("hostile_gallery_kernels", None)


def _assert_untouched(g, trap: Path) -> None:
    assert g.HITS == [], f"user code ran: {g.HITS}"
    assert sorted(os.listdir(trap)) == []


def test_gallery_is_large_and_armed(gallery) -> None:
    g, k, trap = gallery
    assert len(g.NAMES) >= 68
    # The traps work: touching one the ordinary way runs user code (and is undone).
    with pytest.raises(RuntimeError, match="user code ran"):
        isinstance(g.G["inst__getattribute__"], int)
    assert os.listdir(trap) and g.HITS
    for name in os.listdir(trap):
        (trap / name).unlink()
    g.HITS.clear()


def _exercise(root: object) -> None:
    graph = discover(root)
    assert graph.roots
    first = fingerprint(root)
    second = fingerprint(root)
    assert first.digest == second.digest  # stable: no digest made of anything that moves
    guard = first.guard()
    assert guard.check() is True
    assert guard.changes() == ()
    assert first.explain(second) == ()


def test_each_hostile_object_is_read_without_running_user_code(gallery) -> None:
    g, k, trap = gallery
    failures = {}
    for name in g.NAMES:
        try:
            _exercise(getattr(k, f"kernel_{name}"))
        except Exception as exc:  # noqa: BLE001 - collected and reported together
            failures[name] = f"{type(exc).__name__}: {str(exc)[:200]}"
        if g.HITS:
            failures[name] = f"ran user code: {g.HITS} from {g.WHERE[0]}"
            g.HITS.clear()
            g.WHERE.clear()
    assert failures == {}
    _assert_untouched(g, trap)


def test_whole_gallery_through_cached_factory_and_a_change(gallery) -> None:
    g, k, trap = gallery
    _exercise(k.kernel_all)
    builds = []

    @flydeps.cached_factory(maxsize=None)
    def make(n: int):
        builds.append(n)
        return k.kernel_all

    assert make(1) is k.kernel_all and make(1) is k.kernel_all
    assert builds == [1] and make.cache_info().hits == 1
    fp = fingerprint(k.kernel_all)
    guard = fp.guard()
    before = k.H_inst_all_dunders
    k.H_inst_all_dunders = g.G["inst__eq__"]  # rebinding a hostile global to another one
    try:
        assert guard.check() is False
        changes = guard.changes()
        assert any(c.name == "H_inst_all_dunders" for c in changes)
        assert all(isinstance(str(c), str) for c in changes)
        assert fingerprint(k.kernel_all).digest != fp.digest
        make(1)
        assert builds == [1, 1]  # the data change rebuilt the entry (default on_drift)
    finally:
        k.H_inst_all_dunders = before
    _assert_untouched(g, trap)
