"""``flydeps migrate`` resolves decorator names from the module's own import statements
(stdlib ``ast``, issue 38) exactly as libcst's ``QualifiedNameProvider`` did, and removes a
``functools`` import only when nothing else uses it."""

from __future__ import annotations

import libcst
import pytest
from libcst.codemod import TransformSuccess
from libcst.metadata import MetadataWrapper, QualifiedNameProvider

from flydeps.migrate.codemod import _Facts
from flydeps.migrate.tree import migrate_source

SOURCES = {
    "module import": "import functools\n\n@functools.lru_cache(maxsize=None)\ndef f():\n    pass\n",
    "module alias": "import functools as ft\n\n@ft.cache\ndef f():\n    pass\n",
    "from alias": "from functools import lru_cache as lc\n\n@lc(8)\ndef f():\n    pass\n",
    "function-local import": (
        "def outer():\n    from functools import cache\n\n    @cache\n    def inner():\n        pass\n"
    ),
    "class-body import": (
        "class C:\n    from functools import lru_cache\n\n    @lru_cache\n    def m(self):\n        pass\n"
    ),
    "class scope not seen from a method": (
        "class C:\n    import functools\n\n    def m(self):\n        @functools.cache\n        def g():\n"
        "            pass\n"
    ),
    "compiler alias": "from flydsl import compiler as flyc\n\n@flyc.kernel\ndef k():\n    pass\n",
    "dotted compiler": "import flydsl.compiler\n\n@flydsl.compiler.jit\ndef k():\n    pass\n",
    "from compiler": "from flydsl.compiler import kernel as K\n\n@K\ndef k():\n    pass\n",
    "relative": "from .functools import lru_cache\n\n@lru_cache\ndef f():\n    pass\n",
    "import in try": (
        "try:\n    import functools\nexcept ImportError:\n    functools = None\n\n@functools.lru_cache\ndef f():\n"
        "    pass\n"
    ),
    "not imported": "@lru_cache\ndef f():\n    pass\n",
    "two imports of one name": (
        "import functools\nfrom x import functools\n\n@functools.lru_cache\ndef f():\n    pass\n"
    ),
}


def _libcst_names(source: str) -> list[tuple[frozenset[str], ...]]:
    wrapper = MetadataWrapper(libcst.parse_module(source))
    out = []

    class Visit(libcst.CSTVisitor):
        METADATA_DEPENDENCIES = (QualifiedNameProvider,)

        def visit_FunctionDef(self, node: libcst.FunctionDef) -> None:
            row = []
            for decorator in node.decorators:
                target = decorator.decorator
                target = target.func if isinstance(target, libcst.Call) else target
                row.append(frozenset(q.name for q in self.get_metadata(QualifiedNameProvider, target, set())))
            out.append(tuple(row))

    wrapper.visit(Visit())
    return out


@pytest.mark.parametrize("case", sorted(SOURCES))
def test_decorator_names_are_libcsts_qualified_names(case: str) -> None:
    source = SOURCES[case]
    ours = [f.decorators for f in _Facts(source).functions]
    assert ours == _libcst_names(source)
    assert any(d for row in ours for d in row) or case == "not imported" or case == "class scope not seen from a method"


def _migrated(source: str) -> str:
    result = migrate_source(source, "m.py")
    assert isinstance(result, TransformSuccess), result
    return result.code


KERNEL = "import flydsl.compiler as flyc\n"
BODY = "def build(n):\n    @flyc.kernel\n    def k(x):\n        return x + n\n\n    return k\n"


def test_an_import_still_used_elsewhere_is_kept() -> None:
    source = f"import functools as ft\n{KERNEL}\n\n@ft.lru_cache(maxsize=None)\n{BODY}\n\nP = ft.partial(print)\n"
    out = _migrated(source)
    assert "@flydeps.cached_factory(maxsize=None)" in out
    assert "import functools as ft\n" in out and "ft.partial" in out


def test_an_import_nothing_else_uses_is_removed() -> None:
    source = f"from functools import lru_cache, partial\n{KERNEL}\n\n@lru_cache\n{BODY}\n\nP = partial(print)\n"
    out = _migrated(source)
    assert "@flydeps.cached_factory\n" in out
    assert "from functools import partial\n" in out and "lru_cache" not in out


def test_a_name_listed_in_dunder_all_is_kept() -> None:
    source = f'from functools import lru_cache\n{KERNEL}\n\n__all__ = ["lru_cache"]\n\n\n@lru_cache\n{BODY}'
    out = _migrated(source)
    assert "@flydeps.cached_factory\n" in out and "from functools import lru_cache\n" in out


def test_a_function_local_import_is_resolved_and_removed() -> None:
    source = (
        f"{KERNEL}\n\ndef outer():\n    from functools import lru_cache\n\n    @lru_cache(maxsize=4)\n"
        "    def build(n):\n        @flyc.kernel\n        def k(x):\n            return x + n\n\n"
        "        return k\n\n    return build\n"
    )
    out = _migrated(source)
    assert "@flydeps.cached_factory(maxsize=4)" in out and "functools" not in out


def test_a_source_cpythons_parser_refuses_is_reported_as_a_syntax_error(tmp_path, monkeypatch) -> None:
    """libcst accepted it, the codemod's ast pass did not: a ``path:line:`` syntax error,
    not a crash report, and nothing changes."""
    from flydeps.migrate import codemod
    from flydeps.migrate.tree import migrate_file

    def refuse(text: str) -> None:
        raise SyntaxError("invalid syntax", ("m.py", 2, 1, "x", 2, 2))

    monkeypatch.setattr(codemod, "_Facts", refuse)
    path = tmp_path / "m.py"
    path.write_text("import flydsl.compiler as flyc\nx = 1\n")
    migration = migrate_file(str(path))
    assert str(migration.problem) == f"{path}:2: syntax error: invalid syntax; fix the file"
    assert not migration.changed
