"""``flydeps diff`` on a temporary git repository built from the fixture package."""

from __future__ import annotations

import importlib.machinery
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from flydeps.static.diff import GitTree, diff_revisions

FIXTURES = Path(__file__).resolve().parent / "fixtures"
FACTORY = "kernelrepo.attention.decode:compile_decode"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _commit(repo: Path, message: str) -> None:
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)


def _edit(repo: Path, rel: str, old: str, new: str) -> None:
    path = repo / rel
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    shutil.copytree(FIXTURES / "kernelrepo", tmp_path / "kernelrepo")
    _git(tmp_path, "init", "-q")
    _commit(tmp_path, "base")
    return tmp_path


def test_deep_helper_change_marks_every_root_using_it(repo: Path) -> None:
    _edit(repo, "kernelrepo/common/mem.py", "fx.memref_load_vec(", "fx.memref_load_vec_nt(")
    _commit(repo, "deep helper")
    result = diff_revisions(str(repo), "HEAD~1", "HEAD", ["."], use_cache=False)
    changed = {c.root: c for c in result.changes}
    assert set(changed) == {
        FACTORY,
        "kernelrepo.norm.base:NormBase.build",
        "kernelrepo.norm.base:NormBase.build@kernelrepo.norm.layernorm:LayerNorm",
        "kernelrepo.norm.base:NormBase.build@kernelrepo.norm.layernorm:RMSNorm",
    }
    assert ("kernelrepo.common.mem:_vector_load", "changed") in changed[FACTORY].changed
    assert ("external:flydsl.expr.memref_load_vec_nt", "added") in changed[FACTORY].changed


def test_comment_only_change_changes_nothing(repo: Path) -> None:
    _edit(
        repo,
        "kernelrepo/common/mem.py",
        "def _vector_load(lay, tensor, row):",
        "def _vector_load(lay, tensor, row):\n    # a comment\n    '''and a docstring'''\n",
    )
    _commit(repo, "comment")
    result = diff_revisions(str(repo), "HEAD~1", "HEAD", ["."], use_cache=False)
    assert result.changes == ()
    assert len(result.unchanged) == 4


def test_unrelated_function_change_changes_nothing(repo: Path) -> None:
    _edit(repo, "kernelrepo/common/mem.py", "return repr(tensor)", "return str(tensor)")
    _commit(repo, "unrelated")
    assert diff_revisions(str(repo), "HEAD~1", "HEAD", ["."], use_cache=False).changes == ()


def test_working_tree_against_head_and_subclass_override(repo: Path) -> None:
    _edit(repo, "kernelrepo/norm/layernorm.py", "return 0.0, sum(v * v", "return 0.0, 2 * sum(v * v")
    result = diff_revisions(str(repo), "HEAD", None, ["kernelrepo/norm"], use_cache=False)
    assert [c.root for c in result.changes] == ["kernelrepo.norm.base:NormBase.build@kernelrepo.norm.layernorm:RMSNorm"]


