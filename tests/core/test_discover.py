"""Runtime discovery: what the bytecode walk finds, through every kind of indirection."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap

import pytest

import flydeps
from flydeps import EdgeKind, NodeKind, discover


def edges_from(graph, src: str) -> dict[str, tuple[str, EdgeKind]]:
    return {e.label: (e.dst, e.kind) for e in graph.successors(src)}


def test_module_attribute_chain_and_globals(pkg) -> None:
    pkg.write("deep", "LIMIT = 4\ndef fn(x):\n    return x + LIMIT\n")
    pkg.write("sub", "from . import deep\n")
    pkg.write("k", f"from {pkg.name} import sub\nimport {pkg.name}.sub\ndef kernel(x):\n    return sub.deep.fn(x)\n")
    k = pkg.load("k")
    g = discover(k.kernel)
    root = f"{pkg.name}.k:kernel"
    assert g.roots == (root,)
    assert edges_from(g, root)["sub.deep.fn"] == (f"{pkg.name}.deep:fn", EdgeKind.CALLS)
    assert edges_from(g, f"{pkg.name}.deep:fn")["LIMIT"] == (f"{pkg.name}.deep:LIMIT", EdgeKind.READS)
    assert g.nodes[f"{pkg.name}.deep:LIMIT"].detail == "4"


def test_nested_function_in_factory_resolves_against_enclosing_globals(pkg) -> None:
    pkg.write("mem", "def _load_q(x):\n    return x * 2\n")
    pkg.write(
        "factory",
        f"""
        import functools
        from {pkg.name} import mem

        @functools.lru_cache(maxsize=None)
        def compile_x(n):
            def kernel(a):
                return mem._load_q(a) + n
            return kernel
        """,
    )
    fac = pkg.load("factory")
    g = discover(fac.compile_x.__wrapped__)  # the factory itself, not yet called
    kernel = f"{pkg.name}.factory:compile_x.<locals>.kernel"
    assert edges_from(g, f"{pkg.name}.factory:compile_x")["kernel"] == (kernel, EdgeKind.NESTED)
    assert edges_from(g, kernel)["mem._load_q"][0] == f"{pkg.name}.mem:_load_q"
    # Through the lru_cache wrapper object too (external type, walked through __wrapped__).
    g2 = discover(fac.compile_x)
    assert f"{pkg.name}.mem:_load_q" in g2.nodes


def test_closures_defaults_and_kwdefaults(pkg) -> None:
    pkg.write(
        "m",
        """
        def helper(x):
            return x
        def other(x):
            return -x
        def make(block):
            def run(a, f=helper, *, g=other):
                return f(a) + g(a) + block
            return run
        """,
    )
    m = pkg.load("m")
    run = m.make(128)
    g = discover(run)
    out = edges_from(g, f"{pkg.name}.m:make.<locals>.run")
    assert out["f"] == (f"{pkg.name}.m:helper", EdgeKind.DEFAULT)
    assert out["g"] == (f"{pkg.name}.m:other", EdgeKind.DEFAULT)
    assert out["block"][1] is EdgeKind.CLOSURE
    assert g.nodes[out["block"][0]].detail == "128"


def test_decorators_partials_and_wrappers(pkg) -> None:
    pkg.write(
        "m",
        """
        import functools
        def base(x, y):
            return x + y
        def deco(fn):
            @functools.wraps(fn)
            def wrapper(*a):
                return fn(*a)
            return wrapper
        @deco
        def decorated(x):
            return x
        add3 = functools.partial(base, 3)
        def kernel(x):
            return decorated(x) + add3(x)
        """,
    )
    m = pkg.load("m")
    g = discover(m.kernel)
    ids = set(g.nodes)
    assert f"{pkg.name}.m:decorated" in ids  # through __wrapped__
    # 3.10 code objects carry no qualified name: wrappers are named after what they wrap.
    wrapper = "deco.<locals>.wrapper" if sys.version_info >= (3, 11) else "decorated.<wrapper wrapper>"
    assert f"{pkg.name}.m:{wrapper}" in ids
    assert f"{pkg.name}.m:base" in ids  # through partial.func
    assert any(e.kind is EdgeKind.DECORATES and e.label == "__wrapped__" for e in g.edges)


def test_methods_resolve_on_the_owner_mro(pkg) -> None:
    pkg.write(
        "m",
        """
        class Base:
            def helper(self, x):
                return x + 1
            def run(self, x):
                return self.helper(x)
            @staticmethod
            def s(x):
                return x
            @classmethod
            def c(cls, x):
                return cls.s(x)
        class Sub(Base):
            def helper(self, x):
                return x + 2
        """,
    )
    m = pkg.load("m")
    name = pkg.name
    g_base = discover(m.Base.run, owner=m.Base)
    assert edges_from(g_base, f"{name}.m:Base.run")["self.helper"][0] == f"{name}.m:Base.helper"
    g_sub = discover(m.Base.run, owner=m.Sub)
    root = f"{name}.m:Base.run@{name}.m:Sub"
    assert g_sub.roots == (root,)
    assert edges_from(g_sub, root)["self.helper"][0] == f"{name}.m:Sub.helper"
    assert f"{name}.m:Sub.helper" not in g_base.nodes
    # Bound methods carry their owner; classmethods resolve cls on the class.
    assert f"{name}.m:Sub.helper" in discover(m.Sub().run).nodes
    g_c = discover(m.Sub.c)
    assert edges_from(g_c, f"{name}.m:Base.c@{name}.m:Sub")["cls.s"][0] == f"{name}.m:Base.s@{name}.m:Sub"


def test_dispatch_tables_and_callable_objects(pkg) -> None:
    pkg.write(
        "m",
        """
        def add(x):
            return x + 1
        def mul(x):
            return x * 2
        OPS = {"add": add, "mul": mul}
        PIPE = (add, mul)
        class Op:
            def __init__(self, fn):
                self.fn = fn
            def __call__(self, x):
                return self.fn(x)
        op = Op(mul)
        def kernel(name, x):
            return OPS[name](x) + PIPE[0](x) + op(x)
        """,
    )
    m = pkg.load("m")
    g = discover(m.kernel)
    ops = f"{pkg.name}.m:OPS"
    assert {e.label: e.dst for e in g.successors(ops)} == {
        "['add']": f"{pkg.name}.m:add",
        "['mul']": f"{pkg.name}.m:mul",
    }
    assert f"{pkg.name}.m:Op.__call__" in g.nodes  # the callable object's class and its __call__
    assert g.nodes[f"{pkg.name}.m:op"].kind is NodeKind.OBJECT


def test_recursion_and_cycles_terminate(pkg) -> None:
    pkg.write(
        "m",
        """
        def even(n):
            return n == 0 or odd(n - 1)
        def odd(n):
            return n != 0 and even(n - 1)
        def fact(n):
            return 1 if n <= 1 else n * fact(n - 1)
        """,
    )
    m = pkg.load("m")
    g = discover(m.even)
    assert {f"{pkg.name}.m:even", f"{pkg.name}.m:odd"} <= set(g.nodes)
    g2 = discover(m.fact)
    assert edges_from(g2, f"{pkg.name}.m:fact")["fact"][0] == f"{pkg.name}.m:fact"


def test_library_code_is_a_versioned_leaf(pkg) -> None:
    pkg.write("m", "import json\nimport blake3\ndef kernel(x):\n    return json.dumps(x), blake3.blake3, len(x)\n")
    m = pkg.load("m")
    g = discover(m.kernel)
    assert g.nodes["external:json.dumps"].detail.startswith("python==")
    assert g.nodes["external:blake3.blake3"].detail.startswith("blake3==")
    assert g.nodes["external:builtins.len"].kind is NodeKind.EXTERNAL
    assert not any(n.startswith("json:") for n in g.nodes)  # not walked


def test_unresolved_names_are_nodes(pkg) -> None:
    pkg.write("m", "def kernel(x):\n    return not_defined_yet(x) + x.attr\n")
    m = pkg.load("m")
    g = discover(m.kernel)
    unresolved = [n for n in g.nodes.values() if n.kind is NodeKind.UNRESOLVED]
    assert [n.id for n in unresolved] == [f"unresolved:{pkg.name}.m:kernel:not_defined_yet"]
    assert unresolved[0].detail == "name is not defined"


def test_discovery_never_calls_user_code(pkg) -> None:
    pkg.write(
        "m",
        """
        CALLS = []
        class Trap:
            def __getattr__(self, name):
                CALLS.append(name); raise RuntimeError(name)
            def __eq__(self, other):
                CALLS.append("eq"); raise RuntimeError("eq")
            def __hash__(self):
                CALLS.append("hash"); raise RuntimeError("hash")
            def __repr__(self):
                CALLS.append("repr"); raise RuntimeError("repr")
            @property
            def prop(self):
                CALLS.append("prop"); raise RuntimeError("prop")
        TRAP = Trap()
        def kernel(x):
            return TRAP.prop, TRAP.missing, x
        """,
    )
    m = pkg.load("m")
    g = discover(m.kernel)
    assert f"{pkg.name}.m:TRAP" in g.nodes
    assert m.CALLS == []


def test_functools_cache_wrapped_helpers_are_walked(pkg) -> None:
    pkg.write(
        "m",
        """
        import functools
        @functools.cache
        def table(n):
            return tuple(range(n))
        def kernel(x):
            return table(x)
        """,
    )
    m = pkg.load("m")
    assert f"{pkg.name}.m:table" in discover(m.kernel).nodes
    assert isinstance(m.table, functools._lru_cache_wrapper)


def test_same_qualname_functions_are_distinct_nodes(pkg) -> None:
    pkg.write(
        "m",
        """
        def ha(x):
            return x + 1
        def hb(x):
            return x * 2
        OPS = {"add": lambda x: ha(x), "mul": lambda x: hb(x)}
        class C:
            @property
            def v(self):
                return ha(1)
            @v.setter
            def v(self, value):
                hb(value)
        def make(k):
            def kern(x):
                return x + k
            return kern
        KERNELS = [make(1), make(2)]
        def kernel(x):
            return OPS["add"](x), C, KERNELS
        """,
    )
    m = pkg.load("m")
    g = discover(m.kernel)
    name = pkg.name
    assert {f"{name}.m:<lambda>", f"{name}.m:<lambda>#2"} <= set(g.nodes)
    assert {f"{name}.m:C.v", f"{name}.m:C.v#2"} <= set(g.nodes)
    assert {f"{name}.m:make.<locals>.kern", f"{name}.m:make.<locals>.kern#2"} <= set(g.nodes)
    # Each one is expanded: both helpers and both closure values are reached.
    assert {f"{name}.m:ha", f"{name}.m:hb"} <= set(g.nodes)
    closures = {g.nodes[e.dst].detail for e in g.edges if e.kind is EdgeKind.CLOSURE and e.label == "k"}
    assert closures == {"1", "2"}


def test_installed_packages_can_be_declared_user_code() -> None:
    # blake3 lives in site-packages: a leaf by default, walked when declared the user's.
    script = textwrap.dedent(
        """
        import json, flydeps, blake3
        from flydeps.code import origin as _origin
        print(json.dumps([_origin.is_external_module("blake3"), _origin.is_external_module("json")]))
        """
    )
    env = {**os.environ, "FLYDEPS_USER_PACKAGES": "blake3, other"}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "[false, true]"
    env.pop("FLYDEPS_USER_PACKAGES")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "[true, true]"


def test_attribute_chains_on_closure_variables(pkg) -> None:
    """``mod.helper`` where ``mod`` is a closure variable holding a module (or a class)
    resolves like a global's chain: rebinding the helper is seen."""
    pkg.write("mem", "def load(x):\n    return x + 1\n")
    pkg.write(
        "m",
        """
        import importlib

        def factory(name):
            mem = importlib.import_module(name)
            def kernel(x):
                return mem.load(x)
            return kernel
        """,
    )
    mem, m = pkg.load("mem"), pkg.load("m")
    kernel = m.factory(f"{pkg.name}.mem")
    graph = discover(kernel)
    edges = edges_from(graph, f"{pkg.name}.m:factory.<locals>.kernel")
    assert edges["mem.load"] == (f"{pkg.name}.mem:load", EdgeKind.CALLS)
    import flydeps

    fp = flydeps.fingerprint(kernel)
    guard = fp.guard()
    mem.load = lambda x: x - 1
    assert not guard.check()
    assert flydeps.fingerprint(kernel).digest != fp.digest


def test_fingerprint_holds_the_collector_off_and_restores_it() -> None:
    """The collector is off while a graph is built, back on afterwards (errors included),
    and a collector the user turned off stays off."""
    import gc

    from flydeps.live.discover import gc_paused

    seen: list[bool] = []
    assert gc.isenabled()
    with gc_paused():
        seen.append(gc.isenabled())
    assert seen == [False] and gc.isenabled()
    with pytest.raises(KeyError):
        with gc_paused():
            raise KeyError("inside")
    assert gc.isenabled()
    flydeps.fingerprint(test_fingerprint_holds_the_collector_off_and_restores_it)
    assert gc.isenabled()
    gc.disable()
    try:
        flydeps.fingerprint(test_fingerprint_holds_the_collector_off_and_restores_it)
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()
