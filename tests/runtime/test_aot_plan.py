"""``flydeps aot plan``: which entries of a manifest a built directory holds and which an
edit (or the commits since a revision) invalidates, from static digests only.

One real build (``flydeps aot build``, FlyDSL compiles in worker processes) of a copy of the
realworld example kernels makes the directory; the plan is then computed in this process
(nothing of the kernels is imported here). The oracle for "which entries an edit
invalidates" is FlyDSL itself: the same spec built again from the edited copy, whose rows'
IR keys say which specializations now trace to other IR.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flydsl")

from flydeps import cli  # noqa: E402
from flydsl_runtime.aot import plan as aot_plan  # noqa: E402
from flydsl_runtime.persist import index  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

SPEC = """
import torch

from kernels.realworld import norms, quant, softmax, tuned


def specializations():
    x, w = torch.zeros(512), torch.zeros(8)
    for width in (1, 2):
        yield norms.rmsnorm, (x, w, x, 256, width)
    yield norms.layernorm, (x, w, w, x, 256), {"width": 1}
    yield quant.QUANT.launch, (x, x, 256), {"bias": 0.0}
    yield tuned.tuned_scale, (x, x, 256)  # reads a tuning table while tracing
    yield softmax.softmax_w4, (x, x, 256)  # made by a builder (softmax_w4_scaled, by the same one, is not built)
"""

TENSOR: dict[str, Any] = {"tensor": {"dtype": "float32", "shape": [-1], "stride": [1]}}
ENTRIES: list[dict[str, Any]] = [
    {"launcher": "kernels.realworld.norms:rmsnorm", "args": [TENSOR, TENSOR, TENSOR, 256, 1]},
    {"launcher": "kernels.realworld.norms:rmsnorm", "args": [TENSOR, TENSOR, TENSOR, 256, 2]},
    {
        "launcher": "kernels.realworld.norms:layernorm",
        "args": [TENSOR, TENSOR, TENSOR, TENSOR, 256],
        "kwargs": {"width": 1},
    },
    {"launcher": "kernels.realworld.quant:QUANT.launch", "args": [TENSOR, TENSOR, 256], "kwargs": {"bias": 0.0}},
    {"launcher": "kernels.realworld.tuned:tuned_scale", "args": [TENSOR, TENSOR, 256]},
    {"launcher": "kernels.realworld.softmax:softmax_w4", "args": [TENSOR, TENSOR, 256]},
]
SCALED = {"launcher": "kernels.realworld.softmax:softmax_w4_scaled", "args": [TENSOR, TENSOR, 256]}
NORMS = {"kernels.realworld.norms.rmsnorm", "kernels.realworld.norms.layernorm"}


def _manifest(path: Path, entries: list[dict]) -> Path:
    lines = [{"schema": "flydeps.aot-manifest/1"}, *entries]
    path.write_text("".join(json.dumps(e, sort_keys=True) + "\n" for e in lines))
    return path


def _source(where: Path) -> Path:
    """A copy of the realworld kernels (package ``kernels``) and the spec, under ``where``."""
    (where / "kernels").mkdir(parents=True)
    shutil.copy(EXAMPLES / "kernels" / "__init__.py", where / "kernels" / "__init__.py")
    shutil.copytree(EXAMPLES / "kernels" / "realworld", where / "kernels" / "realworld")
    (where / "spec.py").write_text(SPEC)
    return where


def _build(src: Path, out: Path, cache: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(src), "FLYDEPS_CACHE_DIR": str(cache), "ARCH": "gfx942"}
    command = [sys.executable, "-m", "flydeps", "aot", "build", f"{src / 'spec.py'}:specializations"]
    done = subprocess.run(
        [*command, "--arch", "gfx942", "--out", str(out), "--no-progress"],
        cwd=src,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def _ir_keys(out: Path) -> dict[tuple[str, str], str]:
    """(launcher, arguments as keyed) -> IR key of each row of a built directory."""
    found = {}
    for _key, _reads, launcher, ir_key, _c, _py, detail in index.read_rows(out / index.INDEX_NAME):
        found[(launcher, json.dumps(json.loads(detail)["args"], sort_keys=True))] = ir_key
    return found


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the kernels' source as built, the built directory)."""
    if not os.environ.get("ROCM_PATH"):  # conftest sets it to a usable compile root
        pytest.fail("no ROCm compile root: run .ci/setup_rocm.sh (installs lld-19 and rocm-device-libs)")
    base = tmp_path_factory.mktemp("plan")
    src = _source(base / "src")
    _build(src, base / "out", base / "cache")
    return src, base / "out"


