"""PEP 509 dict version tags (CPython 3.10/3.11): ``flydeps.watch.watchers.tags_max``.

The guard's O(namespaces) check on 3.10/3.11 rests on one claim: the largest version tag of
a set of dicts changes whenever one of them is modified in a way an identity check could
see. These tests check that claim against the dicts' contents themselves (the oracle is a
shallow identity snapshot of every dict), for every kind of modification CPython offers,
including a hypothesis-generated sequence of them.
"""

from __future__ import annotations

import importlib
import platform
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flydeps.watch import watchers as _watch

pytestmark = pytest.mark.skipif(
    sys.version_info >= (3, 12) or platform.python_implementation() != "CPython",
    reason="PEP 509 tags are read on CPython 3.10/3.11 only (3.12+ uses dict watchers)",
)


def test_extension_is_built_and_selected() -> None:
    # CI builds the extension (a compiler is installed): silently losing it would make every
    # 3.10/3.11 guard O(bindings) again.
    assert _watch.TAGS, "flydeps.watch._dictver was not built: reinstall flydeps with a C compiler"


def _identity(d: dict) -> dict[object, int]:
    return {k: id(v) for k, v in list(d.items())}


class _Holder:
    attr = 1


def _class_dict(cls: type) -> dict:
    from flydeps.values.bindings import class_dict

    return class_dict(cls)


MODIFICATIONS = {
    "setitem": lambda d: d.__setitem__("a", object()),
    "delitem": lambda d: d.pop("a", None) if "a" in d else d.__setitem__("a", object()),
    "popitem": lambda d: d.popitem() if d else d.__setitem__("b", 1),
    "clear": lambda d: d.clear() if d else d.__setitem__("c", 1),
    "update": lambda d: d.update({"u": object()}),
    "ior": lambda d: d.__ior__({"v": object()}),
    "setdefault": lambda d: d.setdefault(f"s{len(d)}", object()),
}


@pytest.fixture()
def tags_max():
    if not _watch.TAGS:
        pytest.skip("flydeps.watch._dictver not built")
    return _watch.tags_max


@pytest.mark.parametrize("op", sorted(MODIFICATIONS))
def test_every_modification_moves_the_max(tags_max, op: str) -> None:
    dicts: tuple[dict[str, int], ...] = ({"a": 1, "x": 2}, {"y": 3}, {})
    before = tags_max(dicts)
    for d in dicts:
        MODIFICATIONS[op](d)
        now = tags_max(dicts)
        assert now > before, f"{op} on {d!r} left the largest tag unchanged"
        before = now


def test_module_and_class_namespaces(tags_max) -> None:
    mod = types.ModuleType("flydeps_tags_probe")
    exec("X = 1\ndef bump():\n    global X\n    X = object()\n", mod.__dict__)  # noqa: S102
    ns = (mod.__dict__, _class_dict(_Holder))
    t0 = tags_max(ns)
    for _ in range(20):  # past CPython's specialization warm-up of STORE_GLOBAL
        mod.bump()
        t1 = tags_max(ns)
        assert t1 > t0
        t0 = t1
    setattr(mod, "X", 5)
    assert tags_max(ns) > t0
    t0 = tags_max(ns)
    _Holder.attr = object()  # type: ignore[assignment]  # a class-dict write of another type
    assert tags_max(ns) > t0


def test_reload_moves_the_max(tags_max, tmp_path, monkeypatch) -> None:
    (tmp_path / "flydeps_tag_reload.py").write_text("A = [1]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("flydeps_tag_reload")
    try:
        t0 = tags_max((mod.__dict__,))
        importlib.reload(mod)
        assert tags_max((mod.__dict__,)) > t0
    finally:
        sys.modules.pop("flydeps_tag_reload", None)


def test_re_setting_the_same_object_is_not_a_change(tags_max) -> None:
    value = object()
    d = {"k": value}
    t0 = tags_max((d,))
    d["k"] = value
    assert tags_max((d,)) == t0


def test_unrelated_dicts_do_not_move_it(tags_max) -> None:
    mine, other = {"k": 1}, {"k": 1}
    t0 = tags_max((mine,))
    for i in range(100):
        other[i] = i  # type: ignore[index]  # new int keys, deliberately
    assert tags_max((mine,)) == t0


@pytest.mark.parametrize("bad", [[{}], ({}, 1), "x", None, ({}, types.MappingProxyType({}))])
def test_bad_input_is_a_type_error(tags_max, bad) -> None:
    with pytest.raises(TypeError, match="tuple of dicts"):
        tags_max(bad)


_OPS = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from(["set", "same", "del", "clear", "update", "noop"]), st.integers(0, 4)),
    max_size=40,
)


@settings(max_examples=200, deadline=None)
@given(_OPS)
def test_max_moves_exactly_when_identities_change(ops) -> None:
    if not _watch.TAGS:
        pytest.skip("flydeps.watch._dictver not built")
    dicts: tuple[dict[int, object], ...] = ({0: "a"}, {1: "b"}, {2: "c"})
    for index, op, key in ops:
        d = dicts[index]
        before_ids = [_identity(x) for x in dicts]
        before = _watch.tags_max(dicts)
        if op == "set":
            d[key] = object()
        elif op == "same" and key in d:
            d[key] = d[key]
        elif op == "del" and key in d:
            del d[key]
        elif op == "clear":
            d.clear()
        elif op == "update":
            d.update({key: object()})
        changed = [_identity(x) for x in dicts] != before_ids
        moved = _watch.tags_max(dicts) != before
        if changed:
            assert moved, f"{op} {key} on dict {index} changed its contents but not the tag"
        if not moved:
            assert not changed
