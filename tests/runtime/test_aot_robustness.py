"""``flydeps aot list`` on damaged rows, ``flydeps aot build`` interrupted or killed, and a
spec that exits (issue 36, items 4-6).

Every build here is a real one (FlyDSL traces and compiles in the command's worker
processes) of the smallest spec: one copy kernel. The oracles: the listing of the rows a
real build wrote, each then damaged in the index as a corrupted file or a hand edit would;
the command's exit status and stderr; and the processes themselves (psutil), which must be
gone after the command was killed, polled for within a bound (no assertion on speed).
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("flydsl")

import psutil  # noqa: E402 (with the flydsl extra, as distributed installs it)

from flydeps import cli  # noqa: E402
from flydsl_runtime.aot.build import build  # noqa: E402
from flydsl_runtime.persist import index
from flydsl_runtime.persist import strict as aot  # noqa: E402

KERNELS = """
import time

import flydsl.expr as fx

import flydsl_runtime.flyc as flyc

BLOCK = 64


@flyc.kernel
def copy_kernel(a: fx.Tensor, c: fx.Tensor):
    tid = fx.thread_idx.x + fx.block_idx.x * BLOCK
    c[tid] = a[tid]


@flyc.jit
def copy(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    copy_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))


@flyc.jit
def slow_copy(a: fx.Tensor, c: fx.Tensor, n: fx.Int32):
    time.sleep(600)  # runs while FlyDSL traces: in the build process forked from a worker
    copy_kernel(a, c).launch(grid=(n // BLOCK, 1, 1), block=(BLOCK, 1, 1))
"""

SPEC = """
import sys
import time

import torch

from {package} import kernels

N = 256


def quick():
    a, c = torch.zeros(N), torch.zeros(N)
    yield kernels.copy, (a, c, N)


def sleeping():
    yield from quick()
    yield (lambda: time.sleep(600)), ()  # in the worker itself (its probe makes the call)


def tracing():
    yield from quick()
    yield kernels.slow_copy, (torch.zeros(N), torch.zeros(N), N)  # in the worker's build fork


def exits():
    sys.exit(3)


def item_exits():
    yield from quick()
    yield (lambda: sys.exit(3)), ()
"""

WAIT = 120.0  # seconds: the bound of every poll (a loaded CI machine; nothing is timed)


def _write_project(root: Path) -> Path:
    package = root / f"aotrob_{uuid.uuid4().hex[:8]}"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "kernels.py").write_text(KERNELS)
    (root / "spec.py").write_text(SPEC.format(package=package.name))
    (root / "exits_at_import.py").write_text("import sys\n\nsys.exit(3)\n\n\ndef quick():\n    return []\n")
    return root


@pytest.fixture
def project(tmp_path: Path, rocm_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    _write_project(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    return tmp_path


def _command(project: Path, spec: str, *more: str) -> list[str]:
    return [sys.executable, "-m", "flydeps", "aot", "build", f"{project / 'spec.py'}:{spec}", *more]


# --- item 4: aot list on damaged rows ---------------------------------------------------

# (what is done to the row, what its line on stderr says)
DAMAGE = [
    ("created = 'yesterday'", "created is text 'yesterday', not a time"),
    ("created = x'00ff'", "created is a blob of 2 bytes, not a time"),
    ("created = 1e300", "created is 1e+300, not a time this platform can show"),
    ("detail = json_set(detail, '$.versions', 5)", "detail.versions is an integer (5), not a list"),
    ("detail = json_set(detail, '$.versions', json('[\"0.5.0\", 7]'))", "detail.versions[1] is an integer (7)"),
    ("detail = json_set(detail, '$.args', json('[1, 2]'))", "detail.args is a list of 2, not an object"),
    ("detail = json_set(detail, '$.args.a', json('[\"t\", 5]'))", "detail.args['a'] is not an argument signature"),
    ("detail = json_set(detail, '$.args.n', json('[\"y\", \"zz\"]'))", "['y', ...] holds text 'zz', not hex"),
    ("detail = json_set(detail, '$.args.n', 'Int32')", "text 'Int32' where a tagged list belongs"),
    ("detail = json_set(detail, '$.arch', json('null'))", "detail.arch is NULL, not text"),
    ("detail = json_remove(detail, '$.env')", "detail has no env"),
    ("detail = '[1, 2, 3]'", "detail is a list of 3, not an object"),
    ("detail = '{not json'", "detail is not JSON"),
    ("detail = CAST(detail AS BLOB)", "detail is a blob of "),
    ("env_reads = '{\"A\": 1}'", "env_reads is an object, not a list of [variable, value] pairs"),
    ("env_reads = '[[\"A\", 1]]'", "env_reads[0] gives A an integer (1), not text or null"),
    ("ir_key = x'00'", "ir_key is a blob of 1 bytes, not UTF-8 text"),
    ("launcher = x'6869'", "launcher is a blob of 2 bytes, not UTF-8 text"),  # named "?"
    ("key = CAST(x'ff' AS TEXT)", "key is text that is not UTF-8, not UTF-8 text"),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory a real build made, with two rows (one launcher, two arches): built once
    for the module, each test damages a copy (without a ROCm root, the build says so)."""
    root = _write_project(tmp_path_factory.mktemp("built"))
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(root))
        patch.setenv("PYTHONPATH", os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]))
        summary = build(f"{root / 'spec.py'}:quick", ["gfx942", "gfx950"], root / "out", jobs=1, progress=False)
    assert summary.count("built") == 2, summary.lines()
    return root / "out"


