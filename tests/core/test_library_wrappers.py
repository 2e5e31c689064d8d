"""User helpers wrapped by a library decorator are walked; the wrapper stays a library leaf.

Two real library decorators: ``kerneldeco.traced`` (``examples/kerneldeco``, installed
non-editable into the test environments: its code lives in site-packages) and FlyDSL's own
``flydsl.expr.meta.dsl_loc_tracing``. The oracle is a value read back: a ``cached_factory``
build returns what the kernel computes through the wrapped helper; after each mutation of
the helper (its code, defaults, callee, closure, the wrapper's link to it, an edit + reload)
the factory must return what the mutated code computes, evaluated afresh.
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Callable, Iterator

import pytest

import flydeps
from flydeps import EdgeKind, NodeKind, discover
from flydeps.code.bytecode import code_digest

kerneldeco = pytest.importorskip("kerneldeco", reason="pip install ./examples/kerneldeco (see .ci/run)")

HELPERS = """
from kerneldeco import traced, traced_with

SCALE = 10

def inner(x):
    return x + 1

@traced
def helper(x, k=2):
    return inner(x) * k + SCALE

@traced
@traced_with("tag")
def stacked(x):
    return inner(x) - 1

def alternative(x, k=2):
    return -x
"""

KERNEL = """
from . import helpers

def kernel(x):
    return helpers.helper(x), helpers.stacked(x)
"""


def _package(pkg) -> tuple[types.ModuleType, types.ModuleType]:
    pkg.write("helpers", HELPERS)
    pkg.write("kern", KERNEL)
    return pkg.load("helpers"), pkg.load("kern")


def test_installed_decorator_is_library_code() -> None:
    from flydeps.code import origin as _origin

    assert _origin.is_external_module("kerneldeco")
    assert "site-packages" in kerneldeco.__file__


def test_wrapped_helper_is_walked_and_the_wrapper_stays_a_leaf(pkg) -> None:
    helpers, kern = _package(pkg)
    graph = discover(kern.kernel)
    name = f"{pkg.name}.helpers"
    node = graph.nodes[f"{name}:helper"]
    assert node.kind is NodeKind.FUNCTION
    assert node.digest == code_digest(helpers.helper.__wrapped__.__code__)
    out = {e.label: (e.dst, e.kind) for e in graph.successors(node.id)}
    assert out["inner"] == (f"{name}:inner", EdgeKind.CALLS)
    assert out["SCALE"][1] is EdgeKind.READS
    assert out["k"][1] is EdgeKind.DEFAULT
    qual = "traced.<locals>.wrapper" if sys.version_info >= (3, 11) else "<wrapper wrapper>"
    leaf = f"external:kerneldeco.{qual}"
    assert out[f"@kerneldeco.{qual}"] == (leaf, EdgeKind.DECORATES)
    assert graph.nodes[leaf].detail == "kerneldeco==0.1.0"
    assert not any(n.startswith("kerneldeco") for n in graph.nodes)  # the library is not walked
    # Stacked library wrappers: the user function under both is walked.
    assert f"{name}:inner" in {e.dst for e in graph.successors(f"{name}:stacked")}


def test_library_wrapper_of_library_code_stays_a_leaf(pkg) -> None:
    pkg.write(
        "m", "import json\nfrom kerneldeco import traced\ndumps = traced(json.dumps)\ndef k(x):\n    return dumps(x)\n"
    )
    m = pkg.load("m")
    graph = discover(m.k)
    leaves = [e.dst for e in graph.successors(f"{pkg.name}.m:k") if e.label == "dumps"]
    # Named where the wrapped function is defined, as the static side names a library's
    # decorated ``def`` (static/libnames.py): not kerneldeco.dumps, a name that exists nowhere.
    assert leaves == ["external:json.dumps"]
    assert graph.successors(leaves[0]) == ()


def _swap_code(helpers: types.ModuleType) -> None:
    helpers.helper.__wrapped__.__code__ = helpers.alternative.__code__


def _defaults(helpers: types.ModuleType) -> None:
    helpers.helper.__wrapped__.__defaults__ = (7,)


def _callee(helpers: types.ModuleType) -> None:
    helpers.inner = lambda x: x + 100  # type: ignore[attr-defined]  # monkeypatching the module


def _global(helpers: types.ModuleType) -> None:
    helpers.SCALE = 20  # type: ignore[attr-defined]  # monkeypatching the module


def _rewrap(helpers: types.ModuleType) -> None:  # the wrapper now calls another function
    wrapper = helpers.helper
    cell = wrapper.__closure__[wrapper.__code__.co_freevars.index("fn")]
    cell.cell_contents = helpers.alternative
    wrapper.__wrapped__ = helpers.alternative


def _stacked_inner(helpers: types.ModuleType) -> None:
    helpers.stacked.__wrapped__.__wrapped__.__code__ = (lambda x: x * 3).__code__


MUTATIONS: list[tuple[str, Callable[[types.ModuleType], None]]] = [
    ("wrapped code swap", _swap_code),
    ("wrapped defaults", _defaults),
    ("callee rebound", _callee),
    ("global read by the wrapped helper", _global),
    ("wrapper closure and __wrapped__ rebound", _rewrap),
    ("innermost of stacked wrappers", _stacked_inner),
]


@pytest.mark.parametrize("mutate", [m[1] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS])
def test_each_mutation_of_a_wrapped_helper_rebuilds(pkg, mutate) -> None:
    helpers, kern = _package(pkg)
    make = flydeps.cached_factory(maxsize=None)(lambda: kern.kernel(3))
    first = make()
    assert first == kern.kernel(3) and make() is first
    mutate(helpers)
    fresh = kern.kernel(3)  # the oracle: what the code computes now
    assert fresh != first, "the mutation must change what the kernel computes"
    assert make() == fresh


def test_edit_and_reload_of_a_wrapped_helper_rebuilds(pkg) -> None:
    helpers, kern = _package(pkg)
    make = flydeps.cached_factory(maxsize=None)(lambda: kern.kernel(3))
    first = make()
    pkg.edit("helpers", "return inner(x) * k + SCALE", "return inner(x) * k + SCALE + 1")
    fresh = kern.kernel(3)
    assert fresh != first and make() == fresh
    # A comment-only edit + reload rebinds every name; the digests agree: no rebuild.
    before = make()
    pkg.edit("helpers", "def inner(x):", "def inner(x):  # a comment")
    assert make() is before


def test_guard_names_the_wrapped_helper(pkg) -> None:
    helpers, kern = _package(pkg)
    fp = flydeps.fingerprint(kern.kernel)
    guard = fp.guard()
    assert guard.check()
    _swap_code(helpers)
    assert not guard.check()
    after = flydeps.fingerprint(kern.kernel)
    assert after.digest != fp.digest
    assert any(f"{pkg.name}.helpers:helper" in line for line in after.explain(fp))


# -- FlyDSL's own library decorator --------------------------------------------------------
FLYDSL_HELPERS = """
from flydsl.expr.meta import dsl_loc_tracing

