"""Bad inputs: hostile objects, C code, code without source, huge and cyclic values."""

from __future__ import annotations

import functools
import logging
import math
import sys

import pytest

import flydeps
from flydeps import DiscoveryError, NodeKind, cached_factory


class Hostile:
    def __eq__(self, other):
        raise RuntimeError("__eq__ must not be called")

    def __hash__(self):
        raise RuntimeError("__hash__ must not be called")

    def __repr__(self):
        raise RuntimeError("__repr__ must not be called")

    def __getattr__(self, name):
        raise RuntimeError(f"__getattr__({name}) must not be called")

    def __getattribute__(self, name):
        if name in ("__dict__", "__class__"):
            return object.__getattribute__(self, name)
        raise RuntimeError(f"__getattribute__({name}) must not be called")


def test_hostile_objects_everywhere() -> None:
    hostile = Hostile()
    holder = {"h": hostile, "items": [hostile, (hostile,)]}

    def kernel(x, d=hostile):
        return holder, d, x

    fp = flydeps.fingerprint(kernel)
    guard = fp.guard()
    assert guard.check()
    assert fp.guard().changes() == ()
    # Describing the hostile values for messages does not call them either.
    assert (
        "Hostile object"
        in fp.graph.nodes[f"{__name__}:test_hostile_objects_everywhere.<locals>.kernel#default.d"].detail
    )


def test_hostile_root_object() -> None:
    fp = flydeps.fingerprint(Hostile())
    assert fp.graph.nodes[fp.graph.roots[0]].kind in (NodeKind.OBJECT, NodeKind.GLOBAL)


@pytest.mark.parametrize("obj", [len, math.sqrt, str.join, [].append, object.__init__, sys.getsizeof, int])
def test_builtins_and_c_functions_are_external_leaves(obj) -> None:
    fp = flydeps.fingerprint(obj)
    (root,) = fp.graph.roots
    node = fp.graph.nodes[root]
    assert node.kind is NodeKind.EXTERNAL and node.detail.startswith("python=="), node


def test_functions_without_source() -> None:
    namespace: dict = {}
    exec("def made(x):\n    return helper(x) + 1\ndef helper(x):\n    return x\n", namespace)
    fp = flydeps.fingerprint(namespace["made"])
    assert f"{namespace['__name__'] if '__name__' in namespace else 'builtins'}:helper" in fp.graph.nodes or any(
        n.endswith(":helper") for n in fp.graph.nodes
    )
    repl_lambda = eval("lambda x: x + 41")  # as typed at a REPL: no file behind it
    d1 = flydeps.fingerprint(repl_lambda).digest
    assert d1 == flydeps.fingerprint(eval("lambda x: x + 41")).digest
    assert d1 != flydeps.fingerprint(eval("lambda x: x + 42")).digest


def test_self_containing_and_deep_globals() -> None:
    loop: list = [1]
    loop.append(loop)
    d: dict = {}
    d["self"] = d
    deep: list = []
    cur = deep
    for _ in range(10_000):
        nxt: list = []
        cur.append(nxt)
        cur = nxt

    def kernel():
        return loop, d, deep

    fp = flydeps.fingerprint(kernel)
    assert fp.guard().check()
    assert flydeps.fingerprint(kernel).digest == fp.digest


def test_huge_global_is_summarized_once(caplog) -> None:
    huge = dict.fromkeys(range(1_000_000))

    def kernel():
        return huge

    with caplog.at_level(logging.WARNING, logger="flydeps"):
        fp = flydeps.fingerprint(kernel)
    guard = fp.guard()
    assert any("fingerprinted by identity" in r.getMessage() for r in caplog.records)
    assert guard.check()  # and cheaply: no O(size) walk per check (see benchmarks)
    huge[-1] = None
    assert guard.check(), "above the bound only rebinding is detected (documented)"


def test_none_and_unanalysable_roots() -> None:
    with pytest.raises(DiscoveryError, match="cannot fingerprint None"):
        flydeps.fingerprint(None)
    assert isinstance(DiscoveryError("x"), TypeError)


def test_register_unwrapper_validates_arguments() -> None:
    with pytest.raises(TypeError, match="needs a class and a callable"):
        flydeps.register_unwrapper("JitFunction", lambda o: ())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="needs a Python function and a code object"):
        flydeps.note_code_rewrite(len, (lambda: 0).__code__)  # type: ignore[arg-type]


def test_factory_returning_hostile_values() -> None:
    @cached_factory
    def build(n):
        return Hostile()

    first = build(1)
    assert build(1) is first


def test_snapshot_limit_env_is_validated(monkeypatch) -> None:
    import importlib

    import flydeps.values.snapshot as values

    monkeypatch.setenv("FLYDEPS_SNAPSHOT_LIMIT", "lots")
    with pytest.raises(ValueError, match="FLYDEPS_SNAPSHOT_LIMIT='lots'"):
        importlib.reload(values)
    monkeypatch.setenv("FLYDEPS_SNAPSHOT_LIMIT", "256")
    importlib.reload(values)


def test_partial_of_builtin_and_cached_builtin() -> None:
    part = functools.partial(max, 3)
    assert flydeps.fingerprint(part).guard().check()
