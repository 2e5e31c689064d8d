"""What the static graph contains for the fixture repository, feature by feature."""

from __future__ import annotations

from pathlib import Path

import pytest

from flydeps.graph import EdgeKind, NodeKind
from flydeps.static.analyze import analyze

FIXTURES = Path(__file__).resolve().parent / "fixtures"

REPO = str(FIXTURES / "kernelrepo")


@pytest.fixture(scope="module")
def graph():
    result = analyze([REPO], use_cache=False)
    assert result.diagnostics == ()
    return result.graph


def edges_from(graph, src):
    return {(e.dst, e.kind, e.label) for e in graph.successors(src)}


def test_roots_are_factories_and_class_builds(graph) -> None:
    assert graph.roots == (
        "kernelrepo.attention.decode:compile_decode",
        "kernelrepo.norm.base:NormBase.build",
        "kernelrepo.norm.base:NormBase.build@kernelrepo.norm.layernorm:LayerNorm",
        "kernelrepo.norm.base:NormBase.build@kernelrepo.norm.layernorm:RMSNorm",
    )
    assert graph.nodes["kernelrepo.attention.decode:compile_decode"].tags == {"factory"}


def test_nested_kernel_and_launcher_are_tagged(graph) -> None:
    kernel = "kernelrepo.attention.decode:compile_decode.<locals>.decode_kernel"
    launcher = "kernelrepo.attention.decode:compile_decode.<locals>.launch_decode"
    assert graph.nodes[kernel].tags == {"kernel"}
    assert graph.nodes[launcher].tags == {"launcher"}
    assert (kernel, EdgeKind.CLOSURE, "decode_kernel") in edges_from(graph, launcher)


def test_reexports_aliases_and_module_attributes(graph) -> None:
    kernel = edges_from(graph, "kernelrepo.attention.decode:compile_decode.<locals>.decode_kernel")
    # common.load is `from .mem import load_tile as load` re-exported by common/__init__.py
    assert ("kernelrepo.common.mem:load_tile", EdgeKind.CALLS, "common.load") in kernel
    # common.fast_exp comes through `from .math_ops import *` and __all__
    scores = edges_from(graph, "kernelrepo.attention.decode:_scores")
    assert ("kernelrepo.common.math_ops:fast_exp", EdgeKind.CALLS, "common.fast_exp") in scores
    load_q = edges_from(graph, "kernelrepo.attention.decode:_load_q")
    assert ("kernelrepo.common.mem:load_tile", EdgeKind.CALLS, "mem.load_tile") in load_q


def test_self_resolves_on_the_owner_class(graph) -> None:
    base = edges_from(graph, "kernelrepo.norm.base:NormBase.build.<locals>.norm_kernel")
    sub = edges_from(
        graph, "kernelrepo.norm.base:NormBase.build.<locals>.norm_kernel@kernelrepo.norm.layernorm:RMSNorm"
    )
    assert ("kernelrepo.norm.base:NormBase._stats", EdgeKind.METHOD, "self._stats") in base
    assert ("kernelrepo.norm.layernorm:RMSNorm._stats", EdgeKind.METHOD, "self._stats") in sub
    inherited = "kernelrepo.norm.base:NormBase._stats@kernelrepo.norm.layernorm:LayerNorm"
    assert inherited in graph.nodes
    overrides = edges_from(graph, "kernelrepo.norm.layernorm:RMSNorm._scale")
    shadowed = "kernelrepo.norm.base:NormBase._scale@kernelrepo.norm.layernorm:RMSNorm"
    assert (shadowed, EdgeKind.OVERRIDES, "super()._scale") in overrides


def test_dispatch_table_partial_and_lambda(graph) -> None:
    # A value is named by the namespace entry it is read through (`from .. import X` in
    # decode), as at run time; its location is where it is defined.
    activations = "kernelrepo.attention.decode:ACTIVATIONS"
    assert str(graph.nodes[activations].location) == "kernelrepo/common/math_ops.py:21"
    table = edges_from(graph, activations)
    assert ("kernelrepo.common.math_ops:_gelu", EdgeKind.ATTRIBUTE, "['gelu']") in table
    slot = activations + "['relu6']"  # an object in a table is named after its slot
    assert (slot, EdgeKind.ATTRIBUTE, "['relu6']") in table
    partial = edges_from(graph, slot)
    assert ("kernelrepo.common.math_ops:clamp", EdgeKind.DECORATES, "func") in partial
    assert ("external:functools.partial", EdgeKind.CALLS, "type") in partial
    assert graph.nodes[slot].kind is NodeKind.OBJECT
    assert (slot + ".hi", EdgeKind.ATTRIBUTE, "hi") in partial
    assert graph.nodes[slot + ".hi"].kind is NodeKind.GLOBAL


