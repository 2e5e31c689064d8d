"""Repository layouts: package directories declared by the project's metadata (src layout,
pyproject, setup.cfg), stray scripts outside them, and ``flydeps diff`` on such a repository."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from flydeps.cli import main
from flydeps.static.analyze import analyze
from flydeps.static.project import FileSystemTree, declared_roots

SRCREPO = Path(__file__).resolve().parent / "fixtures" / "srcrepo"
ROOTS = ["mk.attn:build_scores.<locals>.scores_kernel", "mk.attn:build_scores.<locals>.launch_scores"]


@pytest.mark.parametrize(
    "files,expected",
    [
        ({"pyproject.toml": '[tool.setuptools]\npackage-dir = {"" = "lib"}\n'}, ["lib"]),
        ({"pyproject.toml": '[tool.setuptools.packages.find]\nwhere = ["src"]\n'}, ["src"]),
        ({"pyproject.toml": '[tool.hatch.build.targets.wheel]\npackages = ["code/mk"]\n'}, ["code"]),
        ({"pyproject.toml": '[tool.poetry]\npackages = [{include = "mk", from = "python"}]\n'}, ["python"]),
        ({"setup.cfg": "[options]\npackage_dir =\n    =lib\n"}, ["lib"]),
        ({"setup.cfg": "[options.packages.find]\nwhere = src\n"}, ["src"]),
        ({"setup.py": "from setuptools import setup\nsetup()\n"}, ["src"]),  # nothing declared: src/
        ({"pyproject.toml": "[project]\nname = 'x'\n", "README": ""}, ["src"]),
        ({"README": ""}, []),  # no metadata: the detected root holds
        ({"pyproject.toml": "this is [ not toml"}, ["src"]),  # unreadable metadata: src/ still
    ],
)
def test_declared_package_directories(tmp_path: Path, files: dict[str, str], expected: list[str]) -> None:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    for directory in ("src", "lib", "code", "python"):
        (tmp_path / directory / "mk").mkdir(parents=True)
    found = declared_roots(FileSystemTree(), str(tmp_path))
    assert found == [str(tmp_path / d) for d in expected]


def test_src_layout_resolves_own_absolute_imports_and_notes_stray_scripts() -> None:
    result = analyze([str(SRCREPO)], use_cache=False)
    assert list(result.graph.roots) == ROOTS
    assert "mk.common.mem:load" in result.graph.reachable(ROOTS[0])
    assert not [d for d in result.diagnostics if not d.note]
    (note,) = result.diagnostics
    assert note.path.endswith("scripts/bench_scores.py") and "outside every root" in note.message


def test_a_file_named_outside_the_roots_is_still_an_error(capsys) -> None:
    assert main(["graph", str(SRCREPO / "scripts" / "bench_scores.py"), "--root", str(SRCREPO / "src")]) == 1
    assert "outside every root" in capsys.readouterr().err


def _git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout


@pytest.fixture()
def srcrepo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git not installed")
    repo = tmp_path / "repo"
    shutil.copytree(SRCREPO, repo, ignore=shutil.ignore_patterns("__pycache__"))
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    monkeypatch.chdir(repo)
    return repo


def test_diff_names_the_roots_of_an_edited_helper_in_a_src_layout(srcrepo: Path, capsys) -> None:
    mem = srcrepo / "src" / "mk" / "common" / "mem.py"
    mem.write_text(mem.read_text().replace("memref_load_vec(view[row])", "memref_load_vec(view[row + 1])"))
    assert main(["diff", "HEAD", "--no-cache"]) == 0  # the stray script is a note, not a failure
    captured = capsys.readouterr()
    for root in ROOTS:
        assert f"changed  {root}" in captured.out
    assert "    changed  mk.common.mem:load  mk/common/mem.py:8" in captured.out
    assert captured.out.endswith("2 changed, 0 unchanged\n")
    assert captured.err.count("scripts/bench_scores.py: note: outside every root") == 1  # once, not per side


def test_options_may_follow_the_paths_after_a_double_dash(srcrepo: Path, capsys) -> None:
    attn = srcrepo / "src" / "mk" / "attn.py"
    attn.write_text(attn.read_text().replace("SCALE / 2", "SCALE / 4"))
    assert main(["diff", "HEAD", "--", "src", "--format", "json", "--no-cache"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [c["root"] for c in doc["changed"]] == ROOTS
    assert main(["diff", "HEAD", "--", "src", "--format=text", "--no-cache"]) == 0
    assert capsys.readouterr().out.endswith("2 changed, 0 unchanged\n")
    assert main(["diff", "HEAD", "--", "src", "--format"]) == 2  # an option missing its value
