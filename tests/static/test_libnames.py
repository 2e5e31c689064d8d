"""Library names are where the library defines them (static/libnames.py), read from its
installed source without importing it; what cannot be known for sure stays as written."""

from __future__ import annotations

import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from flydeps.static import libnames
from flydeps.static.libnames import Canonical, canonical

LIBRARY = {
    "fakelib/__init__.py": """
        from typing import TYPE_CHECKING
        from .computed import *
        from .numeric import *
        from .primitive import *
        from . import sub as sub
        from .primitive import helper as renamed
        import fakelib.deep.inner as inner_mod
        if TYPE_CHECKING:
            from .stubs import const_expr
        try:
            from ._speedups import fast
        except ImportError:
            def fast(): ...
        """,
    "fakelib/numeric.py": """
        __all__ = ["Int32"]
        class Int32: ...
        def const_expr(x): return x   # not in __all__: not exported by the star import
        """,
    "fakelib/primitive.py": """
        def const_expr(x): return x
        def helper(): ...
        def _private(): ...
        TABLE = {"a": 1}
        class Op:
            ADD = 1
        """,
    "fakelib/sub.py": "def f(): ...\n",
    "fakelib/deep/__init__.py": "",
    "fakelib/deep/inner.py": "def g(): ...\n",
    "fakelib/stubs.py": "def const_expr(x): ...\n",
    "fakelib/computed.py": "__all__ = ['late'] + ['other']\ndef late(): ...\n",
}


@pytest.fixture()
def fakelib(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for name, text in LIBRARY.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    monkeypatch.syspath_prepend(str(tmp_path))
    for cached in (libnames._canonical, libnames._find, libnames._read):
        cached.cache_clear()
    yield tmp_path
    for cached in (libnames._canonical, libnames._find, libnames._read):
        cached.cache_clear()
    assert "fakelib" not in sys.modules  # read, never imported


@pytest.mark.parametrize(
    "dotted,expected",
    [
        ("fakelib.const_expr", Canonical("fakelib.primitive.const_expr", "def")),  # the star that exports it
        ("fakelib.Int32", Canonical("fakelib.numeric.Int32", "def")),
        ("fakelib.renamed", Canonical("fakelib.primitive.helper", "def")),  # ``import x as y``
        ("fakelib.Op.ADD", Canonical("fakelib.primitive.Op", "def")),  # attributes of a class are its own
        ("fakelib.TABLE", Canonical("fakelib.primitive.TABLE", "value")),
        ("fakelib.sub", Canonical("fakelib.sub", "module")),
        ("fakelib.sub.f", Canonical("fakelib.sub.f", "def")),
        ("fakelib.inner_mod.g", Canonical("fakelib.deep.inner.g", "def")),
        ("fakelib.deep.inner.g", Canonical("fakelib.deep.inner.g", "def")),
    ],
)
def test_a_library_name_is_where_the_library_defines_it(fakelib: Path, dotted: str, expected: Canonical) -> None:
    assert canonical(dotted) == expected


@pytest.mark.parametrize(
    "dotted,why",
    [
        ("fakelib.fast", "bound in a try and in its handler: which one is live is not known statically"),
        ("fakelib.late", "a computed __all__ decides whether a star import provides it"),
        ("fakelib._private", "a private name is not exported by a star import"),
        ("fakelib.nothing", "bound nowhere"),
        ("notinstalled_xyz.f", "no such library"),
    ],
)
def test_what_cannot_be_known_for_sure_stays_as_written(fakelib: Path, dotted: str, why: str) -> None:
    assert canonical(dotted) == Canonical(dotted, "path"), why


def test_a_broken_library_file_leaves_the_name_as_written(fakelib: Path) -> None:
    (fakelib / "fakelib" / "sub.py").write_bytes(b"def f(:\n")
    assert canonical("fakelib.sub.f") == Canonical("fakelib.sub.f", "path")
    (fakelib / "fakelib" / "primitive.py").write_bytes(b"\xff\xfe\x00garbage")
    libnames._read.cache_clear()
    libnames._canonical.cache_clear()
    assert canonical("fakelib.const_expr").kind == "path"


def test_static_analysis_names_an_imported_library_function_where_it_is_defined(fakelib: Path, tmp_path: Path) -> None:
    """A project's ``from fakelib import const_expr`` links to the defining module's leaf,
    as the runtime names the function it finds in the global (``__module__``)."""
    from flydeps.static.analyze import analyze

    project = tmp_path / "proj"
    project.mkdir()
    (project / "k.py").write_text(
        textwrap.dedent(
            """
            import functools
            import fakelib
            from fakelib import const_expr, Op

            @functools.lru_cache
            def build():
                return const_expr(Op.ADD), fakelib.const_expr(1)
            """
        )
    )
    graph = analyze([str(project / "k.py")], use_cache=False).graph
    reached = set(graph.reachable(graph.roots[0]))
    assert "external:fakelib.primitive.const_expr" in reached  # the global: where it is defined
    assert "external:fakelib.primitive.Op" in reached  # Op.ADD: the class's leaf
    assert "external:fakelib.const_expr" in reached  # a chain through the module: the path walked
    assert "external:fakelib.Op.ADD" not in reached