def test_literals_defaults_unresolved_and_cycles(graph) -> None:
    assert graph.nodes["kernelrepo.common.mem:ALIGN"].kind is NodeKind.GLOBAL
    assert "static-expression" not in graph.nodes["kernelrepo.common.mem:ALIGN"].tags
    default = "kernelrepo.common.mem:load_tile#default.block"
    assert (default, EdgeKind.DEFAULT, "block") in edges_from(graph, "kernelrepo.common.mem:load_tile")
    missing = [n for n in graph.nodes.values() if n.kind is NodeKind.UNRESOLVED]
    assert [n.id.rpartition(":")[2] for n in missing] == ["undefined_helper"]
    # layout.make imports mem lazily while mem imports layout: both present, no crash
    assert "kernelrepo.common.layout:make" in graph.nodes


def test_unrelated_functions_are_not_reached(graph) -> None:
    assert "kernelrepo.common.mem:unrelated_debug_dump" not in graph.nodes


def test_named_root_through_subclass() -> None:
    result = analyze([f"{REPO}/norm/layernorm.py::RMSNorm.build"], use_cache=False)
    assert result.graph.roots == ("kernelrepo.norm.base:NormBase.build@kernelrepo.norm.layernorm:RMSNorm",)


def test_annotations_enter_the_static_digest_as_at_run_time(tmp_path) -> None:
    """FlyDSL types arguments by their annotations; the defining code evaluates them, so
    the function's bytecode is the same when only an annotation changes."""
    from flydeps.graph import EdgeKind
    from flydeps.keys.fingerprint import transitive_digests
    from flydeps.static.analyze import analyze

    pkg = tmp_path / "annpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "types_.py").write_text("class Int32: pass\nclass Constexpr: pass\n")
    source = "from annpkg.types_ import Int32, Constexpr\n\ndef kernel(n: Int32) -> None:\n    return None\n"
    (pkg / "k.py").write_text(source)

    def digest() -> tuple[str, set[str]]:
        graph = analyze([str(pkg / "k.py")], use_cache=False).graph
        root = "annpkg.k:kernel"
        kinds = {e.dst for e in graph.successors(root) if e.kind is EdgeKind.ANNOTATION}
        return transitive_digests(graph)[root], kinds

    before, annotation_nodes = digest()
    assert annotation_nodes == {"annpkg.k:kernel#annotations"}
    (pkg / "k.py").write_text(source.replace("n: Int32", "n:   Int32"))  # formatting only
    assert digest()[0] == before
    (pkg / "k.py").write_text(source.replace("n: Int32", "n: Constexpr"))
    assert digest()[0] != before


def test_a_package_directory_wins_over_a_module_file_of_the_same_name(tmp_path) -> None:
    """``pkg/ops/__init__.py`` beside ``pkg/ops.py``: Python imports the package (the path
    finder tries the directory first); the static graph must read the same file, or an edit
    of the package goes unseen (and one of the shadowed ``ops.py`` looks like a change)."""
    import importlib
    import sys

    pkg = tmp_path / "shadowpkg"
    (pkg / "ops").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "ops.py").write_text("PAD = 4\n")
    (pkg / "ops" / "__init__.py").write_text("PAD = 8\n")
    (pkg / "k.py").write_text("from . import ops\n\n\ndef build():\n    return ops.PAD\n")
    sys.path.insert(0, str(tmp_path))
    try:
        assert importlib.import_module("shadowpkg.ops").PAD == 8  # what Python does
    finally:
        sys.path.remove(str(tmp_path))
        for name in [n for n in sys.modules if n.startswith("shadowpkg")]:
            del sys.modules[name]
    graph = analyze([str(pkg / "k.py::build")], use_cache=False).graph
    node = graph.nodes["shadowpkg.ops:PAD"]
    assert node.detail == "8" and node.location is not None and node.location.path == "shadowpkg/ops/__init__.py"
