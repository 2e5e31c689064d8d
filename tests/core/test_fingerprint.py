"""Fingerprints: stability, Merkle propagation, explanations."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import typing

import flydeps
from flydeps import NodeKind


def test_digest_propagates_from_deep_helpers(pkg) -> None:
    pkg.write("deep", "def leaf(x):\n    return x + 1\n")
    pkg.write("mid", f"from {pkg.name} import deep\ndef mid(x):\n    return deep.leaf(x)\n")
    pkg.write("top", f"from {pkg.name} import mid\ndef top(x):\n    return mid.mid(x)\n")
    top = pkg.load("top")
    before = flydeps.fingerprint(top.top)
    pkg.edit("deep", "x + 1", "x + 2")
    after = flydeps.fingerprint(top.top)
    assert before.digest != after.digest
    assert after.explain(before) == (f"helper {pkg.name}.deep:leaf changed",)


def test_comment_only_edit_keeps_digest(pkg) -> None:
    pkg.write("deep", "def leaf(x):\n    return x + 1\n")
    pkg.write("top", f"from {pkg.name} import deep\ndef top(x):\n    return deep.leaf(x)\n")
    top = pkg.load("top")
    before = flydeps.fingerprint(top.top)
    pkg.edit("deep", "def leaf(x):", "# a comment\n\n\ndef leaf(x):\n    '''Docs.'''")
    assert flydeps.fingerprint(top.top).digest == before.digest


def test_value_change_is_explained_with_old_and_new(pkg) -> None:
    pkg.write("m", "BLOCK = 128\ndef k(x):\n    return x * BLOCK\n")
    m = pkg.load("m")
    before = flydeps.fingerprint(m.k)
    m.BLOCK = 256
    after = flydeps.fingerprint(m.k)
    (diff,) = after.diff(before)
    assert diff.kind is NodeKind.GLOBAL and (diff.old, diff.new) == ("128", "256")
    assert str(diff) == f"global {pkg.name}.m:BLOCK changed: 128 -> 256"


def test_owner_changes_the_fingerprint(pkg) -> None:
    pkg.write(
        "m",
        "class A:\n    def h(self):\n        return 1\n    def run(self):\n        return self.h()\n"
        "class B(A):\n    def h(self):\n        return 2\n",
    )
    m = pkg.load("m")
    assert flydeps.fingerprint(m.A.run, owner=m.A).digest != flydeps.fingerprint(m.A.run, owner=m.B).digest


def test_cycles_have_stable_digests(pkg) -> None:
    pkg.write("m", "def a(n):\n    return n and b(n - 1)\ndef b(n):\n    return n and a(n - 1)\n")
    m = pkg.load("m")
    d1 = flydeps.fingerprint(m.a).digest
    assert flydeps.fingerprint(m.a).digest == d1
    pkg.edit("m", "b(n - 1)", "b(n - 2)")
    assert flydeps.fingerprint(m.a).digest != d1


def test_transitive_digests_are_order_independent(pkg) -> None:
    pkg.write("m", "def x():\n    return 1\ndef y():\n    return 2\ndef k():\n    return x() + y()\n")
    m = pkg.load("m")
    fp = flydeps.fingerprint(m.k)
    reversed_graph = flydeps.DepGraph(fp.graph.roots, fp.graph.nodes, tuple(reversed(fp.graph.edges)))
    assert flydeps.transitive_digests(reversed_graph) == dict(fp.node_digests)


SCRIPT = """
import sys
sys.path.insert(0, {root!r})
import flydeps
from {name} import top
print(flydeps.fingerprint(top.factory(3)).digest)
"""


def test_digest_equal_across_fresh_processes(pkg) -> None:
    pkg.write("helpers", "SCALE = (1, 2.5, 'x')\ndef h(x):\n    return x * SCALE[0]\n")
    pkg.write(
        "top",
        f"from {pkg.name} import helpers\n"
        "def factory(n):\n    def kernel(x):\n        return helpers.h(x) + n\n    return kernel\n",
    )
    script = SCRIPT.format(root=str(pkg.root), name=pkg.name)
    env = {**os.environ, "PYTHONHASHSEED": "random"}
    outs = {
        subprocess.run(
            [sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, check=True, env=env
        ).stdout
        for _ in range(2)
    }
    assert len(outs) == 1
    top = pkg.load("top")
    assert outs == {flydeps.fingerprint(top.factory(3)).digest + "\n"}


def test_annotations_are_part_of_the_fingerprint(pkg) -> None:
    # FlyDSL decides how an argument is passed from its annotation (Tensor, Int32, Constexpr):
    # same bytecode, different compiled code.
    pkg.write("types_", "class Int32: pass\nclass Constexpr: pass\n")
    pkg.write("k", f"from {pkg.name}.types_ import Int32, Constexpr\ndef kernel(n: Int32):\n    return n\n")
    k = pkg.load("k")
    before = flydeps.fingerprint(k.kernel)
    k2 = pkg.edit("k", "n: Int32", "n: Constexpr")
    after = flydeps.fingerprint(k2.kernel)
    assert after.digest != before.digest
    assert any("annotations" in reason for reason in after.explain(before))


class _Slotted:
    __slots__ = ()  # no readable state


class _Stateful:
    def __init__(self) -> None:
        self.size = 3


IDENTITY_CASES = {
    "oversized list": lambda: list(range(300)),
    "object without state": _Slotted,
    "in a tuple": lambda: (1, _Slotted()),
    "annotation": _Slotted,  # an object with no state as an annotation (see _twin_readers)
    # PEP 604 and PEP 585 annotations, new objects each time (FlyDSL's flash-attention traits
    # dataclass has ``SM_SCALE: float | None``: its generated __init__ was digested by identity)
    "annotation: union": lambda: int | None,
    "annotation: generic alias": lambda: tuple[int, ...],
    "annotation: typing": lambda: typing.Optional[typing.List[int]],  # noqa: UP006,UP045
    "compiled regex": lambda: re.compile(r"gfx(\d+)"),  # a helper parsing the arch name while tracing
    "small list": lambda: [1, 2, 3],
    "dict": lambda: {"a": 1, "b": (2.5, "x")},
    "user object": _Stateful,
    "set": lambda: {1, 2, 3},
}


def _twin_readers(case: str) -> tuple:
    """Two functions reading equal values that are distinct objects (same module name)."""
    out = []
    for _ in range(2):
        ns: dict = {"__name__": "probe_identified"}
        if case.startswith("annotation"):
            ns["MARK"] = IDENTITY_CASES[case]()
            # dont_inherit: this file's ``from __future__ import annotations`` would make it a string
            exec(compile("def reader(x: MARK):\n    return x\n", "<probe>", "exec", dont_inherit=True), ns)  # noqa: S102
        else:
            ns["VALUE"] = IDENTITY_CASES[case]()
            exec("def reader():\n    return VALUE\n", ns)  # noqa: S102 - test source
        out.append(ns["reader"])
    return tuple(out)


def test_identified_marks_exactly_the_digests_that_depend_on_identity() -> None:
    """``Fingerprint.identified`` (what a cross-process store may not be keyed by) is
    checked against the digests themselves: two readers of equal but distinct values get
    different digests exactly when the fingerprint says an identity is in them."""
    for case in IDENTITY_CASES:
        first, second = (flydeps.fingerprint(f) for f in _twin_readers(case))
        assert first.identified == second.identified, case
        assert (first.digest != second.digest) == bool(first.identified), case
        if first.identified:
            assert all(nid in first.graph.nodes for nid in first.identified), case
    assert flydeps.fingerprint(_twin_readers("oversized list")[0]).identified == ("probe_identified:VALUE",)
    for case in ("annotation: union", "annotation: generic alias", "annotation: typing", "compiled regex"):
        assert not flydeps.fingerprint(_twin_readers(case)[0]).identified, case


def test_a_compiled_regex_is_keyed_by_its_pattern_and_flags() -> None:
    from flydeps.values.snapshot import snapshot

    digests = {snapshot(p).digest for p in (re.compile("gfx9"), re.compile("gfx9", re.I), re.compile(b"gfx9"))}
    assert len(digests) == 3  # pattern, flags and str/bytes all count
    script = "import re\nfrom flydeps.values.snapshot import snapshot\nprint(snapshot(re.compile('gfx9')).digest)\n"
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == snapshot(re.compile("gfx9")).digest  # the same in another process


def test_a_dataclass_with_a_union_field_is_keyed_by_value_and_its_edits_are_changes(pkg) -> None:
    """The shape of FlyDSL's flash-attention traits: a dataclass with ``float | None`` and
    ``tuple[int, ...]`` fields, built by a helper. Its fingerprint names no identity (a
    persistent row can be keyed by it), is the same in another process, and an edit of a
    field's type is a change."""
    source = (
        "import dataclasses\n"
        "@dataclasses.dataclass(frozen=True)\n"
        "class Traits:\n"
        "    scale: float | None\n"
        "    steps: tuple[int, ...] = (1,)\n"
        "def make(scale):\n"
        "    return Traits(scale)\n"
    )
    pkg.write("traits", source)
    module = pkg.load("traits")
    before = flydeps.fingerprint(module.make)
    assert not before.identified
    script = (
        f"import sys; sys.path.insert(0, {str(pkg.root)!r})\n"
        f"import flydeps, {pkg.name}.traits as m\n"
        "print(flydeps.fingerprint(m.make).digest)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == before.digest
    edited = pkg.edit("traits", "scale: float | None", "scale: int | None")
    after = flydeps.fingerprint(edited.make)
    assert after.digest != before.digest and not after.identified