def test_cli_diff_text_and_json(repo: Path, monkeypatch, capsys) -> None:
    from flydeps.cli import main

    _edit(repo, "kernelrepo/attention/decode.py", "SCALE = 0.125", "SCALE = 0.25")
    _commit(repo, "constant")
    monkeypatch.chdir(repo / "kernelrepo")
    assert main(["diff", "HEAD~1", "HEAD", "--no-cache", "--", "attention"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"changed  {FACTORY}"
    assert "    changed  kernelrepo.attention.decode:SCALE  kernelrepo/attention/decode.py:11" in out
    assert main(["diff", "HEAD~1", "HEAD", "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["root"] for c in doc["changed"]] == [FACTORY] and len(doc["unchanged"]) == 3


def test_diff_with_an_explicit_root(repo: Path, monkeypatch, capsys) -> None:
    from flydeps.cli import main

    _edit(repo, "kernelrepo/common/math_ops.py", "x * 1.4426950408889634", "x * 1.5")
    monkeypatch.chdir(repo)
    assert main(["diff", "HEAD", "--root", ".", "--no-cache", "--", "kernelrepo"]) == 0
    out = capsys.readouterr().out
    assert f"changed  {FACTORY}" in out
    assert "    changed  kernelrepo.common.math_ops:fast_exp  kernelrepo/common/math_ops.py:8" in out


# File names git's line-based `cat-file --batch "rev:path"` protocol cannot carry (issue 11,
# item 4): a newline shifts every later answer. Bytes, not str: one is not UTF-8.
ODD_NAMES = [b"new\nline.py", b"tab\there.py", b"with space.py", b"quote'\"d.py", b"latin\xe9.py", b"\nlead.py"]


def _write_odd_files(directory: Path, tag: str) -> dict[bytes, bytes]:
    """Each odd name with distinct Python source; returns name -> bytes written."""
    written = {}
    for index, name in enumerate(ODD_NAMES):
        data = f"ODD_{index} = {tag!r}  # {name!r}\n".encode()
        (Path(os.fsdecode(bytes(directory) + b"/" + name))).write_bytes(data)
        written[name] = data
    return written


def test_git_tree_reads_every_file_name_byte_for_byte(tmp_path: Path) -> None:
    """Oracle: the bytes the test wrote on disk, for every file of the revision."""
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    (tmp_path / "pkg" / "sub dir").mkdir(parents=True)
    expected = {b"pkg/" + k: v for k, v in _write_odd_files(tmp_path / "pkg", "a").items()}
    expected |= {b"pkg/sub dir/" + k: v for k, v in _write_odd_files(tmp_path / "pkg" / "sub dir", "b").items()}
    expected[b"pkg/plain.py"] = b"X = 1\n"
    (tmp_path / "pkg" / "plain.py").write_bytes(expected[b"pkg/plain.py"])
    (tmp_path / "pkg" / "link.py").symlink_to("plain.py")
    expected[b"pkg/link.py"] = expected[b"pkg/plain.py"]  # read through the link, as on disk
    (tmp_path / "pkg" / "dangling.py").symlink_to("../../outside.py")
    _git(tmp_path, "init", "-q")
    _commit(tmp_path, "odd names")
    tree = GitTree(str(tmp_path), "HEAD")
    assert tree.files == {os.fsdecode(p) for p in expected}  # the link leaving the tree is no file
    assert tree.python_files("pkg/sub dir") == sorted(os.fsdecode(p) for p in expected if b"sub dir" in p)
    for path, data in expected.items():
        assert tree.read(os.fsdecode(path)) == data, path
    with pytest.raises(FileNotFoundError):
        tree.read("pkg/dangling.py")


@pytest.mark.parametrize("where", ["outside", "inside"])
def test_diff_is_unchanged_by_odd_file_names(tmp_path: Path, where: str) -> None:
    """Oracle: the same edit in the same repository without the odd files."""
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    results = []
    for odd in (False, True):
        repo = tmp_path / f"repo{odd}"
        shutil.copytree(FIXTURES / "kernelrepo", repo / "kernelrepo")
        _git(repo, "init", "-q")
        target = repo / ("kernelrepo/attention" if where == "inside" else "scripts")
        target.mkdir(exist_ok=True)
        if odd:
            _write_odd_files(target, "before")
        _commit(repo, "base")
        _edit(repo, "kernelrepo/common/mem.py", "fx.memref_load_vec(", "fx.memref_load_vec_nt(")
        if odd:
            _write_odd_files(target, "after")
        _commit(repo, "edit")
        committed = diff_revisions(str(repo), "HEAD~1", "HEAD", ["kernelrepo"], use_cache=False)
        _edit(repo, "kernelrepo/attention/decode.py", "SCALE = 0.125", "SCALE = 0.25")
        working = diff_revisions(str(repo), "HEAD", None, ["kernelrepo"], use_cache=False)
        results.append([(r.changes, r.unchanged) for r in (committed, working)])
    assert results[0][0][0], "the edit changes roots"
    assert results[1] == results[0]


def _with_built_and_scratch_files(repo: Path) -> None:
    """HEAD's mem.py uses a compiled helper that is built, not committed (``*.so`` is
    ignored), and an untracked scratch module of the same name sits beside it."""
    _edit(repo, "kernelrepo/common/mem.py", "from . import layout\n", "from . import _fastmem, layout\n")
    _edit(
        repo,
        "kernelrepo/common/mem.py",
        "    return _vector_load(",
        "    _fastmem.prefetch(tensor)\n    return _vector_load(",
    )
    (repo / ".gitignore").write_text("*.so\n")
    _commit(repo, "uses a built extension")
    built = "_fastmem" + importlib.machinery.EXTENSION_SUFFIXES[0]  # this interpreter's: _fastmem.cpython-3XX-...so
    (repo / "kernelrepo/common" / built).write_bytes(b"\x7fELF built, ignored")


def test_diff_against_the_working_tree_reads_tracked_files_only(repo: Path, monkeypatch, capsys) -> None:
    """Ignored (a built ``.so``) and untracked files are not part of a revision: in a clean
    checkout ``flydeps diff HEAD`` reports nothing, though reading the directory as it is
    would resolve the import differently (issue 38)."""
    from flydeps.cli import main
    from flydeps.static.analyze import analyze
    from flydeps.static.project import FileSystemTree

    _with_built_and_scratch_files(repo)
    head = diff_revisions(str(repo), "HEAD", "HEAD", ["."], use_cache=False).new.digests
    on_disk = analyze(["."], tree=FileSystemTree(str(repo)), use_cache=False).digests
    assert on_disk[FACTORY] != head[FACTORY]  # the ignored .so would change the answer
    assert diff_revisions(str(repo), "HEAD", None, ["."], use_cache=False).changes == ()
    (repo / "kernelrepo/common/_fastmem.py").write_text("def prefetch(t):\n    return t\n")  # untracked
    assert diff_revisions(str(repo), "HEAD", None, ["."], use_cache=False).changes == ()
    monkeypatch.chdir(repo)
    assert main(["diff", "HEAD", "--no-cache", "--exit-code"]) == 0
    capsys.readouterr()
    _git(repo, "add", "kernelrepo/common/_fastmem.py")  # tracked now (staged): part of the working tree
    assert main(["diff", "HEAD", "--no-cache", "--exit-code"]) == 1
    assert f"changed  {FACTORY}" in capsys.readouterr().out


def test_exit_code_is_one_only_when_a_root_changed(repo: Path, monkeypatch, capsys) -> None:
    from flydeps.cli import main

    monkeypatch.chdir(repo)
    assert main(["diff", "HEAD", "--no-cache", "--exit-code"]) == 0
    assert main(["diff", "HEAD", "--no-cache"]) == 0
    _edit(repo, "kernelrepo/common/math_ops.py", "x * 1.4426950408889634", "x * 1.5")
    assert main(["diff", "HEAD", "--no-cache"]) == 0  # without --exit-code: a report, not a failure
    assert main(["diff", "HEAD", "--no-cache", "--exit-code"]) == 1
    assert main(["diff", "HEAD", "--no-cache", "--exit-code", "--format", "json"]) == 1
    capsys.readouterr()
    os.remove(repo / "kernelrepo/common/math_ops.py")  # a tracked file deleted in the working tree
    assert main(["diff", "HEAD", "--no-cache", "--exit-code"]) == 1
    assert "kernelrepo.common.math_ops" in capsys.readouterr().out
