"""The persistent index: a new process starts a kernel without tracing, exactly.

Every "new process" here is a real one (``index_child.py``): it imports a private copy of
the kernel package, calls one launcher under COMPILE_ONLY=1 and reports how many FlyDSL
traces ran. The oracle for "no trace was needed" is FlyDSL itself: the IR key of a row
loaded without tracing equals the IR key a fresh trace gives (``FLYDEPS_VERIFY=1`` in the
same kind of process traces, compares and raises on a difference).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import sqlite3
import struct
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("flydsl")

import torch  # noqa: E402

from flydsl_runtime.persist import index, sqlitefile  # noqa: E402

KERNELS = Path(__file__).parent / "kernels"

CHILD = Path(__file__).with_name("index_child.py")


class Repo:
    """A kernel package on disk, its own FlyDSL cache and index, run in new processes."""

    def __init__(self, tmp: Path) -> None:
        self.root = tmp / "src"
        self.name = f"fdkx_{uuid.uuid4().hex[:10]}"
        shutil.copytree(KERNELS / "fdk", self.root / self.name)
        self.flydsl_cache = tmp / "flydsl-cache"
        self.flydeps_cache = tmp / "flydeps-cache"
        self.index = self.flydeps_cache / index.INDEX_NAME

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("COMPILE_ONLY", None)
        env.update(
            COMPILE_ONLY="1",
            FLYDSL_RUNTIME_CACHE_DIR=str(self.flydsl_cache),
            FLYDSL_RUNTIME_ENABLE_CACHE="1",
            FLYDEPS_CACHE_DIR=str(self.flydeps_cache),
            PYTHONDONTWRITEBYTECODE="1",
        )
        env.update(extra)
        return env

    def start(self, module: str = "reduce", launcher: str = "partial_sum", *more: str, **env: str) -> subprocess.Popen:
        command = [sys.executable, str(CHILD), str(self.root), self.name, module, launcher, *more]
        return subprocess.Popen(command, env=self.env(**env), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    @staticmethod
    def result(proc: subprocess.Popen) -> dict[str, Any]:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-3000:]
        return json.loads(out.strip().splitlines()[-1])

    def run(self, module: str = "reduce", launcher: str = "partial_sum", *more: str, **env: str) -> dict[str, Any]:
        return self.result(self.start(module, launcher, *more, **env))

    def edit(self, module: str, old: str, new: str) -> None:
        path = self.root / self.name / f"{module}.py"
        text = path.read_text()
        assert old in text, (old, path)
        path.write_text(text.replace(old, new))

    def rows(self) -> list[tuple]:
        with sqlite3.connect(self.index) as conn:
            return conn.execute("SELECT key, env_reads, launcher, ir_key FROM specializations").fetchall()


@pytest.fixture
def repo(tmp_path: Path, rocm_root: Path) -> Repo:
    return Repo(tmp_path)


def test_new_process_starts_without_trace_and_the_ir_is_what_a_trace_gives(repo: Repo) -> None:
    first = repo.run()
    assert first["traces"] == 1 and not first["loaded"]
    assert len(repo.rows()) == 1
    second = repo.run()
    assert second == {**second, "traces": 0, "loaded": True, "ir_key": first["ir_key"]}
    # FlyDSL's ROCm root came from its C API, not its ROCDL binding (~1 ms to import).
    assert first["call_imported_rocdl_binding"] and not second["call_imported_rocdl_binding"]
    verified = repo.run(FLYDEPS_VERIFY="1")  # traces, compares with the row, raises if different
    assert verified["traces"] == 1 and verified["ir_key"] == first["ir_key"]
    assert len(repo.rows()) == 1


@pytest.mark.parametrize("launcher", ["persistent_launch", "named_device_launch"])
def test_a_row_is_served_only_where_the_device_answers_as_it_did(repo: Repo, launcher: str) -> None:
    """A trace that asks the device (a persistent kernel's compute units; the device's name,
    through torch's get_device_name) bakes the answer into the IR. An MI300X (304 compute
    units) and an MI300A (228) are both gfx942: target, arch and every other key part are
    equal, FlyDSL's fresh trace gives other IR (the oracle), and a row built on one is never
    served on the other; another card of the same model is (its UUID is not what it is).
    The device is simulated under torch.cuda (simulated_device.py): there is no GPU here."""
    args = ("trace_inputs", launcher)
    x = repo.run(*args, "--device-cus", "304", "--fresh-ir")
    assert x["traces"] == 1 and not x["loaded"] and x["ir_key"] == x["fresh_ir"]
    card = repo.run(*args, "--device-cus", "304", "--fresh-ir")  # another MI300X
    assert card == {**card, "traces": 0, "loaded": True, "ir_key": x["ir_key"], "fresh_ir": x["ir_key"]}
    a = repo.run(*args, "--device-cus", "228", "--fresh-ir")
    assert a["traces"] == 1 and not a["loaded"] and a["ir_key"] == a["fresh_ir"] != x["ir_key"]
    assert len(repo.rows()) == 2  # one key, one row per device answer
    again = repo.run(*args, "--device-cus", "228")
    assert again["traces"] == 0 and again["loaded"] and again["ir_key"] == a["ir_key"]
    back = repo.run(*args, "--device-cus", "304")
    assert back["traces"] == 0 and back["loaded"] and back["ir_key"] == x["ir_key"]
    no_gpu = repo.run(*args)  # torch's own answer here: no CUDA; the trace asks, and fails
    assert no_gpu["traces"] == 1 and no_gpu["error"] == "AssertionError"
    strict = repo.run(*args, "--device-cus", "256", FLYDEPS_AOT="strict")
    assert strict["error"] == "AotMissError" and strict["traces"] == 0
    assert "multi_processor_count: " in strict["message"] and "-> 256" in strict["message"]


def test_deep_helper_edit_retraces_and_comment_edit_does_not(repo: Repo) -> None:
    base = repo.run()
    repo.edit("reduce_helpers", "return acc + x", "return acc - x")  # a helper in another module
    edited = repo.run()
    assert edited["traces"] == 1 and not edited["loaded"] and edited["ir_key"] != base["ir_key"]
    assert len(repo.rows()) == 2
    repo.edit("reduce_helpers", "def load(t, i):\n", "def load(t, i):\n    # a comment, nothing else\n")
    repo.edit("reduce", '"""Partial-sum', '"""A docstring edit. Partial-sum')
    commented = repo.run()
    assert commented["traces"] == 0 and commented["loaded"] and commented["ir_key"] == edited["ir_key"]
    repo.edit("reduce_helpers", "return acc - x", "return acc + x")  # back: the first row applies again
    back = repo.run()
    assert back["traces"] == 0 and back["ir_key"] == base["ir_key"]


_LIBCALL = """\
import flydsl.expr as fx

import flydsl_runtime.flyc as flyc
from fdk_helperlib import helpers