def inner(x):
    return x + 1

@dsl_loc_tracing
def load_fragment(x, width=4):
    return inner(x) * width

def alternative(x, width=4):
    return x - width
"""


@contextlib.contextmanager
def _mlir_context() -> Iterator[None]:
    from flydsl._mlir import ir

    with ir.Context():
        yield


def test_flydsl_dsl_loc_tracing_helpers_are_walked(pkg) -> None:
    pytest.importorskip("flydsl")
    pkg.write("mem", FLYDSL_HELPERS)
    mem = pkg.load("mem")
    assert mem.load_fragment.__code__.co_filename.endswith("flydsl/expr/meta.py")
    graph = discover(mem.load_fragment)
    node = graph.nodes[f"{pkg.name}.mem:load_fragment"]
    assert node.digest == code_digest(mem.load_fragment.__wrapped__.__code__)
    assert "external:flydsl.expr.meta.dsl_loc_tracing.<locals>.wrapper" in graph.nodes
    assert f"{pkg.name}.mem:inner" in graph.nodes

    def build() -> int:
        with _mlir_context():  # the wrapper captures an MLIR location: it needs a context
            return mem.load_fragment(3)

    make = flydeps.cached_factory(maxsize=None)(build)
    first = make()
    for mutate in (
        lambda: setattr(mem.load_fragment.__wrapped__, "__defaults__", (8,)),
        lambda: setattr(mem, "inner", lambda x: x + 50),
        lambda: setattr(mem.load_fragment.__wrapped__, "__code__", mem.alternative.__code__),
    ):
        mutate()
        fresh = build()
        assert fresh != first and make() == fresh
        first = fresh
