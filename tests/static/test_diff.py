"""``flydeps diff`` on a temporary git repository built from the fixture package."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from flydeps.static.diff import diff_revisions

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