def _plan(*argv: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = aot_plan.run(cli._parser().parse_args(["aot", "plan", *argv]))  # the command's own options
    out, err = capsys.readouterr()
    return code, out, err


def _changed_ir(out: Path, edited: Path, tmp_path: Path) -> set[str]:
    """The oracle: the launchers whose FlyDSL IR key differs between the rows of ``out`` and
    those of the same spec built from ``edited``."""
    _build(edited, tmp_path / "out2", tmp_path / "cache")
    before, after = _ir_keys(out), _ir_keys(tmp_path / "out2")
    return {launcher for (launcher, args), ir in before.items() if after[(launcher, args)] != ir}


def _invalidated_by(doc: dict, node: str) -> set[str]:
    """The row launchers a JSON plan invalidates, each of whose units names ``node``."""
    for unit in doc["units"]:
        if unit["status"] == "invalidated":
            assert any(r["node"] == node for r in unit["reasons"]), unit
    return {u["row_launcher"] for u in doc["units"] if u["status"] == "invalidated"}


def _built_then_edited(tmp_path: Path, src: Path, file: str, text: str) -> tuple[Path, Path, Path]:
    """``src`` built into ``tmp_path/out``, then copied to ``tmp_path/edited`` with ``file``
    rewritten to ``text``; with the manifest of :data:`ENTRIES`: ``(out, edited, manifest)``."""
    out, edited = tmp_path / "out", tmp_path / "edited"
    _build(src, out, tmp_path / "cache")
    shutil.copytree(src, edited)
    (edited / file).write_text(text)
    return out, edited, _manifest(tmp_path / "m.jsonl", ENTRIES)


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path}: {old!r} not found"
    path.write_text(text.replace(old, new, 1))


