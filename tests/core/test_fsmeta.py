"""flydeps.store.fsmeta: the C file-metadata helpers (flydeps.store._statext) give exactly what their
Python specification gives, on regular files, links, dangling links, missing files,
directories that cannot be opened, undecodable names and paths realpath(3) cannot resolve.

The oracle is the standard library itself: ``os.stat`` lines built in Python and
``os.path.realpath``."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flydeps.store import fsmeta as _fsmeta

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file metadata")


def test_the_c_helpers_are_built_wherever_the_others_are() -> None:
    """Optional for users without a compiler, never silently missing where the package's other
    C extensions were built (as in CI): the tests below would otherwise all skip."""
    if importlib.util.find_spec("flydeps.builds._fastcache") is not None:
        assert _fsmeta._statext is not None
        if importlib.util.find_spec("flydsl") is not None:  # flydsl_runtime imports FlyDSL
            assert importlib.util.find_spec("flydsl_runtime.persist._capi") is not None


statext = pytest.importorskip("flydeps.store._statext", reason="the C helpers were not built here")


def _tree(root: Path) -> list[str]:
    (root / "a.bc").write_bytes(b"one")
    (root / "b.bc").write_bytes(b"two two")
    (root / "sub").mkdir()
    os.symlink(root / "a.bc", root / "link.bc")
    os.symlink(root / "gone.bc", root / "dangling.bc")
    return ["a.bc", "b.bc", "sub", "link.bc", "dangling.bc", "missing.bc"]


def test_file_states_match_python_line_for_line(tmp_path: Path) -> None:
    names = _tree(tmp_path)
    c = statext.file_states(str(tmp_path), names)
    assert c == _fsmeta._file_states_py(str(tmp_path), names)
    lines = c.split(b"\0")[:-1]
    assert len(lines) == len(names)
    st = os.stat(tmp_path / "link.bc")  # through the link: the target's metadata
    assert lines[3] == f"link.bc {st.st_size} {st.st_mtime_ns} {st.st_ino}".encode()
    assert lines[4] == b"dangling.bc unreadable 2" and lines[5] == b"missing.bc unreadable 2"


def test_file_states_see_an_edit_in_place(tmp_path: Path) -> None:
    names = _tree(tmp_path)
    before = _fsmeta.file_states(str(tmp_path), names)
    os.utime(tmp_path / "b.bc", ns=(1, 10**18 + 7))
    after = _fsmeta.file_states(str(tmp_path), names)
    assert before != after and b"b.bc 7 1000000000000000007 " in after
    assert after == _fsmeta._file_states_py(str(tmp_path), names)


def test_file_states_when_the_directory_cannot_be_opened(tmp_path: Path) -> None:
    """A missing directory and a file given as the directory: each name is joined and
    stat'ed, and fails as in Python (ENOENT, ENOTDIR)."""
    _tree(tmp_path)
    for directory in (str(tmp_path / "nowhere"), str(tmp_path / "a.bc"), str(tmp_path / "nowhere") + "/"):
        names = ["a.bc", "x"]
        assert statext.file_states(directory, names) == _fsmeta._file_states_py(directory, names)


def test_file_states_relative_to_the_working_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    names = _tree(tmp_path)
    monkeypatch.chdir(tmp_path)
    for directory in ("", ".", "sub/.."):
        assert statext.file_states(directory, names) == _fsmeta._file_states_py(directory, names)


def test_file_states_undecodable_names(tmp_path: Path) -> None:
    raw = os.fsencode(str(tmp_path)) + b"/\xff\xfe.bc"
    with open(raw, "wb") as f:
        f.write(b"x")
    names = sorted(os.listdir(tmp_path))  # surrogateescape'd
    assert names and "\udcff" in names[0]
    assert statext.file_states(str(tmp_path), names) == _fsmeta._file_states_py(str(tmp_path), names)


