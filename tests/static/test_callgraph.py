"""The call graph (``flydeps graph --format pycg``): hand-written expected edges per feature.

Each case is a small program and the calls a reader sees in it, written by hand in PyCG's
interchange names (module code is the caller named by the module, ``<lambdaN>`` per
enclosing scope, builtins as ``<builtin>.name``). A case checks the exact callee set of
every caller it lists, so both a missing call and a spurious one (a reference exported
as a call) fail.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from flydeps.cli import main
from flydeps.keys.fingerprint import transitive_digests
from flydeps.static.analyze import analyze

CASES: dict[str, tuple[dict[str, str], dict[str, list[str]]]] = {
    "module code is a caller; references are not calls": (
        {
            "main.py": """
                def f():
                    pass

                def g():
                    return f

                h = g()
                print(h)
            """
        },
        {"main": ["<builtin>.print", "main.g"], "main.g": [], "main.f": []},
    ),
    "a nested function called by its parent": (
        {
            "main.py": """
                def outer():
                    def inner():
                        pass
                    inner()

                outer()
            """
        },
        {"main": ["main.outer"], "main.outer": ["main.outer.inner"], "main.outer.inner": []},
    ),
    "parameters receive arguments (positional, keyword, defaults, literal *args)": (
        {
            "main.py": """
                def a(): pass
                def b(): pass
                def c(): pass
                def d(): pass

                def run(cb):
                    cb()

                def kw(x, y=d):
                    x()
                    y()

                def star(p, q):
                    p()
                    q()

                run(a)
                kw(y=b, x=c)
                star(*[a, b])
            """
        },
        {
            "main": ["main.kw", "main.run", "main.star"],
            "main.run": ["main.a"],
            "main.kw": ["main.b", "main.c", "main.d"],
            "main.star": ["main.a", "main.b"],
        },
    ),
    "return values flow to call results": (
        {
            "main.py": """
                def target(): pass

                def pick():
                    return target

                op = pick()
                op()
            """
        },
        {"main": ["main.pick", "main.target"], "main.pick": []},
    ),
    "instance attributes, local aliases, constructors and super()": (
        {
            "main.py": """
                class Base:
                    def __init__(self):
                        self.act = self.relu
                        self.helper = Helper()

                    def relu(self): pass

                    def forward(self):
                        self.act()
                        h = self.helper
                        h.run()
                        a = self
                        a.relu()

                class Helper:
                    def run(self): pass

                class Sub(Base):
                    def __init__(self):
                        super().__init__()

                s = Sub()
                s.forward()
            """
        },
        {
            "main": ["main.Base.forward", "main.Sub.__init__"],
            "main.Sub.__init__": ["<builtin>.super", "main.Base.__init__"],
            "main.Base.__init__": [],
            "main.Base.forward": ["main.Base.relu", "main.Helper.run"],
        },
    ),
    "containers of functions and their subscripts": (
        {
            "main.py": """
                def relu(): pass
                def gelu(): pass
                def tanh(): pass

                table = {"relu": relu, "gelu": gelu}
                table["gelu"]()
                ops = [tanh, relu]
                ops[0]()
                ops.append(gelu)
                for op in ops:
                    op()
            """
        },
        {"main": ["main.gelu", "main.relu", "main.tanh"]},
    ),
    "decorators are called, and their wrappers run the function": (
        {
            "main.py": """
                def dec(fn):
                    def wrapper(*args):
                        return fn(*args)
                    return wrapper

                @dec
                def work(): pass

                work()
            """
        },
        {"main": ["main.dec", "main.dec.wrapper"], "main.dec": [], "main.dec.wrapper": ["main.work"]},
    ),
    "with and for call the protocol methods; lambdas are numbered": (
        {
            "main.py": """
                class Ctx:
                    def __enter__(self): return self
                    def __exit__(self, *exc): pass
                    def use(self): pass

                class Count:
                    def __iter__(self): return self
                    def __next__(self): raise StopIteration

                with Ctx() as c:
                    c.use()
                for i in Count():
                    pass
                first = lambda: 1
                second = lambda: first()
                second()
            """
        },
        {
            "main": [
                "main.<lambda2>",
                "main.Count.__iter__",
                "main.Count.__next__",
                "main.Ctx.__enter__",
                "main.Ctx.__exit__",
                "main.Ctx.use",
            ],
            "main.<lambda2>": ["main.<lambda1>"],
            "main.Count.__next__": [],
        },
    ),
    "imports across modules, classmethods and properties": (
        {
            "main.py": """
                from helpers import Shape, make
                import helpers

                s = make()
                s.area
                Shape.unit().area
                helpers.make()
            """,
            "helpers.py": """
                class Shape:
                    @classmethod
                    def unit(cls):
                        return cls()

                    @property
                    def area(self):
                        return 0

                def make():
                    return Shape()
            """,
        },
        {
            "main": ["helpers.Shape.area", "helpers.Shape.unit", "helpers.make"],
            "helpers.make": [],
            "helpers.Shape.unit": [],
        },
    ),
    "exceptions: the caught instance's methods": (
        {
            "main.py": """
                class Oops(Exception):
                    def explain(self): pass

                def risky():
                    raise Oops()

                try:
                    risky()
                except Oops as e:
                    e.explain()
            """
        },
        {"main": ["main.Oops.explain", "main.risky"], "main.risky": []},
    ),
    "class bodies call as the class; raise instantiates; iter/next/len call the protocol": (
        {
            "main.py": """
                import notinstalled

                def make(): pass

                class Table:
                    entry = make()

                class Oops(Exception):
                    def __init__(self): pass

                class Box:
                    def __len__(self): return 0
                    def __iter__(self): return self
                    def __next__(self): return make

                def fail():
                    raise Oops

                box = Box()
                len(box)
                next(iter(box))()
                notinstalled.run()
            """
        },
        {
            "main.Table": ["main.make"],
            "main.fail": ["main.Oops.__init__"],
            "main": [
                "<builtin>.iter",
                "<builtin>.len",
                "<builtin>.next",
                "main.Box.__iter__",
                "main.Box.__len__",
                "main.Box.__next__",
                "main.make",
                "notinstalled.run",
            ],
        },
    ),
    "straight-line code replaces a value; a branch adds to it; constant keys": (
        {
            "main.py": """
                def f(): pass
                def g(): pass
                def h(): pass

                x = f
                x = g
                x()
                y = f
                if x:
                    y = h
                y()

                def pick():
                    table = {"f": f, "h": h}
                    key = "h"
                    return table[key]()
            """
        },
        {"main": ["main.f", "main.g", "main.h"], "main.pick": ["main.h"]},
    ),
    "builtin decorators are called by the class body": (
        {
            "main.py": """
                class Ops:
                    @staticmethod
                    def one(): pass

                    @classmethod
                    def two(cls):
                        cls.one()

                Ops.two()
            """
        },
        {
            "main.Ops": ["<builtin>.classmethod", "<builtin>.staticmethod"],
            "main.Ops.two": ["main.Ops.one"],
            "main": ["main.Ops.two"],
        },
    ),
    "a method nothing instantiates runs with its class and subclasses; import fallbacks": (
        {
            "main.py": """
                try:
                    from notinstalled import fast
                except ImportError:
                    def fast(): pass

                class Base:
                    def build(self):
                        return self.reduce()

                    def reduce(self): pass

                class Fast(Base):
                    def reduce(self):
                        return fast()
            """
        },
        {
            "main.Base.build": ["main.Base.reduce", "main.Fast.reduce"],
            "main.Fast.reduce": ["main.fast", "notinstalled.fast"],
        },
    ),
    "callables given to map/filter/reduce/sorted(key=) are called by the builtin's caller (issue 37)": (
        {
            "main.py": """
                import functools

                def f(x): pass
                def g(x): pass
                def k(x): pass
                def r(a, b): pass
                class C:
                    def __init__(self, x): pass

                def run(xs):
                    list(map(f, xs))
                    list(filter(g, xs))
                    sorted(xs, key=k)
                    list(map(C, xs))
                    list(map(str, xs))
                    list(filter(None, xs))

                functools.reduce(r, [1, 2])
                max([1], key=k)
                min([1], key=len)
            """
        },
        {
            "main": ["<builtin>.max", "<builtin>.min", "functools.reduce", "main.k", "main.r"],
            "main.run": [
                "<builtin>.filter",
                "<builtin>.list",
                "<builtin>.map",
                "<builtin>.sorted",
                "main.C.__init__",
                "main.f",
                "main.g",
                "main.k",
            ],
        },
    ),
    # A dict entry replaced at a constant key replaces the old value only where nothing
    # could have read the old one since the display (issue 37); otherwise both stay.
    "a dict entry replaced before anything could read it: only the new value": (
        {
            "main.py": """
                def f(): pass
                def g(): pass

                T = {"a": f, "b": f}
                def later():
                    T["a"]()
                T["a"] = g
                later()
            """
        },
        {"main": ["main.later"], "main.later": ["main.g"]},
    ),
    "a dict entry replaced after it was read, aliased, or in a branch: both values": (
        {
            "main.py": """
                def f(): pass
                def g(): pass
                def h(): pass
                def k(): pass

                READ = {"a": f}
                held = READ["a"]
                READ["a"] = g
                ALIASED = {"a": h}
                other = ALIASED
                ALIASED["a"] = g
                BRANCH = {"a": k}
                if held:
                    BRANCH["a"] = g

                def run():
                    held()
                    other["a"]()
                    BRANCH["a"]()

                run()
            """
        },
        {"main": ["main.run"], "main.run": ["main.f", "main.g", "main.h", "main.k"]},
    ),
    "an entry copied from another, which is then replaced: the copy keeps the old value": (
        {
            "main.py": """
                def f(): pass
                def g(): pass
                def h(): pass

                T = {"a": f, "b": g}
                T["a"] = T["b"]
                T["b"] = h
                def run():
                    T["a"]()
                    T["b"]()
                run()
            """
        },
        {"main": ["main.run"], "main.run": ["main.g", "main.h"]},
    ),
    "a dict entry replaced after a call that may read it: both values": (
        {
            "main.py": """
                def f(): pass
                def g(): pass

                T = {"a": f}
                def peek():
                    T["a"]()
                peek()
                T["a"] = g
                def run():
                    T["a"]()
            """
        },
        {"main": ["main.peek"], "main.peek": ["main.f", "main.g"], "main.run": ["main.f", "main.g"]},
    ),
}


def _write(base: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (base / name).write_text(textwrap.dedent(text))


@pytest.mark.parametrize("name", sorted(CASES))
def test_call_edges_match_the_hand_written_graph(name: str, tmp_path: Path) -> None:
    files, expected = CASES[name]
    _write(tmp_path, files)
    result = analyze([str(tmp_path / "main.py")], use_cache=False, calls=True)
    assert result.calls is not None
    found = result.calls.pycg()
    for caller, callees in expected.items():
        assert caller in found, f"{name}: no caller {caller}"
        assert found[caller] == sorted(callees), f"{name}: {caller}"


def test_the_pycg_export_writes_calls_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    files, expected = CASES["module code is a caller; references are not calls"]
    _write(tmp_path, files)
    out = tmp_path / "cg.json"
    monkeypatch.chdir(tmp_path)
    assert main(["graph", "main.py", "--format", "pycg", "--no-cache", "-o", str(out)]) == 0
    assert json.loads(out.read_text()) == {"main": ["<builtin>.print", "main.g"], "main.f": [], "main.g": []}


def test_the_call_graph_changes_no_digest(tmp_path: Path) -> None:
    files, _ = CASES["instance attributes, local aliases, constructors and super()"]
    _write(tmp_path, files)
    root = str(tmp_path / "main.py") + "::Base.forward"
    plain = analyze([root], use_cache=False)
    with_calls = analyze([root], use_cache=False, calls=True)
    assert dict(plain.digests) == dict(with_calls.digests)
    assert plain.graph.edges == with_calls.graph.edges
    # What an instance attribute holds is told in the node's detail, outside every digest.
    held = [n for n in plain.graph.nodes.values() if n.detail.startswith("instance attribute holding")]
    assert sorted(n.detail for n in held) == [
        "instance attribute holding instance of main.Helper",
        "instance attribute holding main.Base.relu",
    ]
    assert dict(transitive_digests(plain.graph)) == dict(plain.digests)


def test_the_tree_labels_calls_and_references_and_shows_instance_attributes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(
        tmp_path,
        {
            "main.py": """
                def relu(): pass

                def pick():
                    return relu

                class Net:
                    def __init__(self):
                        self.act = relu

                    def forward(self):
                        self.act()
                        return pick()
            """
        },
    )
    target = str(tmp_path / "main.py") + "::Net.forward"
    assert main(["graph", target, "--no-cache", "--color", "never"]) == 0  # no --calls needed
    assert "self.act  instance attribute holding main.relu" in capsys.readouterr().out
    assert main(["graph", target, "--calls", "--no-cache", "--color", "never"]) == 0
    text = capsys.readouterr().out
    shown = {}
    for line in text.splitlines():
        parts = line.lstrip("│├└─ ").split("  ")
        shown[parts[0]] = parts[1:]
    assert shown["self.act"][0] == "instance attribute holding main.relu"
    assert shown["pick"][0] == "(call)"
    assert shown["relu"][0] == "(ref)"  # pick only returns relu
    assert "1 unresolved, of which 1 instance attributes known by value flow" in text
    out = tmp_path / "g.json"
    assert main(["graph", target, "--calls", "--no-cache", "--format", "json", "-o", str(out)]) == 0
    edges = {(e["src"], e["dst"]): e["call"] for e in json.loads(out.read_text())["edges"]}
    assert edges[("main:Net.forward", "main:pick")] is True
    assert edges[("main:pick", "main:relu")] is False
    assert main(["graph", target, "--no-cache", "--format", "json", "-o", str(out)]) == 0
    assert all("call" not in e for e in json.loads(out.read_text())["edges"])  # only with --calls