@flyc.kernel
def scaled_kernel(x: fx.Tensor, out: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * 64
    out[tid] = x[tid] * helpers.scale(1.0)  # a constant of the IR, computed by the library


@flyc.jit
def scaled(x: fx.Tensor, y: fx.Tensor, out: fx.Tensor, n: fx.Int32):
    scaled_kernel(x, out).launch(grid=(n // 64, 1, 1), block=(64, 1, 1))
"""


def test_a_library_reinstalled_at_the_same_version_with_other_code_retraces(repo: Repo, site_library: Any) -> None:
    """A kernel whose trace calls a helper library installed into site-packages (a leaf): after
    ``pip install .`` of an edited library at the same version, a new process must not be
    served the row of the old code (it was: the leaf was ``name==version`` alone). Oracle:
    FlyDSL's IR key from a fresh trace in that process. A strict process names the library
    that changed at the same version. Reinstalling the same files serves the row again."""
    (repo.root / repo.name / "libcall.py").write_text(_LIBCALL)
    helpers = "def scale(x):\n    return x * {factor}\n\n\ndef main():\n    print(scale(3))\n"

    def new_process(**extra: str) -> dict[str, Any]:
        command = [sys.executable, str(CHILD), str(repo.root), repo.name, "libcall", "scaled", "--fresh-ir"]
        env = {**repo.env(**extra), "PYTHONUSERBASE": site_library.env["PYTHONUSERBASE"]}
        env["PYTHONPATH"] = site_library.env["PYTHONPATH"]
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return repo.result(proc)

    site_library.install(helpers.format(factor=2.0))
    first = new_process()
    assert first["traces"] >= 1 and not first["loaded"] and first["ir_key"] == first["fresh_ir"]
    again = new_process()
    assert again["loaded"] and again["ir_key"] == first["ir_key"] == again["fresh_ir"], (first["notes"], again["notes"])
    site_library.install(helpers.format(factor=3.0))  # same version, other code
    strict = new_process(FLYDEPS_AOT="strict")
    assert strict["error"] == "AotMissError"
    assert (
        "differs: library fdk-helperlib==1.0 (fdk_helperlib.helpers.scale) changed at the same version: its files were "
        "installed again with other contents, or the row was keyed by another flydeps)"
    ) in strict["message"]
    edited = new_process()
    assert not edited["loaded"], edited["notes"]
    assert edited["ir_key"] == edited["fresh_ir"] != first["ir_key"]
    site_library.install(helpers.format(factor=2.0))  # the first files again: its row serves
    back = new_process()
    assert back["loaded"] and back["ir_key"] == first["ir_key"] == back["fresh_ir"]


def test_env_read_by_the_trace_is_part_of_the_row(repo: Repo) -> None:
    """A code-gen variable changes the key; a row applies only where the trace's env reads hold."""
    base = repo.run("vadd", "vadd")
    opt = repo.run("vadd", "vadd", FLYDSL_COMPILE_OPT_LEVEL="1")
    assert opt["traces"] == 1 and opt["ir_key"] != base["ir_key"]
    again = repo.run("vadd", "vadd", FLYDSL_COMPILE_OPT_LEVEL="1")
    assert again["traces"] == 0 and again["ir_key"] == opt["ir_key"]
    assert repo.run("vadd", "vadd")["traces"] == 0


def test_a_file_read_while_tracing_is_part_of_the_row(repo: Repo) -> None:
    """A tuning file edited, nothing else touched: a new process traces (it was served the
    old row, whose IR multiplies by the old factor) and its IR is what FlyDSL's fresh trace
    gives; a strict process names the file; the same bytes again serve the first row."""
    tuned = repo.root / repo.name / "tuned.json"
    original = tuned.read_bytes()
    first = repo.run("tuned", "tuned_launch", "--fresh-ir")
    assert first["traces"] >= 1 and first["ir_key"] == first["fresh_ir"]
    tuned.write_text('{"factor": 5.0}')
    strict = repo.run("tuned", "tuned_launch", FLYDEPS_AOT="strict")
    assert strict["error"] == "AotMissError"
    assert f"file {tuned} (read by the shipped trace): contents b3:" in strict["message"], strict["message"]
    edited = repo.run("tuned", "tuned_launch", "--fresh-ir")
    assert not edited["loaded"] and edited["ir_key"] == edited["fresh_ir"] != first["ir_key"]
    tuned.write_bytes(original)  # the first contents: the first row serves
    back = repo.run("tuned", "tuned_launch", "--fresh-ir")
    assert back["loaded"] and back["ir_key"] == back["fresh_ir"] == first["ir_key"]


def test_a_row_made_under_other_key_rules_never_serves(repo: Repo) -> None:
    """A row made by a flydeps whose keys followed other rules (an older one, whose rows do
    not record the files a trace read) must not serve a flydeps that would have keyed the
    trace otherwise, even at the same version; a strict process names the difference."""
    import flydeps

    older = repo.run("tuned", "tuned_launch", "--key-format", str(flydeps.KEY_FORMAT - 1))
    assert older["traces"] >= 1 and len(repo.rows()) == 1
    strict = repo.run("tuned", "tuned_launch", FLYDEPS_AOT="strict")
    assert strict["error"] == "AotMissError"
    assert (
        f"flydeps {flydeps.__version__} keys {flydeps.KEY_FORMAT - 1} -> {flydeps.__version__} keys "
        f"{flydeps.KEY_FORMAT} (rows are keyed by the rules of the flydeps that made them: rebuild them)"
    ) in strict["message"], strict["message"]
    now = repo.run("tuned", "tuned_launch")
    assert not now["loaded"] and now["traces"] >= 1 and len(repo.rows()) == 2


def test_a_trace_that_asks_flydsl_for_the_arch_holds_wherever_the_answer_is_the_same(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``s_waitcnt`` (and buffer ops) encode for FlyDSL's ``get_rocm_arch()``, which reads
    FLYDSL_GPU_ARCH, HSA_OVERRIDE_GFX_VERSION, or runs ``rocm_agent_enumerator`` found through
    PATH. The row depends on its answer: a process with another PATH (any other machine's) or
    naming the same arch by a variable is served the row; one where it answers another arch
    traces, and FlyDSL's fresh IR says a hit would have been stale."""
    for name in ("FLYDSL_GPU_ARCH", "HSA_OVERRIDE_GFX_VERSION"):
        monkeypatch.delenv(name, raising=False)
    call = ("trace_inputs", "wait_launch", "--fresh-ir")
    base = repo.run(*call)
    assert base["traces"] == 1 and not base["loaded"] and base["ir_key"] == base["fresh_ir"]
    ((_key, reads, _launcher, _ir),) = repo.rows()
    names = [name for name, _value in json.loads(reads)]
    assert "=get_rocm_arch()" in names and "PATH" not in names and "FLYDSL_GPU_ARCH" not in names
    other_path = os.pathsep.join([str(repo.root), "/usr/bin", "/bin"])  # no rocm_agent_enumerator either way
    for env in ({"PATH": other_path}, {"FLYDSL_GPU_ARCH": base["rocm_arch"]}):
        served = repo.run(*call, **env)
        assert served["loaded"] and served["traces"] == 0, env
        assert served["ir_key"] == base["ir_key"] == served["fresh_ir"], env
    rdna = repo.run(*call, HSA_OVERRIDE_GFX_VERSION="11.0.0")  # get_rocm_arch(): gfx1100
    assert rdna["traces"] == 1 and not rdna["loaded"] and rdna["ir_key"] == rdna["fresh_ir"] != base["ir_key"]
    again = repo.run(*call, HSA_OVERRIDE_GFX_VERSION="11.0.0", PATH=other_path)
    assert again["loaded"] and again["ir_key"] == rdna["ir_key"]


@pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
def test_corrupt_or_truncated_index_is_a_miss_with_one_note(repo: Repo, damage: str) -> None:
    first = repo.run()
    data = repo.index.read_bytes()
    for suffix in ("-wal", "-shm"):
        Path(f"{repo.index}{suffix}").unlink(missing_ok=True)
    repo.index.write_bytes(
        {"garbage": b"this is not a database" * 100, "truncated": data[: len(data) // 3], "empty": b""}[damage]
    )
    after = repo.run()
    assert after["ir_key"] == first["ir_key"]
    if damage == "empty":  # SQLite takes an empty file as a new database: nothing to read, a plain miss
        assert after["traces"] == 1
        return
    assert after["traces"] == 1 and not after["loaded"]
    notes = [n for n in after["notes"] if "persistent index" in n and "unreadable" in n]
    assert len(notes) == 1 and "\n" not in notes[0] and str(repo.index) in notes[0]
    assert list(repo.index.parent.glob(f"{index.INDEX_NAME}.corrupt-*"))  # kept aside, not lost
    assert repo.run()["traces"] == 0  # the new index has the row again


def test_missing_or_unreadable_artifact_is_a_miss_then_rebuilt(repo: Repo) -> None:
    first = repo.run()
    artifacts = list(repo.flydsl_cache.rglob("*.pkl"))
    assert artifacts
    for artifact in artifacts:
        artifact.unlink()
    missing = repo.run()
    assert missing["traces"] == 1 and not missing["loaded"] and missing["ir_key"] == first["ir_key"]
    assert any("without a usable FlyDSL artifact" in n for n in missing["notes"])
    for artifact in repo.flydsl_cache.rglob("*.pkl"):
        artifact.write_bytes(b"\x80\x04 not a pickle")
    unreadable = repo.run()
    assert unreadable["traces"] == 1 and unreadable["ir_key"] == first["ir_key"]
    assert repo.run()["traces"] == 0  # FlyDSL rewrote its artifact; the row finds it


def test_a_read_only_cache_serves_its_rows_and_traces_the_rest_in_memory(
    repo: Repo, tmp_path: Path, read_only_view
) -> None:
    """A runtime's cache (its index in WAL mode, as runtimes leave it) on a read-only mount:
    a new process is served its row without a trace, with the IR a fresh trace gives; a call
    without a row traces and runs; nothing is written there, and no warning is given."""
    first = repo.run()
    with sqlite3.connect(repo.index) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        (toolchain,) = {k for (k,) in conn.execute("SELECT flydsl_key FROM toolchains")}
        conn.execute("DELETE FROM toolchains")  # as if written on another machine (other files)
    shutil.rmtree(repo.flydeps_cache / "origin")  # the distribution index: that machine's too
    view = read_only_view(tmp_path)
    home = tmp_path / "home-cache"  # the user cache directory: writable
    read_only = {
        "FLYDEPS_CACHE_DIR": str(view / repo.flydeps_cache.name),
        "FLYDSL_RUNTIME_CACHE_DIR": str(view / repo.flydsl_cache.name),
        "XDG_CACHE_HOME": str(home),
    }
    served = repo.run("reduce", "partial_sum", "--fresh-ir", **read_only)
    assert served["loaded"] and served["traces"] == 0
    assert served["ir_key"] == served["fresh_ir"] == first["ir_key"]
    # What the read-only directory cannot take for this machine is remembered in the user
    # cache directory: FlyDSL's toolchain key, the distribution index (a ~35 ms scan).
    assert len(list((home / "flydeps" / "origin").glob("index-*.marshal"))) == 1
    with sqlite3.connect(home / "flydeps" / index.INDEX_NAME) as conn:
        assert {k for (k,) in conn.execute("SELECT flydsl_key FROM toolchains")} == {toolchain}
        assert conn.execute("SELECT count(*) FROM specializations").fetchone() == (0,)
    traced = repo.run("vadd", "vadd", "--fresh-ir", **read_only)
    assert traced["traces"] == 1 and not traced["loaded"] and traced["ir_key"] == traced["fresh_ir"]
    assert not [n for n in served["notes"] + traced["notes"] if "not read" in n or "not written" in n]
    assert len(repo.rows()) == 1 and len(list(repo.flydsl_cache.rglob("*.pkl"))) == 1
    strict = repo.run("vadd", "vadd", FLYDEPS_AOT="strict", **read_only)
    assert strict["error"] == "AotMissError" and "has no specialization of this launcher" in strict["message"]


def test_a_read_only_index_with_rows_in_its_log_is_a_miss_that_says_what_to_do(
    repo: Repo, tmp_path: Path, read_only_view
) -> None:
    """A copy of an index taken while a writer held rows in its write-ahead log, on a
    read-only mount: SQLite cannot read it there; the call traces with one note, a strict
    call's error and ``aot list`` name the file and what to do, and nothing is moved."""
    from flydeps.cli import main as cli

    repo.run()
    copy = tmp_path / "copy"
    copy.mkdir()
    writer = sqlite3.connect(repo.index, isolation_level=None)
    try:
        writer.execute("PRAGMA wal_autocheckpoint=0")
        writer.execute("INSERT INTO toolchains VALUES ('held in the log', 'x')")
        for suffix in ("", "-wal"):  # no -shm: the copy's reader would have to build it
            shutil.copy(f"{repo.index}{suffix}", copy / f"{index.INDEX_NAME}{suffix}")
    finally:
        writer.close()
    assert (copy / f"{index.INDEX_NAME}-wal").stat().st_size > 0
    shutil.copytree(repo.flydsl_cache, copy / "flydsl")
    view = read_only_view(copy)
    read_only = {"FLYDEPS_CACHE_DIR": str(view), "FLYDSL_RUNTIME_CACHE_DIR": str(view / "flydsl")}
    missed = repo.run("reduce", "partial_sum", "--fresh-ir", **read_only)
    assert missed["traces"] == 1 and not missed["loaded"] and missed["ir_key"] == missed["fresh_ir"]
    notes = [n for n in missed["notes"] if "persistent index" in n]
    assert len(notes) == 1, notes
    note = notes[0]
    assert str(view / index.INDEX_NAME) in note and "write-ahead log holds rows" in note and "\n" not in note
    strict = repo.run("reduce", "partial_sum", FLYDEPS_AOT="strict", **read_only)
    assert strict["error"] == "AotMissError" and "the index cannot be read" in strict["message"]
    assert "flydeps aot build" in strict["message"]
    assert cli(["aot", "list", str(view)]) == 2
    assert sorted(p.name for p in view.iterdir()) == sorted([index.INDEX_NAME, f"{index.INDEX_NAME}-wal", "flydsl"])


def test_a_read_only_index_a_writer_died_in_is_not_read(repo: Repo, tmp_path: Path, read_only_view) -> None:
    """An index in rollback-journal mode left with a hot journal (its writer died inside a
    transaction, some of its pages already in the file) on a read-only mount: SQLite would
    have to roll it back first, which cannot be done there, so it is not read (one note, the
    call traces) - never read as it lies."""
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    repo.run()
    with sqlite3.connect(repo.index) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    shutil.copy(repo.index, shipped / index.INDEX_NAME)
    shutil.copytree(repo.flydsl_cache, shipped / "flydsl")
    dying = (
        "import os, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA journal_mode=DELETE'); c.execute('PRAGMA cache_size=1')\n"
        "c.execute('BEGIN'); c.execute('DELETE FROM specializations')\n"
        "c.executemany('INSERT INTO toolchains VALUES (?, ?)', [(str(i) * 40, 'x' * 500) for i in range(400)])\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", dying, str(shipped / index.INDEX_NAME)], check=True)
    assert (shipped / f"{index.INDEX_NAME}-journal").stat().st_size > 0  # hot: the file holds undone pages
    view = read_only_view(shipped)
    after = repo.run(FLYDEPS_CACHE_DIR=str(view), FLYDSL_RUNTIME_CACHE_DIR=str(view / "flydsl"))
    assert after["traces"] == 1 and not after["loaded"]
    assert [n for n in after["notes"] if "persistent index" in n and "not read" in n]


def test_two_processes_building_one_specialization_leave_one_row(repo: Repo, tmp_path: Path) -> None:
    gate = tmp_path / "go"
    procs = [repo.start("reduce", "partial_sum", "--wait-file", str(gate)) for _ in range(2)]
    gate.touch()
    results = [repo.result(p) for p in procs]
    assert {r["ir_key"] for r in results} == {results[0]["ir_key"]}
    assert len(repo.rows()) == 1
    assert repo.run()["traces"] == 0


def test_index_off_or_flydsl_disk_cache_off_persists_nothing(repo: Repo) -> None:
    repo.run(FLYDEPS_INDEX="0")
    assert not repo.index.exists()
    repo.run(FLYDSL_RUNTIME_ENABLE_CACHE="0")
    assert not repo.index.exists()


def test_a_cache_directory_that_is_a_file_is_named_once_and_left_alone(repo: Repo, tmp_path: Path) -> None:
    """Bad input: FLYDEPS_CACHE_DIR naming a file. Calls trace (no index can be read or
    written there), one warning per process names the file, and the file is left as it was."""
    a_file = tmp_path / "not_a_dir"
    a_file.write_text("kept\n")
    for _ in range(2):
        done = repo.run("reduce", "partial_sum", "--fresh-ir", FLYDEPS_CACHE_DIR=str(a_file))
        assert done["traces"] == 1 and not done["loaded"] and done["ir_key"] == done["fresh_ir"]
        notes = [n for n in done["notes"] if "is a file" in n]
        assert len(notes) == 1 and str(a_file) in notes[0] and "FLYDEPS_CACHE_DIR" in notes[0], done["notes"]
    assert a_file.read_text() == "kept\n"


def test_bound_instance_is_keyed_by_its_state_across_processes(repo: Repo) -> None:
    """A launcher bound to an instance whose class has no ``__cache_signature__``: within a
    process keyed by identity, across processes by the instance's state. The oracle is
    FlyDSL's IR key from a fresh trace of the same bound call (``--fresh-ir``)."""
    first = repo.run("bound", "QUANT.launch", "--fresh-ir")
    assert first["traces"] == 1 and first["ir_key"] == first["fresh_ir"]
    assert len(repo.rows()) == 1
    again = repo.run("bound", "QUANT.launch", "--fresh-ir")
    assert again["traces"] == 0 and again["loaded"] and again["ir_key"] == again["fresh_ir"] == first["ir_key"]
    repo.edit("bound", "QUANT = Quant(factor=2)", "QUANT = Quant(factor=3)")  # the instance's state
    strict = repo.run("bound", "QUANT.launch", FLYDEPS_AOT="strict")  # names the attribute that differs
    assert strict["error"] == "AotMissError" and "bound instance attribute factor: 2 -> 3" in strict["message"]
    other = repo.run("bound", "QUANT.launch", "--fresh-ir")
    assert other["traces"] == 1 and not other["loaded"] and other["ir_key"] == other["fresh_ir"] != first["ir_key"]
    assert repo.run("bound", "QUANT.launch")["traces"] == 0
    repo.edit("bound", "QUANT = Quant(factor=3)", "QUANT = Quant(factor=2)")
    back = repo.run("bound", "QUANT.launch")
    assert back["traces"] == 0 and back["ir_key"] == first["ir_key"]
    verified = repo.run("bound", "QUANT.launch", FLYDEPS_VERIFY="1")  # traces, compares with the row
    assert verified["traces"] == 1 and verified["ir_key"] == first["ir_key"]
    assert len(repo.rows()) == 2


@pytest.mark.parametrize(
    ("launcher", "why"),
    [
        ("OPAQUE.launch", "handle"),  # an attribute with no readable state
        ("MEMO.launch", "the trace changed the bound instance's state"),
        ("tabled", "TABLE"),  # a global over the snapshot limit
    ],
)
def test_state_without_a_cross_process_digest_is_never_persisted(repo: Repo, launcher: str, why: str) -> None:
    """What is digested by identity (or changed by the trace itself) cannot key a row: every
    process traces, as FlyDSL does, and no row is written (under FLYDEPS_AOT=strict the
    error names the part)."""
    first = repo.run("bound", launcher, "--fresh-ir")
    assert first["traces"] == 1 and first["ir_key"] == first["fresh_ir"]
    second = repo.run("bound", launcher)
    assert second["traces"] == 1 and not second["loaded"] and second["ir_key"] == first["ir_key"]
    assert not repo.index.exists() or repo.rows() == []
    if launcher == "MEMO.launch":
        assert any(why in n for n in second["notes"])
    else:
        strict = repo.run("bound", launcher, FLYDEPS_AOT="strict")
        assert strict["error"] and why in strict["message"] and "identity" in strict["message"]


# --- the cross-process key ---------------------------------------------------------


def _described(args: tuple, self_key: object = None, env: object = ((None,), (), ())) -> tuple:
    return ("d" * 64, args, (("rocm", "gfx942", 64), 3), env, (), self_key)


def test_persistent_key_names_only_what_is_the_same_in_every_process() -> None:
    from flydsl.compiler.jit_argument import TorchTensorJitArg

    tensor = (TorchTensorJitArg, torch.float32, 4, False, (-1,), (1,))
    key = index.persistent_key("pkg.launch", _described((tensor, (int, 7))))
    assert key is not None and len(key) == 64
    assert key == index.persistent_key("pkg.launch", _described((tensor, (int, 7))))
    # the device id never enters it; everything else does
    moved = ("d" * 64, (tensor, (int, 7)), (("rocm", "gfx942", 64), 0), ((None,), (), ()), (), None)
    assert index.persistent_key("pkg.launch", moved) == key
    others = [
        index.persistent_key("pkg.other", _described((tensor, (int, 7)))),
        index.persistent_key("pkg.launch", _described((tensor, (int, 8)))),
        index.persistent_key("pkg.launch", _described((tensor, (bool, True)))),
        index.persistent_key("pkg.launch", _described(((TorchTensorJitArg, torch.float16, 2, False, (-1,), (1,)),))),
        index.persistent_key("pkg.launch", _described((tensor, (int, 7)), env=(("1",), (), ()))),
        index.persistent_key("pkg.launch", ("e" * 64, *_described((tensor, (int, 7)))[1:])),
        index.persistent_key(
            "pkg.launch", ("d" * 64, (tensor, (int, 7)), (("rocm", "gfx950", 64), 3), ((None,), (), ()), (), None)
        ),
        index.persistent_key("pkg.launch", _described((tensor, (float, b"\x00" * 8)))),
        index.persistent_key("pkg.launch", _described((tensor, (float, b"\x00" * 7 + b"\x80")))),
    ]
    assert None not in others and len({key, *others}) == len(others) + 1


_NAN_PAYLOAD = struct.unpack("<d", bytes.fromhex("010000000000f87f"))[0]  # a NaN with another payload
# Key parts as the in-process key holds them, from small domains so that near-collisions
# (1 / True / 1.0, 0.0 / -0.0, "1" / b"1" / 1, (x,) / x) come up often.
_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-2, 2),
    st.integers(),
    st.sampled_from([0.0, -0.0, 1.0, float("nan"), -float("nan"), _NAN_PAYLOAD, float("inf"), 2.0**53]),
    st.floats(allow_nan=True),
    st.text(alphabet="a1\x00é", max_size=3),
    st.binary(max_size=3),
    st.sampled_from([int, float, bool, str, bytes, type(None), torch.float32, torch.float16, torch.bfloat16]),
)
_PARTS = st.recursive(_LEAVES, lambda inner: st.lists(inner, max_size=3).map(tuple), max_leaves=6)


def _strictly_same(a: object, b: object) -> bool:
    """Equal as a key part may be equal across processes: the same type at every level,
    floats by their bits (``-0.0`` is not ``0.0``; a NaN is its payload), the rest by ``==``."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_strictly_same(x, y) for x, y in zip(a, b))
    if type(a) is float:
        return struct.pack("<d", a) == struct.pack("<d", b)
    return a == b


@settings(max_examples=600, deadline=None)
@given(_PARTS, _PARTS)
def test_canonical_key_parts_are_equal_exactly_when_the_parts_are(a: object, b: object) -> None:
    """The persistent key never merges two key parts a process tells apart (a stale row on
    every machine), and never splits equal ones (a miss in every process)."""
    ca, cb = index._canonical(a), index._canonical(b)
    assert (json.dumps(ca) == json.dumps(cb)) == _strictly_same(a, b), (a, b, ca, cb)
    assert json.dumps(index._canonical(copy.deepcopy(a))) == json.dumps(ca)


def test_canonical_key_parts_of_look_alike_values_all_differ() -> None:
    """Every pair of these look-alike parts is told apart (each pair, not a sample of them)."""
    tricky = [
        None, False, True, 0, 1, -1, 2**64, 0.0, -0.0, 1.0, float("nan"), -float("nan"), _NAN_PAYLOAD,
        float("inf"), "", "0", "1", "None", "\x00", b"", b"1", (), (1,), (True,), (1.0,), ((1,),), (1, 1),
        ("1",), (b"1",), (None,), int, bool, float, str, bytes, torch.float32, torch.float16, (int, 1), (bool, 1),
    ]  # fmt: skip
    texts = [json.dumps(index._canonical(v)) for v in tricky]
    assert len(set(texts)) == len(tricky), [v for v, t in zip(tricky, texts) if texts.count(t) > 1]


def test_parts_without_a_cross_process_name_are_never_persisted() -> None:
    class Local:
        pass

    def helper() -> None:
        pass

    assert index.persistent_key("p.l", _described(((Local,),))) is None  # a class made in a function
    assert index.persistent_key("p.l", _described((("value", type(helper), helper),))) is None
    assert index.persistent_key("p.l", _described(((object(),),))) is None
    assert index.persistent_key("p.l", _described(((Repo,),))) is None  # a user type among the arguments
    assert index.persistent_key("p.l", ((("d" * 64, "positions"),) + _described(())[1:])) is None
    assert index.persistent_key("p.l", _described((), self_key=(Repo, 3))) is not None  # signed owner class
    assert index.persistent_key("p.l", _described((), self_key=(Local, 3))) is None


def test_disk_key_is_flydsls_and_the_toolchain_key_is_remembered(tmp_path: Path, monkeypatch) -> None:
    from flydsl.compiler import jit_function as fjf

    from flydsl_runtime.launch.hooks import ensure_hooks

    ensure_hooks()
    original = fjf._flydsl_key.__flydeps_original__  # FlyDSL's own, wrapped by the hooks
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(index, "_toolchain_memo", {})
    ir_key = "ab" * 32
    with monkeypatch.context() as flydsl_alone:
        flydsl_alone.setattr(fjf, "_flydsl_key", original)
        expected = fjf._disk_cache_key(ir_key)  # hashed by FlyDSL itself
        flydsl_key = fjf._flydsl_key()
    assert index.disk_key(ir_key) == expected
    with sqlite3.connect(tmp_path / index.INDEX_NAME) as conn:
        ((files, key),) = conn.execute("SELECT files, flydsl_key FROM toolchains").fetchall()
    assert key == flydsl_key and files == index._toolchain_files()
    assert fjf._flydsl_key() == flydsl_key  # a traced miss's disk key: FlyDSL's, from the memo
    with monkeypatch.context() as m:  # read once per process and place, as FlyDSL reads its own
        m.setattr(index, "_toolchain_files", lambda place=None: pytest.fail("read again"))
        assert index.toolchain_key() == flydsl_key
        place = index._toolchain_place()
        assert place is not None
        m.setattr(index, "_toolchain_place", lambda: (place[0], place[1], str(tmp_path / "other-rocm")))
        with pytest.raises(pytest.fail.Exception, match="read again"):
            index.toolchain_key()  # another ROCm: another place, read
    monkeypatch.setattr(index, "_toolchain_memo", {})
    monkeypatch.setenv("FLYDEPS_INDEX", "0")  # no index: FlyDSL computes its own key
    with monkeypatch.context() as m:
        m.setattr(index, "toolchain_key", lambda: pytest.fail("the index is off"))
        assert fjf._flydsl_key() == flydsl_key
    monkeypatch.delenv("FLYDEPS_INDEX")
    monkeypatch.setattr(index, "_toolchain_memo", {})
    monkeypatch.setattr(fjf, "_flydsl_key", lambda: pytest.fail("the remembered key is used"))
    assert index.disk_key(ir_key) == expected  # read back from the index: FlyDSL hashes nothing
    monkeypatch.setattr(fjf, "EXTRA_SOURCE_DIRS", ["/somewhere"])  # FlyDSL would read more: no memo
    assert index._toolchain_files() is None


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"ROCM_PATH": "/a"},
        {"ROCM_ROOT": "/b"},
        {"ROCM_HOME": "/c"},
        {"ROCM_ROOT": "/b", "ROCM_HOME": "/c"},
        {"ROCM_PATH": "", "ROCM_HOME": "/c"},
        {"ROCM_PATH": "/a", "ROCM_ROOT": "/b", "ROCM_HOME": "/c"},
    ],
)
def test_the_rocm_root_is_the_one_flydsls_binding_gives(monkeypatch, env: dict[str, str]) -> None:
    """The oracle is FlyDSL's ROCDL binding (``rocm_path()``, what its toolchain key hashes
    the device bitcode under), asked in the same environment; and where FlyDSL's C API
    function cannot be found, the binding is what is asked."""
    from flydsl._mlir._mlir_libs import _mlirDialectsFlyROCDL

    for name in ("ROCM_PATH", "ROCM_ROOT", "ROCM_HOME"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert index._rocm_root_function() is not None  # FlyDSL 0.5 on Linux: its C API function
    assert index.rocm_root() == _mlirDialectsFlyROCDL.rocm_path()
    monkeypatch.setattr(index, "_rocm_root_function", lambda: None)
    assert index.rocm_root() == _mlirDialectsFlyROCDL.rocm_path()


def test_the_rocm_root_asked_in_c_is_what_ctypes_and_the_binding_give(monkeypatch) -> None:
    """flydsl_runtime.persist._capi and the ctypes fallback call the same function of FlyDSL's C API
    library: the same bytes, in every environment the binding is asked in; a library this
    process has not loaded, or a symbol it lacks, is no answer (None), never a load."""
    capi = pytest.importorskip("flydsl_runtime.persist._capi", reason="the C helper was not built here")
    from flydsl._mlir import _mlir_libs
    from flydsl._mlir._mlir_libs import _mlirDialectsFlyROCDL

    function = index._rocm_root_function()
    assert function is not None
    library, symbol = function.args  # type: ignore[attr-defined]  # the C path: functools.partial(_capi.string_ref, library, symbol)
    by_ctypes = index._ctypes_string_ref(library, symbol)
    assert by_ctypes is not None
    for value in ("/opt/a", "/opt/\u00e9t\u00e9", ""):
        monkeypatch.setenv("ROCM_PATH", value)
        assert function() == by_ctypes() == os.fsencode(_mlirDialectsFlyROCDL.rocm_path())
    with pytest.raises(ValueError, match="no_such_symbol_here"):  # C calls only known functions
        capi.string_ref(library, "no_such_symbol_here")
    assert index._ctypes_string_ref(library, "no_such_symbol_here") is None
    elsewhere = os.path.join(os.path.dirname(_mlir_libs.__file__), "libnot-loaded.so")
    assert capi.string_ref(elsewhere, symbol) is None
    with pytest.raises(TypeError):
        capi.string_ref(library)


def test_the_toolchain_files_are_the_bitcode_flydsl_hashes(tmp_path: Path, monkeypatch) -> None:
    """FlyDSL hashes the ``*.bc`` files of ``<rocm>/amdgcn/bitcode`` (not below it, nothing
    else): each one's metadata moves the digest, anything else there does not; a missing
    directory is a digest too (FlyDSL hashes nothing there)."""
    place = index._toolchain_place()
    assert place is not None
    bitcode = tmp_path / "rocm" / "amdgcn" / "bitcode"
    bitcode.mkdir(parents=True)
    (bitcode / "ocml.bc").write_bytes(b"BC1")
    at = (place[0], place[1], str(bitcode))
    first = index._toolchain_files(at)
    assert index._toolchain_files(at) == first
    (bitcode / "notes.txt").write_text("x")
    (bitcode / "sub").mkdir()
    (bitcode / "sub" / "deeper.bc").write_bytes(b"BC")
    assert index._toolchain_files(at) == first
    (bitcode / "ockl.bc").write_bytes(b"BC2")
    second = index._toolchain_files(at)
    assert second != first
    os.utime(bitcode / "ocml.bc", ns=(1, 1))  # rewritten in place: same inode, same size
    assert index._toolchain_files(at) not in (first, second)
    (bitcode / "dangling.bc").symlink_to(tmp_path / "nowhere.bc")
    assert index._toolchain_files(at) is not None
    missing = index._toolchain_files((place[0], place[1], str(tmp_path / "none")))
    assert missing is not None and missing != first


def test_a_flydsl_source_tree_counts_file_by_file(tmp_path: Path) -> None:
    """A ``flydsl`` that is not a wheel install (a source tree, an editable install) counts
    by every file under the package: a file rewritten in place, added, or moved to another
    directory (same name, inode and time) moves the digest."""
    package = tmp_path / "src" / "flydsl"
    (package / "compiler").mkdir(parents=True)
    (package / "expr").mkdir()
    (package / "__init__.py").write_text("")
    (package / "compiler" / "jit.py").write_text("x = 1\n")
    at = (str(package), "0.5.0", str(tmp_path / "no-rocm"))
    first = index._toolchain_files(at)
    assert first is not None and index._toolchain_files(at) == first
    os.rename(package / "compiler" / "jit.py", package / "expr" / "jit.py")
    moved = index._toolchain_files(at)
    assert moved not in (None, first)
    os.rename(package / "expr" / "jit.py", package / "compiler" / "jit.py")
    assert index._toolchain_files(at) == first
    os.utime(package / "compiler" / "jit.py", ns=(5, 5))
    assert index._toolchain_files(at) not in (first, moved)


def test_a_row_naming_other_ir_is_reported_and_replaced(repo: Repo) -> None:
    """Bad input: a row whose IR key is not what a fresh trace of its key gives (as if the
    key missed an input) and whose artifact is gone: the call traces, says so, and the row
    is replaced with the trace's IR."""
    first = repo.run()
    with sqlite3.connect(repo.index) as conn:
        conn.execute("UPDATE specializations SET ir_key = ?", ("00" * 32,))
    after = repo.run()
    assert after["traces"] == 1 and after["ir_key"] == first["ir_key"]
    assert any("a fresh trace gives" in n and "replaced" in n for n in after["notes"])
    assert [row[3] for row in repo.rows()] == [first["ir_key"]]
    assert repo.run()["traces"] == 0


# --- FLYDEPS_AOT=strict ------------------------------------------------------------


def test_strict_aot_serves_shipped_calls_and_names_what_differs(repo: Repo) -> None:
    """A shipped specialization is served without tracing; every other call is an error
    naming the nearest shipped one and exactly what differs, and nothing is traced."""
    assert repo.run(FLYDEPS_AOT="strict")["error"] == "AotMissError"  # nothing shipped yet
    shipped = repo.run()  # the build host: trace, write artifact and row
    served = repo.run(FLYDEPS_AOT="strict")
    assert served["traces"] == 0 and served["loaded"] and served["ir_key"] == shipped["ir_key"]

    dtype = repo.run("reduce", "partial_sum", "--dtype", "float16", FLYDEPS_AOT="strict")
    assert dtype["error"] == "AotMissError" and dtype["traces"] == 0
    assert "argument 'x': Tensor(torch.float32, shape (?,), stride (1,), align 4) -> " in dtype["message"]
    assert "Tensor(torch.float16, shape (?,), stride (1,), align 2)" in dtype["message"]
    assert "argument 'n'" not in dtype["message"]

    arch = repo.run(FLYDEPS_AOT="strict", ARCH="gfx950")
    assert "arch gfx942 -> gfx950" in arch["message"] and arch["traces"] == 0

    env = repo.run(FLYDEPS_AOT="strict", FLYDSL_COMPILE_OPT_LEVEL="1")
    assert "env FLYDSL_COMPILE_OPT_LEVEL: '' -> '1'" in env["message"]

    repo.edit("reduce_helpers", "return acc + x", "return acc - x")
    helper = repo.run(FLYDEPS_AOT="strict")
    assert helper["error"] == "AotMissError" and helper["traces"] == 0
    message = helper["message"]
    assert f"helper {repo.name}.reduce_helpers:combine (" in message and "reduce_helpers.py:" in message
    assert "argument" not in message and "arch" not in message and "env " not in message
    assert str(repo.index) in message and "nearest shipped specialization" in message
    assert f"flydeps aot list {repo.index.parent}" in message  # where to see what is shipped


def test_strict_aot_names_what_differs_from_the_key_not_what_the_trace_wrote(repo: Repo) -> None:
    """A trace that appends to a registry it reads keeps its key (its own write); the row
    spells out the state the key was taken from, so a miss names only what differs: here
    the arch, never the registry. A changed constant is named with its two values."""
    assert repo.run("registry", "logged_copy")["traces"] == 1
    served = repo.run("registry", "logged_copy", FLYDEPS_AOT="strict")
    assert served["traces"] == 0 and served["loaded"]
    arch = repo.run("registry", "logged_copy", FLYDEPS_AOT="strict", ARCH="gfx950")
    assert arch["error"] == "AotMissError" and arch["traces"] == 0
    assert "differs: arch gfx942 -> gfx950)" in arch["message"], arch["message"]

    assert repo.run()["traces"] == 1  # partial_sum: PER_THREAD = 4
    repo.edit("reduce", "PER_THREAD = 4", "PER_THREAD = 2")
    constant = repo.run(FLYDEPS_AOT="strict")
    assert constant["error"] == "AotMissError" and constant["traces"] == 0
    assert f"differs: global {repo.name}.reduce:PER_THREAD changed: 4 -> 2)" in constant["message"]


def test_a_row_is_keyed_by_the_registry_earlier_traces_of_its_process_left(repo: Repo) -> None:
    """A process that traced logged_copy (its trace appends to a registry) and then
    counted_copy (whose trace reads the same registry) keys counted_copy's row by the
    registry as it found it: exact, but a new process, whose registry is empty, does not
    find that row, and a strict miss names the registry with both values. (`flydeps aot
    build` builds each specialization in the state a new process has: test_aotbuild.py.)"""
    both = repo.run("registry", "counted_copy", "--first", "logged_copy")
    assert both["traces"] == 2 and not both["loaded"]
    alone = repo.run("registry", "counted_copy", FLYDEPS_AOT="strict")
    assert alone["error"] == "AotMissError" and alone["traces"] == 0
    assert f"differs: global {repo.name}.registry:TRACED_SHAPES changed: [0] -> [])" in alone["message"]
    assert repo.run("registry", "counted_copy", "--fresh-ir")["traces"] == 1  # and writes the empty-registry row
    served = repo.run("registry", "counted_copy", "--fresh-ir", FLYDEPS_AOT="strict")
    assert served["traces"] == 0 and served["loaded"] and served["ir_key"] == served["fresh_ir"]


def test_strict_aot_bad_value_and_unpersistable_calls(repo: Repo) -> None:
    repo.run()
    bad = repo.run(FLYDEPS_AOT="sometimes")
    assert bad["error"] == "SettingError" and "FLYDEPS_AOT='sometimes'" in bad["message"]
    assert "off|strict" in bad["message"]
    off = repo.run(FLYDEPS_AOT="strict", FLYDEPS_INDEX="0")
    assert off["error"] == "AotMissError" and "FLYDEPS_INDEX=0" in off["message"]


def test_a_probe_of_the_index_reads_no_row(repo: Repo, monkeypatch: pytest.MonkeyPatch) -> None:
    """An AOT build worker's strict probe answers "not served" without reading the
    launcher's rows for an explanation (each row spells out every node)."""
    from flydsl_runtime.persist import strict as aot

    repo.run()  # one row of partial_sum
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(repo.flydeps_cache))
    read: list[str] = []
    real = index.launcher_rows

    def rows(name: str) -> list:
        read.append(name)
        return real(name)

    monkeypatch.setattr(index, "launcher_rows", rows)
    name = f"{repo.name}.reduce.partial_sum"
    with aot.probing():
        probed = aot.miss_error(name, {"nodes": {}})
    assert "probed by an AOT build" in str(probed) and read == []
    explained = aot.miss_error(name, {"nodes": {}})
    assert "nearest shipped specialization" in str(explained) and read == [name]


def test_differences_name_every_part() -> None:
    from flydsl_runtime.persist import strict as aot

    shipped = {
        "nodes": {"p.m:f": ["1", "m.py:3", "function"], "p.m:G": ["2", "m.py:1", "global"]},
        "args": {"a": ["t", [["c", "flydsl.compiler.jit_argument:TorchTensorJitArg"], ["d", "torch.float32"]]]},
        "arch": "gfx942",
        "target": ["t", [["s", "rocm"], ["s", "gfx942"], ["i", "64"]]],
        "env": {"FLYDSL_COMPILE_OPT_LEVEL": ""},
        "hints": ["t", []],
        "self": ["n"],
        "versions": ["0.5.0", "0.1.0", "3.11"],
    }
    now = {
        **shipped,
        "nodes": {"p.m:f": ["9", "m.py:3", "function"], "p.m:h": ["3", "m.py:9", "function"]},
        "env": {"FLYDSL_COMPILE_OPT_LEVEL": "2"},
        "versions": ["0.5.1", "0.1.0", "3.11"],
    }
    reasons = aot.differences(shipped, now, (("FA_PP", "1"),), {"FA_PP": "0"})
    assert reasons[0] == "helper p.m:f (m.py:3) changed"
    assert "helper p.m:h (m.py:9) added" in reasons and "global p.m:G (m.py:1) removed" in reasons
    assert "env FLYDSL_COMPILE_OPT_LEVEL: '' -> '2'" in reasons
    assert "env FA_PP (read by the shipped trace): '1' -> '0'" in reasons
    assert "FlyDSL 0.5.0 -> 0.5.1" in reasons
    assert aot.differences(shipped, shipped) == ()
    # A global's or library's node says what its digest stands for: both values are named.
    lib, new_lib = ["5", "", "external", "torch==2.13.0"], ["6", "", "external", "torch==2.14.1"]
    valued = {**shipped, "nodes": {"p.m:G": ["2", "", "global", "4"], "torch": lib}}
    now_valued = {**valued, "nodes": {"p.m:G": ["3", "", "global", "8"], "torch": new_lib}}
    assert aot.differences(valued, now_valued) == (
        "global p.m:G changed: 4 -> 8",
        "library torch changed: torch==2.13.0 -> torch==2.14.1",
    )
    # Library leaves that changed at the same version: one line per library (its files were
    # reinstalled with other contents, or the row was keyed by another flydeps).
    leaves = {f"external:fx.{n}": [n, "", "external", "flydsl==0.5.0"] for n in "abcde"}
    leaves["external:builtins.len"] = ["x", "", "external", "python==3.11.7"]
    moved = {nid: [part[0] + "'", *part[1:]] for nid, part in leaves.items()}
    assert aot.differences({**shipped, "nodes": leaves}, {**shipped, "nodes": moved}) == (
        "library flydsl==0.5.0 (fx.a, fx.b, fx.c and 2 more) changed at the same version: its files were "
        "installed again with other contents, or the row was keyed by another flydeps",
        "library python==3.11.7 (builtins.len) changed at the same version: its files were installed again "
        "with other contents, or the row was keyed by another flydeps",
    )
    # A row written before nodes kept their values: the global is named, without values.
    newer = {**shipped, "nodes": {"p.m:f": ["1", "m.py:3", "function"], "p.m:G": ["3", "m.py:1", "global", "8"]}}
    assert aot.differences(shipped, newer) == ("global p.m:G (m.py:1) changed",)
    # A bound instance keyed by its state: the attributes that differ, by name.
    state = {"factor": ["d2", "2"], "name": ["dn", "'q'"]}
    with_state = {**shipped, "self": ["t", [["c", "p.m:Q"], ["s", "state a"]]], "self_state": state}
    changed = {**with_state, "self": ["t", [["c", "p.m:Q"], ["s", "state b"]]]}
    changed["self_state"] = {"factor": ["d3", "3"], "scale": ["ds", "1.5"]}
    assert aot.differences(with_state, changed) == (
        "bound instance attribute factor: 2 -> 3",
        "bound instance attribute name removed",
        "bound instance attribute scale added",
    )
    foreign = {**changed, "self_state": {"factor": "not a pair", 3: None}}  # a row written otherwise
    assert "bound instance attribute factor changed" in aot.differences(with_state, foreign)


def test_a_float_argument_is_named_by_its_value() -> None:
    """A Constexpr float is keyed by its IEEE-754 bytes; a strict miss and ``aot list`` show
    the number (``eps: (float, 1e-05) -> (float, 1e-06)``), never the bytes' hex. The
    signatures are argsig's own, through the row's canonical form."""
    import inspect

    import flydsl.expr as fx

    from flydsl_runtime.persist import strict as aot
    from flydsl_runtime.trace import argsig

    P = inspect.Parameter  # (this module's annotations are strings: spelled out)
    params = [P("x", P.POSITIONAL_OR_KEYWORD, annotation=fx.Tensor)]
    params += [P(n, P.POSITIONAL_OR_KEYWORD, annotation=fx.Constexpr[t]) for n, t in (("eps", float), ("shape", tuple))]
    signer = argsig.ArgSigner("m.launch", inspect.Signature(params))
    names = signer.names

    def parts(eps: float, shape: tuple, x: Any = None) -> dict:
        sigs = argsig.signatures(signer.key((torch.zeros(4) if x is None else x, eps, shape)))
        return {"args": {n: index._canonical(s) for n, s in zip(names, sigs)}}

    assert aot.differences(parts(1e-5, (2, 0.5)), parts(1e-6, (2, 0.5))) == (
        "argument 'eps': (float, 1e-05) -> (float, 1e-06)",
    )
    assert aot.differences(parts(0.0, (2, 0.5)), parts(-0.0, (2, 0.5))) == (
        "argument 'eps': (float, 0.0) -> (float, -0.0)",
    )
    (shape,) = aot.differences(parts(1.0, (2, 0.5)), parts(1.0, (2, 0.25)))
    assert "0.5" in shape and "0.25" in shape and "'y'" not in shape, shape
    nan = struct.unpack("<d", bytes.fromhex("010000000000f87f"))[0]  # a NaN with a payload
    (nans,) = aot.differences(parts(float("nan"), ()), parts(nan, ()))
    assert nans.count("nan (bits ") == 2 and "010000000000f87f" in nans, nans
    assert aot._text(["y", "00ff"]) == "b'\\x00\\xff'"  # other bytes: as bytes
    # A tensor: FlyDSL's signature (dtype, alignment, dynamic shape and strides) in words.
    column = torch.zeros(4, 3, dtype=torch.float16).t()  # strides (1, 3): unit stride first
    assert aot.differences(parts(1.0, (), torch.zeros(2, 3)), parts(1.0, (), column)) == (
        "argument 'x': Tensor(torch.float32, shape (?, ?), stride (?, 1), align 4) -> "
        "Tensor(torch.float16, shape (?, ?), stride (1, ?), align 2)",
    )


# One file edit each, in a new process after the row of the unedited code was written.
# Oracle: FlyDSL's IR key from a fresh trace of the edited code, made in the same process
# after the call (``--fresh-ir``). ``loads``: the edit changes nothing the
# trace reads, so the new process must start without tracing.
CROSS_PROCESS_EDITS = [
    ("reduce_helpers", "return acc + x", "return acc * x", False),
    ("reduce_helpers", "return t[i]", "return t[i] + t[i]", False),
    ("reduce", "PER_THREAD = 4", "PER_THREAD = 2", False),
    ("reduce_helpers", "return acc + x", "return x + acc", False),
    ("reduce_helpers", "def combine(", "def unused():\n    return 1\n\n\ndef combine(", True),
    ("reduce_helpers", "def load(t, i):\n", "def load(t, i):\n    # read one element\n", True),
    ("reduce", '"""Partial-sum', '"""Edited docstring. Partial-sum', True),
    ("reduce_helpers", "def load(", "UNUSED = 5\n\n\ndef load(", True),
]


@pytest.fixture(scope="module")
def baseline(tmp_path_factory: pytest.TempPathFactory) -> Repo:
    """A repository whose unedited code was run once (its row and artifact written)."""
    repo = Repo(tmp_path_factory.mktemp("baseline"))
    assert repo.run()["traces"] == 1
    return repo


def _copy(repo: Repo, tmp: Path) -> Repo:
    """The repository with its caches, elsewhere (same package name: the rows apply)."""
    base = repo.root.parent
    shutil.copytree(base, tmp / "copy", symlinks=True)
    copy = Repo.__new__(Repo)
    copy.root, copy.name = tmp / "copy" / repo.root.relative_to(base), repo.name
    copy.flydsl_cache = tmp / "copy" / repo.flydsl_cache.relative_to(base)
    copy.flydeps_cache = tmp / "copy" / repo.flydeps_cache.relative_to(base)
    copy.index = copy.flydeps_cache / index.INDEX_NAME
    return copy


@pytest.mark.parametrize(("module", "old", "new", "loads"), CROSS_PROCESS_EDITS)
def test_a_new_process_after_an_edit_runs_what_a_fresh_trace_gives(
    baseline: Repo, tmp_path: Path, rocm_root: Path, module: str, old: str, new: str, loads: bool
) -> None:
    repo = _copy(baseline, tmp_path)
    repo.edit(module, old, new)
    after = repo.run("reduce", "partial_sum", "--fresh-ir")
    assert after["ir_key"] == after["fresh_ir"]
    if loads:
        assert after["traces"] == 0 and after["loaded"]


def test_toolchain_counts_a_wheel_install_by_its_dist_info(tmp_path: Path) -> None:
    """FlyDSL installed from a wheel counts by its ``.dist-info`` (version, inode and time
    of the directory and its RECORD: a reinstall writes new ones); anything else - no
    ``.dist-info`` beside the package, an editable install, an unreadable
    ``direct_url.json`` - is not a wheel install and counts file by file."""
    package = tmp_path / "site" / "flydsl"
    package.mkdir(parents=True)
    assert index._wheel_install(package, "0.5.0") is None  # type: ignore[arg-type]  # no .dist-info: a source tree
    info = tmp_path / "site" / "flydsl-0.5.0.dist-info"
    info.mkdir()
    assert index._wheel_install(package, "0.5.0") is None  # type: ignore[arg-type]  # a .dist-info without RECORD
    (info / "RECORD").write_text("flydsl/__init__.py,sha256=x,1\n")
    assert index._wheel_install(package, "0.5.0") is not None  # type: ignore[arg-type]  # from an index: no direct_url.json
    (info / "direct_url.json").write_text('{"url": "file:///wheels/flydsl.whl", "archive_info": {}}')
    first = index._wheel_install(package, "0.5.0")  # type: ignore[arg-type]  # from a wheel file
    assert first is not None and str(info) in first
    assert index._wheel_install(package, "0.5.0") == first  # type: ignore[arg-type]
    assert index._wheel_install(package, "0.6.0") is None  # type: ignore[arg-type]  # another version's files
    (info / "RECORD").unlink()
    (info / "RECORD").write_text("flydsl/__init__.py,sha256=y,1\n")  # reinstalled
    assert index._wheel_install(package, "0.5.0") not in (None, first)  # type: ignore[arg-type]
    for direct_url in ('{"url": "file:///src", "dir_info": {"editable": true}}', "{not json", "[]"):
        (info / "direct_url.json").write_text(direct_url)
        assert index._wheel_install(package, "0.5.0") is None, direct_url  # type: ignore[arg-type]


MOUNTINFO = r"""22 1 0:21 / / rw,relatime - ext4 /dev/sda1 rw
40 22 0:35 / /home rw,relatime - nfs4 server:/export/home rw,vers=4.2
41 40 0:36 / /home/alice/scratch rw - tmpfs tmpfs rw
42 22 0:37 / /mnt/my\040share rw - cifs //host/share rw
43 22 0:38 / /lustre rw - lustre 10.0.0.1@tcp:/fs rw
44 22 0:39 / /mnt/over rw - ext4 /dev/sdb1 rw
45 22 0:40 / /mnt/over rw - nfs host:/x rw
"""


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        ("/home/alice/.cache/flydeps", "nfs4"),
        ("/home", "nfs4"),
        ("/homestead/x", "ext4"),  # a prefix of the name is not a mount point above it
        ("/home/alice/scratch/cache", "tmpfs"),  # the innermost mount point wins
        ("/mnt/my share/cache", "cifs"),  # mountinfo escapes a space as \040
        ("/lustre/proj/cache", "lustre"),
        ("/mnt/over/cache", "nfs"),  # a later mount on the same point hides the earlier one
        ("/var/cache", "ext4"),
    ],
)
def test_file_system_type_of_a_cache_directory(path: str, kind: str) -> None:
    """A directory on a network file system gets a rollback-journal index (SQLite's WAL mode
    works within one host): its type is read from the innermost mount point holding it."""
    assert sqlitefile.fs_type(path, MOUNTINFO) == kind
    assert (kind in sqlitefile.NETWORK_FS) == (kind in {"nfs4", "nfs", "cifs", "lustre"})