def test_file_states_bad_input(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        statext.file_states(str(tmp_path), ["a\0b"])
    with pytest.raises(ValueError):
        _fsmeta._file_states_py(str(tmp_path), ["a\0b"])
    with pytest.raises(TypeError):
        statext.file_states(str(tmp_path), [b"bytes"])
    with pytest.raises(TypeError, match="names must be a list or tuple of str"):
        statext.file_states(str(tmp_path), 3)
    with pytest.raises(TypeError, match="names must be a list or tuple of str"):
        statext.file_states(str(tmp_path), (n for n in ["a"]))
    assert statext.file_states(str(tmp_path), []) == b"" == _fsmeta._file_states_py(str(tmp_path), [])
    assert statext.file_states("a\0b", []) == b"" == _fsmeta._file_states_py("a\0b", [])  # never opened
    with pytest.raises(ValueError):
        statext.file_states("a\0b", ["x"])
    with pytest.raises(ValueError):
        _fsmeta._file_states_py("a\0b", ["x"])


def _make_links(tmp_path: Path) -> Path:
    """A tree with links to directories, a link up the tree, a dangling link and a loop."""
    (tmp_path / "real" / "deep").mkdir(parents=True)
    (tmp_path / "real" / "deep" / "mod.py").write_text("x = 1\n")
    os.symlink(tmp_path / "real", tmp_path / "alias")
    os.symlink("real/deep", tmp_path / "rel")  # relative target
    os.symlink("..", tmp_path / "real" / "up")
    os.symlink(tmp_path / "nowhere", tmp_path / "dangling")
    os.symlink(tmp_path / "loop2", tmp_path / "loop1")
    os.symlink(tmp_path / "loop1", tmp_path / "loop2")
    return tmp_path


@pytest.fixture
def links(tmp_path: Path) -> Path:
    return _make_links(tmp_path)


def test_real_path_matches_os_path_realpath(links: Path) -> None:
    for rel in (
        "real/deep/mod.py",
        "alias/deep/mod.py",
        "rel/mod.py",
        "alias/up/rel/../deep/./mod.py",
        "alias/deep/",
        "dangling/mod.py",  # realpath(3) fails: Python's non-strict answer
        "loop1/x",
        "real/deep/mod.py/inside",
        "missing/../real",
    ):
        path = f"{links}/{rel}"
        assert _fsmeta.real_path(path) == os.path.realpath(path), rel
    assert _fsmeta.real_path("/" + str(links) + "/alias") == os.path.realpath("/" + str(links) + "/alias")


def test_real_path_relative_and_bad_input(links: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(links / "alias")
    for rel in ("", ".", "deep", "up/alias", "../rel/mod.py"):
        assert _fsmeta.real_path(rel) == os.path.realpath(rel), rel
    assert statext.realpath("a\0b") is None  # left to os.path.realpath, which raises
    with pytest.raises(ValueError):
        _fsmeta.real_path("a\0b")
    with pytest.raises(TypeError):
        statext.realpath(b"/tmp")


_PARTS = st.sampled_from(["real", "deep", "alias", "rel", "up", "dangling", "loop1", "mod.py", "..", ".", "", "nope"])


@settings(max_examples=300, deadline=None)
@given(parts=st.lists(_PARTS, max_size=7), absolute=st.booleans())
def test_real_path_property(parts: list[str], absolute: bool, tmp_path_factory: pytest.TempPathFactory) -> None:
    root = _LINKS.get("root")
    if root is None:
        root = tmp_path_factory.mktemp("links")
        _make_links(root)
        _LINKS["root"] = root
    path = "/".join([str(root), *parts]) if absolute else "/".join(parts)
    here = os.getcwd()
    try:
        if not absolute:
            os.chdir(root / "real")
        assert _fsmeta.real_path(path) == os.path.realpath(path)
    finally:
        os.chdir(here)


_LINKS: dict[str, Path] = {}