def _damaged(built: Path, where: Path, change: str) -> tuple[int, str]:
    """A copy of ``built`` whose gfx950 row had ``change`` made (an UPDATE's SET clause):
    that row's rowid and launcher."""
    shutil.copytree(built, where)
    with sqlite3.connect(where / index.INDEX_NAME) as conn:
        rowid, launcher = conn.execute(
            "SELECT rowid, launcher FROM specializations WHERE json_extract(detail, '$.arch') = 'gfx950'"
        ).fetchone()
        conn.execute(f"UPDATE specializations SET {change} WHERE rowid = ?", (rowid,))
    conn.close()
    return rowid, launcher


@pytest.mark.parametrize("change, said", DAMAGE, ids=[d[0] for d in DAMAGE])
def test_aot_list_names_a_damaged_row_and_lists_the_others(
    built: Path, tmp_path: Path, change: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before, any of these rows made the whole listing an internal error (exit 1, "report
    it"), or (args not an object) listed the row with no arguments as if it had none."""
    where = tmp_path / "damaged"
    rowid, launcher = _damaged(built, where, change)
    before = (where / index.INDEX_NAME).read_bytes()
    status = cli.main(["aot", "list", str(where)])
    out, err = capsys.readouterr()
    assert status == 1, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "internal error" not in err, err
    shown = "?" if change.startswith("launcher") else launcher
    assert lines[0].startswith(f"{where / index.INDEX_NAME}: row {rowid} (launcher {shown}): "), err
    assert said in lines[0], err
    head, *entries = out.strip().splitlines()
    assert head == f"{where}: 1 specialization of 1 launcher; 1 bad row not listed (named on stderr)"
    assert len(entries) == 1 and "[gfx942]" in entries[0] and "artifact ok" in entries[0], out
    assert (where / index.INDEX_NAME).read_bytes() == before  # read only


def test_the_listing_api_and_json_keep_the_good_rows(built: Path, tmp_path: Path, capsys) -> None:
    """The library's listing gives the bad row apart; ``--format json`` lists the good rows
    only (the bad one on stderr), and an undamaged directory has no bad row (exit 0)."""
    assert aot.listing(built).bad == () and len(aot.listing(built).rows) == 2
    assert cli.main(["aot", "list", str(built)]) == 0
    capsys.readouterr()
    where = tmp_path / "damaged"
    rowid, _launcher = _damaged(built, where, "created = 'yesterday'")
    found = aot.listing(where, check_artifacts=False)
    assert [r.row for r in found.bad] == [rowid] and [r.arch for r in found.rows] == ["gfx942"]
    assert cli.main(["aot", "list", str(where), "--format", "json"]) == 1
    out, err = capsys.readouterr()
    assert [entry["arch"] for entry in __import__("json").loads(out)] == ["gfx942"]
    assert len(err.strip().splitlines()) == 1 and f"row {rowid} " in err


# --- item 5: aot build interrupted or killed -------------------------------------------


# Every process seen under a command a test started: what the test leaves running (a
# command killed before its fix, whose workers are then no longer its descendants) is
# killed by the ``started`` fixture.
_SEEN: dict[int, psutil.Process] = {}


def _descendants(pid: int) -> list[psutil.Process]:
    try:
        found = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    _SEEN.update((process.pid, process) for process in found)
    return found


def _gone(process: psutil.Process) -> bool:
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_for(what: str, condition, started: subprocess.Popen) -> None:
    """Poll ``condition()`` until it holds (bounded: a command that ended, or WAIT seconds,
    fail naming ``what``)."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert started.poll() is None, f"the command ended ({started.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} within {WAIT:.0f} s"
        time.sleep(0.1)


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen]]:
    """Commands a test starts: whatever of them (and their descendants) is left is killed."""
    commands: list[subprocess.Popen] = []
    yield commands
    for command in commands:
        _descendants(command.pid)
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
            command.wait()
    for process in _SEEN.values():
        if not _gone(process):
            process.kill()
    _SEEN.clear()


def _start(project: Path, spec: str, started: list[subprocess.Popen], stderr: Path) -> subprocess.Popen:
    out = project / "out"
    command = _command(project, spec, "--arch", "gfx942", "--out", str(out), "--jobs", "2", "--no-progress")
    with stderr.open("wb") as err:  # a file, not a pipe: a worker left behind would hold a pipe open
        build_process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, start_new_session=True)
    started.append(build_process)
    return build_process


def _workers(build_process: subprocess.Popen) -> list[psutil.Process]:
    """The command's pool workers (its children that multiprocessing spawned)."""
    found = []
    for process in _descendants(build_process.pid):
        try:
            if "spawn_main" in " ".join(process.cmdline()) and process.ppid() == build_process.pid:
                found.append(process)
        except psutil.Error:
            continue
    return found


def test_ctrl_c_while_the_workers_import_is_one_line_and_exit_130(project: Path, started: list) -> None:
    """A terminal's Ctrl-C (SIGINT to the process group) while the pool's workers still
    import torch and FlyDSL. Before, each worker printed its KeyboardInterrupt traceback."""
    stderr = project / "stderr.txt"
    build_process = _start(project, "sleeping", started, stderr)
    _wait_for("pool worker", lambda: len(_workers(build_process)) == 2, build_process)
    workers = _workers(build_process)
    os.killpg(build_process.pid, signal.SIGINT)
    assert build_process.wait(timeout=WAIT) == 130
    said = stderr.read_text()
    assert len(said.strip().splitlines()) == 1 and "Traceback" not in said, said[-3000:]
    assert said.startswith("flydeps: interrupted; ") and str(project / "out") in said, said
    assert all(_gone(w) for w in workers)


def test_ctrl_c_to_the_command_alone_ends_its_workers(project: Path, started: list) -> None:
    """SIGINT to the command only (``kill -INT``, a supervisor), while a worker runs an item
    that would take ten minutes: the command ends its workers, says what was kept (the
    quick item's row) and exits 130. Before, it waited for the running item."""
    stderr = project / "stderr.txt"
    build_process = _start(project, "sleeping", started, stderr)
    index_file = project / "out" / index.INDEX_NAME
    _wait_for("row of the quick item", lambda: index_file.exists() and _row_count(index_file) == 1, build_process)
    workers = _workers(build_process)
    os.kill(build_process.pid, signal.SIGINT)
    assert build_process.wait(timeout=WAIT) == 130
    said = stderr.read_text()
    assert said.strip() == (
        f"flydeps: interrupted; the 1 index rows of the specializations built so far are in {project / 'out'}: "
        "run the same command again to build the rest"
    ), said[-3000:]
    _wait_for_gone(workers)


def _row_count(path: Path) -> int:
    try:
        with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as conn:
            count = conn.execute("SELECT count(*) FROM specializations").fetchone()[0]
        conn.close()
        return int(count)
    except sqlite3.Error:  # not yet set up
        return 0


def _wait_for_gone(processes: list[psutil.Process]) -> None:
    deadline = time.monotonic() + WAIT
    while not all(_gone(p) for p in processes):
        left = [f"{p.pid} {' '.join(p.cmdline())[:80]}" for p in processes if not _gone(p)]
        assert time.monotonic() < deadline, f"still running {WAIT:.0f} s after the command died: {left}"
        time.sleep(0.2)


def test_a_killed_command_takes_its_workers_their_build_forks_and_the_tracker(project: Path, started: list) -> None:
    """SIGKILL of the command while a worker's build fork traces (a kernel whose trace takes
    ten minutes) and the other worker waits: every process it started goes, the two
    workers, the fork and multiprocessing's resource tracker. Before, the workers, the
    fork and the tracker kept running (still there after 120 s)."""
    build_process = _start(project, "tracing", started, project / "stderr.txt")
    index_file = project / "out" / index.INDEX_NAME

    def tracing() -> bool:
        workers = {w.pid for w in _workers(build_process)}
        forks = [p for p in _descendants(build_process.pid) if _parent(p) in workers]
        return index_file.exists() and _row_count(index_file) == 1 and bool(forks)

    _wait_for("build fork tracing the slow kernel", tracing, build_process)
    everything = _descendants(build_process.pid)
    names = [" ".join(p.cmdline()) for p in everything]
    assert sum("resource_tracker" in name for name in names) == 1, names
    assert sum("--multiprocessing-fork" in name for name in names) == 3, names  # two workers, one fork
    build_process.kill()
    build_process.wait()
    _wait_for_gone(everything)


def _parent(process: psutil.Process) -> int:
    try:
        return int(process.ppid())
    except psutil.Error:
        return 0


# --- item 6: a spec that exits ---------------------------------------------------------


@pytest.mark.parametrize("spec", ["exits_at_import.py:quick", "spec.py:exits"])
def test_a_spec_that_exits_is_a_spec_error(project: Path, spec: str) -> None:
    """``sys.exit(3)`` while the spec is imported, and in the spec function. Before, the
    command exited 3 with nothing said."""
    target = project / spec
    command = [sys.executable, "-m", "flydeps", "aot", "build", str(target), "--arch", "gfx942"]
    done = subprocess.run([*command, "--out", str(project / "out"), "--no-progress"], capture_output=True, text=True)
    assert done.returncode == 2, done.stderr[-2000:]
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert str(target) in lines[0] and "exited with status 3 (sys.exit)" in lines[0], lines[0]
    where = "while importing" if spec.startswith("exits_at_import") else "while giving its specializations"
    assert where in lines[0], lines[0]


def test_an_item_that_exits_fails_its_specialization(project: Path) -> None:
    """Bad input: an item whose call exits. It fails with what it did; the build goes on.
    Before, the worker's SystemExit came back to the command, which exited 3."""
    summary = build(f"{project / 'spec.py'}:item_exits", ["gfx942"], project / "out", jobs=1, progress=False)
    assert [o.status for o in summary.outcomes] == ["built", "failed"], summary.lines()
    assert summary.outcomes[1].error == "the call exited with status 3 (sys.exit)"


# Values a damaged or hand-written row may hold where a build writes JSON: near-signatures
# (a known tag with any value), other lists, objects, scalars.
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(st.sampled_from(list("nbisfycdt")), inner).map(list)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=12,
)
_STORED = st.none() | st.integers() | st.floats() | st.binary(max_size=4) | st.text(max_size=8)


def _argument_values() -> st.SearchStrategy[object]:
    """What a key signature describes: scalars, dtypes, classes (FlyDSL's tensor argument
    among them) and tuples of those, as FlyDSL's signatures nest them."""
    import torch
    from flydsl.compiler.jit_argument import TorchTensorJitArg

    leaves = st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.floats() | st.binary(max_size=4)
    leaves |= st.sampled_from([torch.float16, torch.float32, int, float, TorchTensorJitArg])
    tensor = st.tuples(
        st.just(TorchTensorJitArg),
        st.sampled_from([torch.float16, torch.float32]),
        st.integers(1, 16),
        st.booleans(),
        st.lists(st.integers(-1, 64), max_size=3).map(tuple),
        st.lists(st.integers(-1, 64), max_size=3).map(tuple),
    )
    return st.recursive(leaves | tensor, lambda inner: st.lists(inner, max_size=6).map(tuple), max_leaves=10)


_PARTS = ("env_reads", "created", "launcher", "detail", "arch", "args", "env", "versions")


@settings(max_examples=300, deadline=None)
@given(data=st.data(), damaged=st.sets(st.sampled_from(_PARTS), max_size=2))
def test_no_stored_row_breaks_the_listing(data: st.DataObject, damaged: set[str]) -> None:
    """Property: a row as a build writes it (its arguments' signatures made by the index's
    own encoder) is listed, and prints; with any of its parts replaced by another value,
    the check still gives an entry that prints or a bad row naming it, never an exception
    (each one, before, could make the listing an internal error)."""
    import json

    def part(name: str, good: object, bad: st.SearchStrategy[object]) -> object:
        return data.draw(bad, label=name) if name in damaged else good

    args = data.draw(st.dictionaries(st.text(max_size=3), _argument_values(), max_size=3), label="arguments")
    signatures = {k: index._canonical(v) for k, v in args.items()}
    detail = {
        "arch": part("arch", "gfx942", _JSON),
        "args": part("args", signatures, _JSON),
        "env": part("env", {"FLYDSL_X": "1", "FLYDSL_Y": ""}, _JSON),
        "versions": part("versions", ["0.5.0", "0.1.0", "3.11"], _JSON),
    }
    launcher = part("launcher", "pkg.mod.launch", _STORED)
    reads = part("env_reads", json.dumps([["HOME", "/root"], ["UNSET", None]]), _STORED)
    created = part("created", 1.7e9, _STORED)
    stored = part("detail", json.dumps(detail), _STORED)
    checked = aot._checked((7, "key", reads, launcher, "ir", created, stored))
    if isinstance(checked, aot.BadRow):
        assert damaged and checked.line().startswith("row 7 (launcher ") and checked.problem, checked
    else:
        listed = detail["args"]  # the signatures, or what replaced them and passed the check
        assert isinstance(listed, dict) and len(checked.args) == len(listed), checked
        assert checked.line().startswith(f"{launcher}(")