def test_nothing_changed_everything_present(built: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    src, out = built
    manifest = _manifest(tmp_path / "m.jsonl", ENTRIES)
    code, text, err = _plan(
        "--manifest", str(manifest), "--out", str(out), "--root", str(src), "--exit-code", capsys=capsys
    )
    assert code == 0, text + err
    assert text.splitlines()[0] == f"aot plan for {out}: 6 present, 0 invalidated, 0 missing (of 6)"
    # another specialization (width 3), another arch: missing, and the arch named
    more = _manifest(
        tmp_path / "more.jsonl", [*ENTRIES, {**ENTRIES[0], "args": [TENSOR, TENSOR, TENSOR, 256, 3]}, SCALED]
    )
    code, text, _ = _plan(
        "--manifest", str(more), "--out", str(out), "--root", str(src), "--arch", "gfx942,gfx950", "--exit-code",
        capsys=capsys,
    )  # fmt: skip
    assert code == 1
    lines = text.splitlines()
    assert lines[0] == f"aot plan for {out}: 6 present, 0 invalidated, 10 missing (of 16)"
    assert lines[1] == f"arches with no specialization in {out}: gfx950"
    assert f"missing     kernels.realworld.norms:rmsnorm [gfx942] ({more}:8): no specialization in DIR" in lines
    # the same builder's other launcher, called the same way: told apart by the builder's arguments
    assert (
        f"missing     kernels.realworld.softmax:softmax_w4_scaled [gfx942] ({more}:9): no specialization in DIR"
        in lines
    )
    assert sum("[gfx942]" in line for line in lines) == 2, lines
    # an env the entry records that the build's trace read otherwise: invalidated by env
    env = _manifest(tmp_path / "env.jsonl", [{**ENTRIES[0], "environ": {"RW_NORM_PRECISE": "1"}}])
    code, text, _ = _plan("--manifest", str(env), "--out", str(out), "--root", str(src), "--exit-code", capsys=capsys)
    assert code == 1
    assert "os.environ['RW_NORM_PRECISE']: built reading None, manifest '1'" in text


def test_a_helper_edit_invalidates_exactly_the_entries_whose_ir_changes(
    built: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    src, out = built
    edited = tmp_path / "src"
    shutil.copytree(src, edited)
    manifest = _manifest(tmp_path / "m.jsonl", ENTRIES)
    argv = ("--manifest", str(manifest), "--out", str(out), "--root", str(edited), "--exit-code")
    # a helper no launcher reaches: nothing to rebuild
    _edit(edited / "kernels/realworld/memops.py", "width={width * 1}", "width={width * 2}")
    code, text, _ = _plan(*argv, capsys=capsys)
    assert code == 0, text
    # a helper the norms reach (inv_std): their IR changes, quant's does not
    _edit(edited / "kernels/realworld/norms.py", "return fx.rsqrt(var + eps)", "return fx.rsqrt(var + eps + eps)")
    code, text, _ = _plan(*argv, "--format", "json", capsys=capsys)
    assert code == 1
    doc = json.loads(text)
    assert doc["schema"] == "flydeps.aot-plan/1"
    stale = {(u["row_launcher"], u["where"]) for u in doc["units"] if u["status"] == "invalidated"}
    assert doc["counts"] == {"present": 3, "invalidated": 3, "missing": 0, "unchecked": 0}
    for unit in doc["units"]:
        if unit["status"] == "invalidated":
            assert [r["node"] for r in unit["reasons"]] == ["kernels.realworld.norms:inv_std"], unit
            assert unit["reasons"][0]["location"] == "kernels/realworld/norms.py:20"
    # the oracle: FlyDSL's IR keys of the same spec built from the edited source
    _build(edited, tmp_path / "out2", tmp_path / "cache")
    before, after = _ir_keys(out), _ir_keys(tmp_path / "out2")
    assert before.keys() == after.keys()
    changed = {launcher for (launcher, args), ir in before.items() if after[(launcher, args)] != ir}
    assert changed == NORMS
    assert sum(1 for (launcher, _), ir in before.items() if after[(launcher, _)] != ir) == len(stale) == 3
    assert {launcher for launcher, _ in stale} == changed
    code, text, _ = _plan(*argv[:-1], capsys=capsys)
    assert code == 0  # without --exit-code
    assert "kernels/realworld/norms.py:20 helper kernels.realworld.norms:inv_std changed since the build" in text


def test_a_data_file_the_trace_read_invalidates_its_entries(built: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    """``tuned_scale`` reads ``tuning/gfx942.json`` while tracing (a derived read of the row):
    an edit of the table invalidates it, and only it, as FlyDSL's IR keys say."""
    src, out = built
    table = src / "kernels/realworld/tuning/gfx942.json"
    saved = table.read_text()
    manifest = _manifest(tmp_path / "m.jsonl", ENTRIES)
    try:
        table.write_text(saved.replace('"scale": 0.5', '"scale": 0.75'))
        code, text, _ = _plan("--manifest", str(manifest), "--out", str(out), "--root", str(src), capsys=capsys)
        lines = text.splitlines()
        assert lines[0] == f"aot plan for {out}: 5 present, 1 invalidated, 0 missing (of 6)", text
        assert lines[1].startswith(f"invalidated kernels.realworld.tuned:tuned_scale [gfx942] ({manifest}:6): "), text
        assert str(table) in lines[1] and "since the build" in lines[1], lines[1]
        _build(src, tmp_path / "out2", tmp_path / "cache")
        before, after = _ir_keys(out), _ir_keys(tmp_path / "out2")
        assert {launcher for (launcher, args), ir in before.items() if after[(launcher, args)] != ir} == {
            "kernels.realworld.tuned.tuned_scale"
        }
    finally:
        table.write_text(saved)


def test_since_a_revision(built: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    src, out = built
    repo = tmp_path / "repo"
    shutil.copytree(src, repo)

    def git(*args: str) -> str:
        env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t"}
        env["GIT_COMMITTER_EMAIL"] = "t@t"
        return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout

    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "built")
    _edit(repo / "kernels/realworld/quant.py", "-self.CLAMP, self.CLAMP", "-self.CLAMP, self.CLAMP * 0.5")
    git("commit", "-qam", "saturate at half")
    manifest = _manifest(tmp_path / "m.jsonl", ENTRIES)
    argv = ("--manifest", str(manifest), "--out", str(out), "--root", str(repo), "--exit-code")
    code, text, _ = _plan(*argv, "--since", "HEAD", capsys=capsys)
    assert code == 0, text  # nothing changed between HEAD and the working tree
    assert text.splitlines()[0] == f"aot plan for {out} since HEAD: 6 present, 0 invalidated, 0 missing (of 6)"
    code, text, _ = _plan(*argv, "--since", "HEAD~1", capsys=capsys)
    assert code == 1
    lines = text.splitlines()
    assert lines[0] == f"aot plan for {out} since HEAD~1: 5 present, 1 invalidated, 0 missing (of 6)"
    assert lines[1].startswith("invalidated kernels.realworld.quant:QUANT.launch [gfx942]"), lines
    assert (
        "kernels/realworld/quant.py:23 helper kernels.realworld.quant:Fp8Quant.saturate changed since HEAD~1"
        in lines[1]
    )
    code, text, err = _plan(*argv, "--since", "no-such-rev", capsys=capsys)
    assert code == 2 and "--since no-such-rev" in err and not text


def test_bad_inputs_exit_2_naming_the_file(tmp_path: Path, capsys) -> None:
    manifest = _manifest(tmp_path / "m.jsonl", ENTRIES)
    missing = tmp_path / "nowhere"
    code, out, err = _plan("--manifest", str(manifest), "--out", str(missing), "--exit-code", capsys=capsys)
    assert code == 2 and not out
    assert err.startswith(f"flydeps aot plan: {missing / index.INDEX_NAME}: no persistent index there"), err
    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / index.INDEX_NAME).write_bytes(b"not sqlite at all" * 100)
    code, out, err = _plan("--manifest", str(manifest), "--out", str(corrupt), capsys=capsys)
    assert code == 2 and f"{corrupt / index.INDEX_NAME}: not a readable persistent index" in err, err
    assert (corrupt / index.INDEX_NAME).read_bytes() == b"not sqlite at all" * 100  # left as it was
    bad = tmp_path / "bad.jsonl"
    bad.write_text(manifest.read_text() + '{"launcher": "kernels.realworld.norms:rmsnorm", "args": 3}\n{oops\n')
    code, out, err = _plan("--manifest", str(bad), "--out", str(corrupt), capsys=capsys)
    assert code == 2 and err.startswith(f"flydeps aot plan: {bad}:8: args is int, not a list"), err
    assert "(and 1 more bad lines)" in err
    code, out, err = _plan("--manifest", str(tmp_path / "absent.jsonl"), "--out", str(corrupt), capsys=capsys)
    assert code == 2 and f"{tmp_path / 'absent.jsonl'}: cannot be read" in err, err


def test_a_launcher_module_not_under_the_roots_is_bad_input(built: tuple[Path, Path], tmp_path: Path, capsys) -> None:
    """Judging rows against a graph without their code would call them all present."""
    _src, out = built
    manifest = _manifest(tmp_path / "m.jsonl", ENTRIES)
    code, text, err = _plan("--manifest", str(manifest), "--out", str(out), "--root", str(tmp_path), capsys=capsys)
    assert code == 2 and not text
    assert err.startswith(f"flydeps aot plan: {manifest}:2: module kernels.realworld.norms of "), err
    assert "--root DIR" in err


def test_module_level_rebinding_and_an_instance_argument_invalidate_against_the_build_sources(
    built: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    """What no digest stored in a row can be compared with: a helper rebound under module-level
    ``try`` after its ``def`` (the norms' ``inv_std`` replaced by another module's), and the
    argument of the module-level instance a launcher is reached by (``QUANT``). The build left
    its sources in DIR (``aot-sources.json``); the plan compares static digests with static
    digests. The oracle: FlyDSL's IR keys of the same spec built from the edited copy."""
    src, out = built
    assert (out / "aot-sources.json").is_file()
    edited = tmp_path / "src"
    shutil.copytree(src, edited)
    manifest = _manifest(tmp_path / "m.jsonl", ENTRIES)
    argv = ("--manifest", str(manifest), "--out", str(out), "--root", str(edited), "--exit-code")
    (edited / "kernels/realworld/_fastmath.py").write_text(
        "import flydsl.expr as fx\n\n\ndef inv_std(var, eps):\n    return fx.rsqrt(var + eps + eps)\n"
    )
    _edit(
        edited / "kernels/realworld/norms.py",
        "    return fx.rsqrt(var + eps)\n",
        "    return fx.rsqrt(var + eps)\n\n\ntry:\n    from ._fastmath import inv_std\nexcept ImportError:\n    pass\n",
    )
    _edit(edited / "kernels/realworld/quant.py", "QUANT = Fp8Quant(scale=2.0)", "QUANT = Fp8Quant(scale=4.0)")
    code, text, err = _plan(*argv, "--format", "json", capsys=capsys)
    assert code == 1, text + err
    doc = json.loads(text)
    assert doc["notes"] == [], doc["notes"]
    stale = {u["row_launcher"] for u in doc["units"] if u["status"] == "invalidated"}
    assert doc["counts"] == {"present": 2, "invalidated": 4, "missing": 0, "unchecked": 0}, doc["units"]
    quant = next(u for u in doc["units"] if u["launcher"].endswith("QUANT.launch"))
    assert [r["node"] for r in quant["reasons"]] == ["kernels.realworld.quant:QUANT"], quant
    assert quant["reasons"][0]["text"].startswith("kernels/realworld/quant.py:38 kernels.realworld.quant:QUANT")
    norms = [u for u in doc["units"] if "norms" in u["launcher"]]
    assert all(any("inv_std" in r["node"] for r in u["reasons"]) for u in norms), norms
    # the oracle
    _build(edited, tmp_path / "out2", tmp_path / "cache")
    before, after = _ir_keys(out), _ir_keys(tmp_path / "out2")
    assert before.keys() == after.keys()
    changed = {launcher for (launcher, args), ir in before.items() if after[(launcher, args)] != ir}
    assert changed == stale == NORMS | {"kernels.realworld.quant.Fp8Quant.launch"}
    # a cosmetic edit of the same statements changes nothing
    again = tmp_path / "again"
    shutil.copytree(src, again)
    _edit(
        again / "kernels/realworld/quant.py", "QUANT = Fp8Quant(scale=2.0)", "\n\nQUANT = Fp8Quant(scale=2.0)  # a note"
    )
    code, text, _ = _plan(*argv[:4], "--root", str(again), "--exit-code", capsys=capsys)
    assert code == 0, text


def test_a_snapshot_that_does_not_hold_the_rows_sources_is_not_used_for_them(
    built: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    """A snapshot edited by hand (red team Y08: memops.py's bytes replaced by the edited
    working-tree file, the rows list intact) agrees with the working tree, so a plan trusting
    it would call the edit's rows present. Each row's stored digests are checked against the
    snapshot's static digests first: the rows it does not describe are judged by their own
    digests (invalidated, the helper named), with a note. The oracle: FlyDSL's IR keys."""
    src, out = built
    copy, edited = tmp_path / "out", tmp_path / "src"
    shutil.copytree(out, copy)
    shutil.copytree(src, edited)
    memops = edited / "kernels/realworld/memops.py"
    _edit(
        memops, "        pitch = (width + PAD - 1) // PAD * PAD", "        pitch = (width + 2 * PAD - 1) // PAD * PAD"
    )
    doc = json.loads((copy / "aot-sources.json").read_text())
    (name,) = [p for p in doc["files"] if p.endswith("kernels/realworld/memops.py")]
    doc["files"][name] = base64.b64encode(memops.read_bytes()).decode("ascii")
    (copy / "aot-sources.json").write_text(json.dumps(doc))
    manifest = _manifest(tmp_path / "m.jsonl", ENTRIES)
    code, text, _ = _plan(
        "--manifest",
        str(manifest),
        "--out",
        str(copy),
        "--root",
        str(edited),
        "--exit-code",
        "--format",
        "json",
        capsys=capsys,
    )
    plan = json.loads(text)
    assert code == 1
    stale = _invalidated_by(plan, "kernels.realworld.memops:row_pitch")
    (note,) = [n for n in plan["notes"] if "does not hold the sources" in n]
    assert "kernels.realworld.memops:row_pitch" in note, note
    changed = _changed_ir(out, edited, tmp_path)
    assert changed and changed <= stale, (changed, stale)


def test_a_directory_without_a_source_snapshot_says_what_it_cannot_judge(
    built: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    src, out = built
    copy = tmp_path / "out"
    shutil.copytree(out, copy)
    (copy / "aot-sources.json").unlink()
    manifest = _manifest(tmp_path / "m.jsonl", ENTRIES)
    argv = ("--manifest", str(manifest), "--out", str(copy), "--root", str(src))
    code, text, _ = _plan(*argv, capsys=capsys)
    assert code == 0 and f"note: {copy} has no source snapshot (aot-sources.json" in text, text
    assert "plan with --since REV" in text
    # what it could not judge is listed, and fails --exit-code: a CI gate never passes on it
    assert "unchecked   kernels.realworld.tuned:tuned_scale [gfx942]" in text, text
    assert "kernels.realworld.tuned:TUNING" in text  # a global bound to an expression (a path)
    code, text, _ = _plan(*argv, "--exit-code", "--format", "json", capsys=capsys)
    assert code == 1
    doc = json.loads(text)
    unjudged = sum(bool(u["unchecked"]) for u in doc["units"])
    assert unjudged >= 1 and doc["counts"] == {"present": 6, "invalidated": 0, "missing": 0, "unchecked": unjudged}
    tuned = next(u for u in doc["units"] if u["launcher"].endswith("tuned_scale"))
    assert "kernels.realworld.tuned:TUNING" in tuned["unchecked"]
    # a damaged one, a directory, a FIFO: named, not used, nothing else lost, never blocks
    (copy / "aot-sources.json").write_text('{"schema": "flydeps.aot-sources/1", "files": 3}')
    code, text, _ = _plan(*argv, capsys=capsys)
    assert code == 0, text
    head = f"aot plan for {copy}: 6 present ({unjudged} of them unchecked), 0 invalidated, 0 missing (of 6)"
    assert text.splitlines()[0] == head, text
    assert f"note: {copy / 'aot-sources.json'}: not a source snapshot of `flydeps aot build`" in text, text
    assert "unchecked   " in text
    assert (copy / "aot-sources.json").read_text() == '{"schema": "flydeps.aot-sources/1", "files": 3}'
    (copy / "aot-sources.json").unlink()
    (copy / "aot-sources.json").mkdir()
    code, text, _ = _plan(*argv, "--exit-code", capsys=capsys)
    assert code == 1 and f"note: {copy / 'aot-sources.json'}: not used (it is not a regular file)" in text, text
    (copy / "aot-sources.json").rmdir()
    os.mkfifo(copy / "aot-sources.json")
    code, text, _ = _plan(*argv, "--exit-code", capsys=capsys)
    assert code == 1 and f"note: {copy / 'aot-sources.json'}: not used" in text, text
    # a build with nothing to build writes it again (of the sources its rows serve)
    (copy / "aot-sources.json").unlink()
    _build(src, copy, tmp_path / "cache")
    code, text, _ = _plan(*argv, "--exit-code", capsys=capsys)
    assert code == 0, text
    assert text.splitlines()[0] == f"aot plan for {copy}: 6 present, 0 invalidated, 0 missing (of 6)"


def test_a_module_level_write_of_os_environ_a_trace_reads_invalidates(
    built: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    """``os.environ.setdefault(...)`` in the package's ``__init__`` (run on import, before any
    trace): the norms read ``RW_NORM_PRECISE`` while tracing; their IR changes, nobody
    else's, and they are named by the variable. Every entry is invalidated by the package's
    code (a module of which the graph holds no node: conservative). The oracle: FlyDSL's IR
    keys of the same spec built from the edited copy."""
    src, out = built
    edited = tmp_path / "src"
    shutil.copytree(src, edited)
    init = edited / "kernels/realworld/__init__.py"
    init.write_text(init.read_text() + '\nimport os as _os\n\n_os.environ.setdefault("RW_NORM_PRECISE", "1")\n')
    manifest = _manifest(tmp_path / "m.jsonl", ENTRIES)
    argv = ("--manifest", str(manifest), "--out", str(out), "--root", str(edited), "--exit-code", "--format", "json")
    code, text, _ = _plan(*argv, capsys=capsys)
    assert code == 1, text
    doc = json.loads(text)
    for unit in doc["units"]:  # the norms by the variable they read; all by the package's code (conservative)
        nodes = [r["node"] for r in unit["reasons"]]
        assert unit["status"] == "invalidated" and "kernels.realworld" in nodes, unit
        assert ("os.environ['RW_NORM_PRECISE']" in nodes) is (unit["row_launcher"] in NORMS), unit
    _build(edited, tmp_path / "out2", tmp_path / "cache")
    before, after = _ir_keys(out), _ir_keys(tmp_path / "out2")
    assert {launcher for (launcher, args), ir in before.items() if after[(launcher, args)] != ir} == NORMS


@pytest.mark.parametrize(
    ("source", "names"),
    [
        ('import os\nos.environ["A"] = "1"\n', {"A"}),
        ('import os as o\no.environ.setdefault("B", "1")\n', {"B"}),
        ('from os import environ as env\nenv.update(C="1")\n', {"*"}),
        ('import os\nif True:\n    os.putenv("D", "1")\n', {"D"}),
        ('import os\nclass K:\n    os.environ.pop("E", None)\n', {"E"}),
        ('import os\nkey = "F"\nos.environ[key] = "1"\n', {"*"}),
        ('import os\ndef f():\n    os.environ["G"] = "1"\n', set()),  # runs when called, not on import
        ('import os\nclass K:\n    def m(self):\n        os.environ["H"] = "1"\n', set()),
        ('import os\nx = os.environ.get("I")\n', set()),  # a read
    ],
)
def test_module_level_environ_writes_are_found(source: str, names: set[str]) -> None:
    import ast

    found = {name for name, _stmt in aot_plan._import_time_writes(ast.parse(source))}
    assert found == names


@pytest.mark.parametrize(
    ("before", "after", "same"),
    [
        ("Q = K(scale=2.0)\n", "\n\nQ = K(scale=2.0)  # a note\n", True),  # where, not what
        ("Q = K(scale=2.0)\n", "Q = K(scale=4.0)\n", False),
        ("CFG = {'s': 2}\nQ = K(**CFG)\n", "CFG = {'s': 4}\nQ = K(**CFG)\n", False),  # a name it reads
        ("CFG = {'s': 2}\nQ = K(**CFG)\n", "CFG = {'s': 2}\nQ = K(**CFG)\nOTHER = 1\n", True),
        (
            "F = True\nif F:\n    Q = K(1)\nelse:\n    Q = K(2)\n",
            "F = False\nif F:\n    Q = K(1)\nelse:\n    Q = K(2)\n",
            False,
        ),
        ("try:\n    Q = K(1)\nexcept E:\n    Q = K(2)\n", "try:\n    Q = K(1)\nexcept E:\n    Q = K(3)\n", False),
        ("Q = K(1)\n", "Q = K(1)\nQ = Q.with_scale(2)\n", False),  # rebound later
        (
            "Q = K(1)\nclass K:\n    '''doc'''\n",
            "Q = K(1)\nclass K:\n    '''other'''\n",
            True,
        ),  # its code: a graph node
        ("M = 1\nmatch M:\n    case 1:\n        Q = K(1)\n", "M = 2\nmatch M:\n    case 1:\n        Q = K(1)\n", False),
    ],
)
def test_the_binding_of_the_name_an_entry_is_reached_by(before: str, after: str, same: bool) -> None:
    was, now = aot_plan._binding(before.encode(), "Q"), aot_plan._binding(after.encode(), "Q")
    assert was is not None and now is not None
    assert (was[0] == now[0]) is same
    assert aot_plan._binding(b"X = 1\n", "Q") is None and aot_plan._binding(b"def (:\n", "Q") is None


def test_module_level_code_acting_on_another_module_invalidates_what_it_may_reach(
    built: tuple[Path, Path], tmp_path: Path, capsys
) -> None:
    """``memops.PAD = 8`` in norms.py (a module attribute patched by an importer): no name is
    bound, the graph does not follow it. Every entry whose graph holds norms or memops is
    invalidated (conservative: the quantizer reads no PAD); none whose IR changed is present."""
    src, out = built
    edited = tmp_path / "src"
    shutil.copytree(src, edited)
    _edit(edited / "kernels/realworld/norms.py", "BLOCK = 64\n", "BLOCK = 64\nmemops.PAD = 8\n")
    manifest = _manifest(tmp_path / "m.jsonl", ENTRIES)
    argv = ("--manifest", str(manifest), "--out", str(out), "--root", str(edited), "--format", "json")
    code, text, _ = _plan(*argv, capsys=capsys)
    doc = json.loads(text)
    stale = {u["row_launcher"] for u in doc["units"] if u["status"] == "invalidated"}
    for unit in doc["units"]:
        if unit["status"] == "invalidated":
            assert any("module-level code of kernels.realworld.norms" in r["text"] for r in unit["reasons"]), unit
    _build(edited, tmp_path / "out2", tmp_path / "cache")
    before, after = _ir_keys(out), _ir_keys(tmp_path / "out2")
    changed = {launcher for (launcher, args), ir in before.items() if after[(launcher, args)] != ir}
    assert NORMS <= changed <= stale, (changed, stale)


@pytest.mark.parametrize(
    ("source", "touched"),
    [
        ("from . import memops\nmemops.PAD = 8\n", {"pkg.k", "pkg.memops"}),
        ("import sys\nsetattr(sys.modules[__name__], 'PAD', 8)\n", {"pkg.k", "sys"}),
        ("globals().update(PAD=8)\n", {"pkg.k"}),
        ("from .quant import QUANT\nQUANT.inv_scale = 0.25\n", {"pkg.k", "pkg.quant.QUANT"}),
        ("T = {}\nT['a'] = 1\n", {"pkg.k"}),
        ("class C:\n    import os\n    x = 1\n    C2.y = 2\n", {"pkg.k"}),
        ("PAD = 4\nPAD *= 2\nA, B = 1, 2\n", None),  # bindings: the graph follows them
        ('"""doc"""\n', None),
        ("import os\nos.environ.setdefault('X', '1')\nos.environ['Y'] = '1'\n", None),  # per variable
        ("def f():\n    g.x = 1\n", None),  # runs when called
    ],
)
def test_import_time_effects_are_found(source: str, touched: set[str] | None) -> None:
    import ast

    found = aot_plan._import_time_effects(ast.parse(source), "pkg.k", False)
    if touched is None:
        assert found == []
    else:
        assert len(found) >= 1 and set().union(*(t for t, _s in found)) == touched


def test_a_module_read_by_a_constant_name_lookup_invalidates(tmp_path: Path, capsys) -> None:
    """A helper reads ``importlib.import_module("kernels.realworld._consts").PAD``: the static
    graph does not follow the lookup (the runtime does), so a change of ``_consts`` — a
    project module the row's code may import and of which the graph holds no node —
    invalidates every row whose graph holds the importing module. The oracle: FlyDSL's IR
    keys of the same spec built from the edited copy (none of them may stay present)."""
    if not os.environ.get("ROCM_PATH"):
        pytest.fail("no ROCm compile root: run .ci/setup_rocm.sh (installs lld-19 and rocm-device-libs)")
    src = _source(tmp_path / "src")
    memops = src / "kernels/realworld/memops.py"
    # (imported with memops: a module first imported while a trace runs makes that trace not kept)
    _edit(memops, "import os\n", "import importlib\nimport os\n\nfrom . import _consts  # noqa: F401\n")
    _edit(
        memops,
        "        pitch = (width + PAD - 1) // PAD * PAD",
        '        pad = importlib.import_module("kernels.realworld._consts").PAD\n'
        "        pitch = (width + pad - 1) // pad * pad",
    )
    (src / "kernels/realworld/_consts.py").write_text("PAD = 4\n")
    out, edited, manifest = _built_then_edited(tmp_path, src, "kernels/realworld/_consts.py", "PAD = 8\n")
    code, text, _ = _plan(
        "--manifest", str(manifest), "--out", str(out), "--root", str(edited), "--format", "json", capsys=capsys
    )
    stale = _invalidated_by(json.loads(text), "kernels.realworld._consts")
    changed = _changed_ir(out, edited, tmp_path)
    assert NORMS <= changed <= stale, (changed, stale)
    # a comment in it changes nothing
    (edited / "kernels/realworld/_consts.py").write_text("PAD = 4  # the pad\n")
    code, text, _ = _plan("--manifest", str(manifest), "--out", str(out), "--root", str(edited), capsys=capsys)
    assert text.splitlines()[0] == f"aot plan for {out}: 6 present, 0 invalidated, 0 missing (of 6)", text


def test_a_module_outside_the_project_makes_the_rows_reading_it_unchecked(tmp_path: Path, capsys) -> None:
    """memops puts a vendored directory on ``sys.path`` and imports ``PAD`` from a module
    there: neither the static digests nor the source snapshot hold that module's code, so
    an edit of it must not leave the rows reading it plainly present. They are ``unchecked``
    (``--exit-code`` fails) and named with the import; with the directory given as a root
    they are judged (invalidated). The oracle: FlyDSL's IR keys of the spec built from the
    edited copy."""
    if not os.environ.get("ROCM_PATH"):
        pytest.fail("no ROCm compile root: run .ci/setup_rocm.sh (installs lld-19 and rocm-device-libs)")
    src = _source(tmp_path / "src")
    memops = src / "kernels/realworld/memops.py"
    vendored = src / "kernels/realworld/_vendor"
    vendored.mkdir()
    (vendored / "rowcfg.py").write_text("PAD = 4\n")
    _edit(
        memops,
        "PAD = 4\n",
        'import sys\n\nsys.path.insert(0, os.path.join(os.path.dirname(__file__), "_vendor"))\n'
        "from rowcfg import PAD  # noqa: E402\n",
    )
    out, edited, manifest = _built_then_edited(tmp_path, src, "kernels/realworld/_vendor/rowcfg.py", "PAD = 8\n")
    argv = ("--manifest", str(manifest), "--out", str(out), "--root", str(edited))
    code, text, _ = _plan(*argv, "--format", "json", "--exit-code", capsys=capsys)
    doc = json.loads(text)
    assert code == 1
    unjudged = {u["row_launcher"] for u in doc["units"] if u["unchecked"]}
    for unit in doc["units"]:
        if unit["unchecked"]:
            assert unit["unchecked"] == ["rowcfg (kernels/realworld/memops.py:17)"] or all(
                entry.startswith("rowcfg (") and "memops.py:" in entry for entry in unit["unchecked"]
            ), unit
            assert "outside the project" in unit["unchecked_why"] and "--root" in unit["unchecked_why"]
    changed = _changed_ir(out, edited, tmp_path)
    stale_present = {u["row_launcher"] for u in doc["units"] if u["status"] == "present" and not u["unchecked"]}
    assert changed and not (changed & stale_present), (changed, stale_present)
    assert changed <= unjudged | {u["row_launcher"] for u in doc["units"] if u["status"] == "invalidated"}
    _code, text, _ = _plan(*argv, capsys=capsys)
    assert "unchecked" in text and "rowcfg (" in text, text
    # the directory given as a root: judged, every row whose IR changed invalidated
    code, text, _ = _plan(*argv, "--root", str(edited / "kernels/realworld/_vendor"), "--format", "json", capsys=capsys)
    doc = json.loads(text)
    stale = {u["row_launcher"] for u in doc["units"] if u["status"] == "invalidated"}
    assert changed <= stale and not any(u["unchecked"] for u in doc["units"]), doc["units"]
