"""The shapes of issue 9, one by one, on small sources (the mutation oracle covers them at
scale): what each must make reachable from a root, and what it must never report."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from flydeps.graph import EdgeKind, NodeKind
from flydeps.static.analyze import analyze

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
BUILDERS = EXAMPLES / "kernels" / "builders"


def _pkg(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    for name, body in files.items():
        (root / name).write_text(body)
    return root


def _digest(root: Path, target: str, files: dict[str, str] | None = None) -> str:
    for name, body in (files or {}).items():
        (root / name).write_text(body)
    result = analyze([f"{root}/{target}"], use_cache=False)
    assert result.graph.roots, result.diagnostics
    return result.digests[result.graph.roots[0]]


BUILDER = """
import flydsl.compiler as flyc

def _bits(dtype):
    return 16 if dtype == "f16" else 32

def build(n, dtype="f16"):
    vec = 128 // _bits(dtype)

    @flyc.kernel(known_block_size=[n, 1, 1])
    def kern(x):
        return [[v * w for v in row] for row, w in zip(x, [vec] * n)]
    return kern
"""


def test_a_kernel_nested_in_a_plain_builder_covers_the_builder(tmp_path: Path) -> None:
    root = _pkg(tmp_path, {"b.py": BUILDER})
    result = analyze([str(root)], use_cache=False)
    kern = "pkg.b:build.<locals>.kern"
    assert result.graph.roots == (kern,)
    assert ("pkg.b:build", EdgeKind.CLOSURE, "<enclosing>") in {
        (e.dst, e.kind, e.label) for e in result.graph.successors(kern)
    }
    assert not result.diagnostics
    assert not [n for n in result.graph.nodes.values() if n.kind is NodeKind.UNRESOLVED]  # comprehension cells
    base = result.digests[kern]
    for old, new in (("128 //", "256 //"), ('"f16" else', '"bf16" else'), ('dtype="f16"', 'dtype="f32"')):
        assert _digest(root, "b.py::build.<locals>.kern", {"b.py": BUILDER.replace(old, new)}) != base, old
    assert _digest(root, "b.py::build.<locals>.kern", {"b.py": BUILDER.replace("def build", "# c\ndef build")}) == base


def test_nested_struct_bodies_are_digested(tmp_path: Path) -> None:
    source = "import flydsl.expr as fx\n\ndef build():\n    @fx.struct\n    class S:\n"
    source += "        a: fx.Array[fx.Float16, 128]\n    return S\n"
    root = _pkg(tmp_path, {"s.py": source})
    one = analyze([f"{root}/s.py::build.<locals>.S"], use_cache=False)
    node = one.graph.nodes["pkg.s:build.<locals>.S"]
    (root / "s.py").write_text(source.replace("128", "256"))
    two = analyze([f"{root}/s.py::build.<locals>.S"], use_cache=False)
    assert two.graph.nodes["pkg.s:build.<locals>.S"].digest != node.digest
    assert not [n for n in one.graph.nodes if "__annotations__" in n]


def test_a_method_patched_after_the_class_is_followed(tmp_path: Path) -> None:
    source = (
        "from flydsl.compiler.ast_rewriter import ASTRewriter\n\n"
        "def helper(x):\n    return x + 1\n\n"
        "class T:\n    def copy(self, x):\n        return helper(x)\n\n"
        "T.copy = ASTRewriter.transform(T.copy)\n\n"
        "def use(x):\n    return T().copy(x)\n"
    )
    root = _pkg(tmp_path, {"p.py": source})
    graph = analyze([f"{root}/p.py::use"], use_cache=False).graph
    assert "pkg.p:helper" in graph.reachable("pkg.p:use")  # the class is not an opaque global
    edges = {(e.dst, e.label) for e in graph.successors("pkg.p:T.copy")}
    # Where FlyDSL is installed, its class is named where it is defined and ends the chain
    # (the runtime's leaf for ``ASTRewriter.transform``); elsewhere the name as written.
    leaf = "ASTRewriter" if importlib.util.find_spec("flydsl") else "ASTRewriter.transform"
    assert (f"external:flydsl.compiler.ast_rewriter.{leaf}", "@ASTRewriter.transform") in edges
    assert ("pkg.p:T.copy#patch.0", "@T.copy = ...") in edges
    base = _digest(root, "p.py::use")
    patched = source.replace("transform(T.copy)", "transform(T.copy, 2)")
    assert _digest(root, "p.py::use", {"p.py": patched}) != base  # the patch's own arguments count
    assert _digest(root, "p.py::use", {"p.py": source.replace("x + 1", "x + 2")}) != base  # the method body


def test_an_import_error_fallback_is_a_dependency() -> None:
    graph = analyze([f"{BUILDERS}/compat.py::exp_scaled"], use_cache=False).graph
    labels = {e.label: e.dst for e in graph.successors("kernels.builders.compat:exp_scaled")}
    assert labels["fast_exp2 (fallback)"] == "kernels.builders.compat:fast_exp2"
    assert labels["fast_exp2"] == "external:flydsl.expr.math.fast_exp2"


def test_decorator_arguments_reach_the_kernel() -> None:
    result = analyze([f"{BUILDERS}/patched.py::row_copy_kernel"], use_cache=False)
    kernel = "kernels.builders.patched:row_copy_kernel"
    args = f"{kernel}#decorator.0"
    assert args in result.graph.reachable(kernel)
    assert "kernels.builders.patched:BLOCK" in {e.dst for e in result.graph.successors(args)}


def test_attribute_and_subscript_targets_bind_no_name(tmp_path: Path) -> None:
    source = "class C:\n    x = 1\n\ndef f():\n    return C.x\n\nC.y = 2\nTABLE = {}\nTABLE['k'] = f\n"
    root = _pkg(tmp_path, {"a.py": source})
    graph = analyze([f"{root}/a.py::f"], use_cache=False).graph
    assert graph.nodes["pkg.a:C.x"].kind is NodeKind.GLOBAL  # C stays the class, not "bound by unpacking"
    assert not any("bound by" in n.detail for n in graph.nodes.values())


def test_unknown_absolute_import_is_a_diagnostic_but_an_optional_one_is_not(tmp_path: Path) -> None:
    source = (
        "import no_such_dist_xyz\n"
        "try:\n    import another_missing_xyz\nexcept ImportError:\n    another_missing_xyz = None\n\n"
        "def f():\n    return no_such_dist_xyz.g(), another_missing_xyz\n"
    )
    root = _pkg(tmp_path, {"m.py": source})
    result = analyze([f"{root}/m.py::f"], use_cache=False)
    assert [(Path(d.path).name, d.line) for d in result.diagnostics] == [("m.py", 1)]
    assert "import no_such_dist_xyz: neither a module of the project nor installed" in result.diagnostics[0].message
    unresolved = [n for n in result.graph.nodes.values() if n.kind is NodeKind.UNRESOLVED]
    assert {n.id.rpartition(":")[2] for n in unresolved} == {"no_such_dist_xyz", "another_missing_xyz"}