@pytest.mark.parametrize("network", [False, True])
def test_the_journal_mode_is_chosen_when_the_index_is_created(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, network: bool
) -> None:
    """WAL for a runtime's cache on a local disk, the rollback journal on a network file system;
    the mode stays with the file (a later open does not change it)."""
    monkeypatch.setattr(sqlitefile, "on_network_fs", lambda directory: network)
    path = tmp_path / "cache" / index.INDEX_NAME
    try:
        conn = index._connect(path)
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        assert (mode, version) == (("delete", 2) if network else ("wal", 1))
        index._forget(path)
        monkeypatch.setattr(sqlitefile, "on_network_fs", lambda directory: not network)
        assert index._connect(path).execute("PRAGMA journal_mode").fetchone()[0] == mode
    finally:
        index._forget(path)


def _live_bytes(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        size, pages, free = (
            conn.execute(f"PRAGMA {p}").fetchone()[0] for p in ("page_size", "page_count", "freelist_count")
        )
    return (pages - free) * size


def test_the_runtime_index_keeps_under_its_size_and_an_aot_index_is_never_trimmed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows past FLYDEPS_INDEX_MAX_BYTES go oldest first (a deleted row is a miss: the
    process traces and writes it again); the newest rows are still served. An index that
    `flydeps aot build` made (mark_built) keeps every row whatever its size. Bad input: a
    limit that is not a size is one error naming the variable."""
    from flydeps.observe.environ import EnvReads
    from flydeps.settings import SettingError

    limit = 128 * 1024
    monkeypatch.setenv("FLYDEPS_INDEX_MAX_BYTES", str(limit))
    detail = {"nodes": {f"m:helper_{i}": [f"{i:064x}", f"m.py:{i}", "function"] for i in range(120)}}  # ~10 KB
    for place, shipped in (("runtime", False), ("shipped", True)):
        monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / place))
        if shipped:
            index.mark_built()
        for i in range(60):
            assert index.record(f"{place}-{i:02d}", "m.launch", f"ir{i}", EnvReads(), detail)
        path = index.index_path()
        served = [i for i in range(60) if index.lookup(f"{place}-{i:02d}") is not None]
        index._forget(path)
        if shipped:
            assert served == list(range(60)) and _live_bytes(path) > 4 * limit
        else:
            assert _live_bytes(path) <= limit + 16 * 1024, _live_bytes(path)  # one row over, at most
            assert served == list(range(60 - len(served), 60)) and 4 <= len(served) < 30, served  # the newest
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / "runtime"))
    monkeypatch.setenv("FLYDEPS_INDEX_MAX_BYTES", "1")  # smaller than any row: the row just written stays
    assert index.record("newest", "m.launch", "ir", EnvReads(), detail)
    assert index.lookup("newest") is not None and index.lookup("runtime-59") is None
    index._forget(index.index_path())
    monkeypatch.setenv("FLYDEPS_INDEX_MAX_BYTES", "256MB")
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / "runtime"))
    with pytest.raises(SettingError, match="FLYDEPS_INDEX_MAX_BYTES"):
        index.record("bad", "m.launch", "ir", EnvReads(), detail)
