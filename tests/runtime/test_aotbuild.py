"""``flydeps aot build``: specializations built for several arches into one directory, reused
without tracing, rebuilt only where an edit reaches, on a local pool or a Dask cluster.

Every build runs real FlyDSL compiles in worker processes; the oracle that a shipped
directory is complete is a fresh process under ``FLYDEPS_AOT=strict`` (any call it cannot
serve without tracing raises), and the oracle for Dask is the local build of the same spec.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("flydsl")

from flydsl_runtime.aot.build import Pruned, SpecError, build, load_spec  # noqa: E402
from flydsl_runtime.persist import index  # noqa: E402
from flydsl_runtime.persist.strict import shipped  # noqa: E402

KERNELS = Path(__file__).parent / "kernels"

SPEC = """
import torch

from {package} import apply, bound, reduce, registry, vadd

N = 1024


def specializations():
    a, b, c = (torch.zeros(N) for _ in range(3))
    yield vadd.vadd, (a, b, c, N)
    for factor in (2, 3):
        yield vadd.axpy, (a, c, N, factor)
    yield reduce.partial_sum, (a, c, 256)


def broken():
    a = torch.zeros(N)
    yield vadd.vadd, (a, a, a, N)
    yield vadd.vadd, (a, a, object(), N)


def registry_pair():
    a, c = torch.zeros(N), torch.zeros(N)
    yield registry.logged_copy, (a, c, N)  # its trace appends to a registry...
    yield registry.counted_copy, (a, c, N)  # ...that this one's trace reads


def unserved():
    a, c = torch.zeros(N), torch.zeros(N)
    yield vadd.vadd, (a, a, c, N)
    yield (lambda n: None), (N,)  # runs no launcher
    yield (lambda: vadd.vadd), ()  # a factory and its arguments: returns the launcher
    yield apply.apply, (a, c, N, apply.double)  # a function as a compile-time argument
    yield apply.own, (a, c, N)  # FlyDSL's own launcher
    yield vadd.vadd, (a, a, c, N)  # again: served by the launcher's memory in a rebuild


def sizes():
    for n in (256, 1024, 4096):  # one specialization each: FlyDSL keys tensors layout-dynamic, n is Int32
        a, b, c = (torch.zeros(n) for _ in range(3))
        yield vadd.vadd, (a, b, c, n)
        yield bound.QUANT.launch, (a, b, c, n)  # a launcher bound to an instance
    yield vadd.axpy, (a, c, 4096, 2)
    yield bound.Quant(factor=3).launch, (a, b, c, 4096)  # another instance's state: another specialization


def interrupted():
    yield from resumed()
    yield (lambda: __import__("time").sleep(600)), ()  # still running when the build is interrupted


def resumed():
    a, b, c = (torch.zeros(N) for _ in range(3))
    yield vadd.vadd, (a, b, c, N)
    yield vadd.axpy, (a, c, N, 2)


def dies():
    a, b, c = (torch.zeros(N) for _ in range(3))
    yield vadd.vadd, (a, b, c, N)
    yield (lambda: __import__("os")._exit(3)), ()  # kills the worker itself (its probe makes the call)


def arch_queries():
    from {package} import trace_inputs

    a, c = torch.zeros(N), torch.zeros(N)
    yield trace_inputs.wait_launch, (a, c, N)  # s_waitcnt: encoded for FlyDSL's get_rocm_arch()


def not_pairs():
    yield vadd.vadd


def nothing():
    return []
"""


@pytest.fixture
def project(tmp_path: Path, rocm_root: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    package = f"fdkaot_{uuid.uuid4().hex[:8]}"
    shutil.copytree(KERNELS / "fdk", tmp_path / package)
    (tmp_path / "spec.py").write_text(SPEC.format(package=package))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the workers import the package too
    return tmp_path


def _rows(out: Path) -> set[tuple[str, str]]:
    with sqlite3.connect(out / index.INDEX_NAME) as conn:
        return set(conn.execute("SELECT key, ir_key FROM specializations").fetchall())


def test_build_reuse_and_incremental_rebuild(project: Path) -> None:
    out = project / "out"
    spec = f"{project / 'spec.py'}:specializations"
    first = build(spec, ["gfx942", "gfx950"], out, jobs=2, progress=False)
    assert (first.count("built"), first.count("reused"), first.count("failed")) == (8, 0, 0)
    assert len(_rows(out)) == 8 and list((out / "flydsl").rglob("*.pkl"))
    again = build(spec, ["gfx942", "gfx950"], out, jobs=2, progress=False)
    assert (again.count("built"), again.count("reused")) == (0, 8)  # no trace anywhere
    helpers = next(project.glob("fdkaot_*")) / "reduce_helpers.py"
    helpers.write_text(helpers.read_text().replace("return acc + x", "return acc - x"))
    edited = build(spec, ["gfx942", "gfx950"], out, jobs=2, progress=False)
    rebuilt = sorted(o.label.split("(")[0].rsplit(".", 1)[-1] for o in edited.outcomes if o.status == "built")
    assert rebuilt == ["partial_sum", "partial_sum"] and edited.count("reused") == 6
    assert len(_rows(out)) == 10


# `flydeps aot build` in a process where starting a worker pool or probing the compiler
# raises: a rebuild with nothing to build must need neither.
_NO_WORKERS = """
import sys

from flydsl_runtime.aot import archprobe, build


def refused(what):
    def call(*args, **kwargs):
        raise AssertionError(what)

    return call


build._pool = refused("started a worker pool")
build.local_workers = refused("sized a worker pool")
archprobe.unknown_arches = refused("probed the compiler")
from flydeps.cli import main

sys.exit(main(sys.argv[1:]))
"""


def test_a_rebuild_with_nothing_to_build_starts_no_worker_and_an_edit_still_rebuilds(project: Path) -> None:
    """The command decides in its own process what OUT already serves: with every row there,
    no pool, no worker, no compiler probe; after a helper edit the specializations reaching it
    are not taken as served (the pool is needed, and builds exactly them)."""
    env = dict(os.environ)  # PYTHONPATH: the project (the fixture)
    out = project / "out"
    args = ["aot", "build", f"{project / 'spec.py'}:specializations", "--arch", "gfx942,gfx950", "--out", str(out)]
    args += ["--no-progress"]

    def run(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*command, *args], capture_output=True, text=True, timeout=600, env=env)

    first = run(sys.executable, "-m", "flydeps")
    assert first.returncode == 0, first.stderr[-2000:]
    assert first.stdout.strip() == f"aot build into {out}: 8 built, 0 reused, 0 failed (of 8)"
    rows = _rows(out)
    again = run(sys.executable, "-c", _NO_WORKERS)
    assert again.returncode == 0, again.stderr[-2000:]
    assert again.stdout.strip() == f"aot build into {out}: 0 built, 8 reused, 0 failed (of 8)"
    assert _rows(out) == rows
    helpers = next(project.glob("fdkaot_*")) / "reduce_helpers.py"
    helpers.write_text(helpers.read_text().replace("return acc + x", "return acc - x"))
    needs_workers = run(sys.executable, "-c", _NO_WORKERS)
    refused = ("started a worker pool", "sized a worker pool", "probed the compiler")
    assert needs_workers.returncode != 0 and any(w in needs_workers.stderr for w in refused), needs_workers.stdout
    edited = run(sys.executable, "-m", "flydeps")
    assert edited.returncode == 0, edited.stderr[-2000:]
    assert edited.stdout.strip() == f"aot build into {out}: 2 built, 6 reused, 0 failed (of 8)"
    assert len(_rows(out)) == 10
    done = run(sys.executable, "-c", _NO_WORKERS)  # and then nothing is left to build again
    assert done.stdout.strip() == f"aot build into {out}: 0 built, 8 reused, 0 failed (of 8)", done.stderr[-2000:]
    next((out / "flydsl").rglob("*.pkl")).unlink()  # a row whose artifact is gone does not serve
    lost = run(sys.executable, "-c", _NO_WORKERS)
    assert lost.returncode != 0 and any(w in lost.stderr for w in refused), lost.stdout
    rebuilt = run(sys.executable, "-m", "flydeps")
    assert rebuilt.stdout.strip() == f"aot build into {out}: 1 built, 7 reused, 0 failed (of 8)", rebuilt.stderr


def test_items_giving_one_specialization_build_it_once(project: Path) -> None:
    """A spec that calls one launcher with tensors of several sizes (as AOT scripts iterate
    over shapes) gives one specialization: FlyDSL traces it once, and the other items are
    served by that build's row. Before, every item traced and compiled it again ("3 built"
    for one row). The oracle: the traces FlyDSL ran in the workers (``built``), the index
    rows and artifacts, and a strict process served every size without tracing."""
    out = project / "out"
    spec = f"{project / 'spec.py'}:sizes"
    first = build(spec, ["gfx942", "gfx950"], out, jobs=2, progress=False)
    assert (first.count("built"), first.count("reused"), first.count("failed")) == (8, 8, 0), first.lines()
    assert first.lines()[0].endswith("(of 16; 8 of them the same specialization as another item)")
    for parity in (0, 1):  # the three vadd items, the three bound QUANT.launch items
        for arch in ("gfx942", "gfx950"):
            mine = [o for o in first.outcomes if o.position < 6 and o.position % 2 == parity and o.arch == arch]
            (built,) = [o for o in mine if o.status == "built"]
            assert sorted(o.same_as for o in mine if o.status == "reused") == [built.label, built.label]
    assert len(_rows(out)) == 8 and len(list((out / "flydsl").rglob("*.pkl"))) == 8
    package = next(project.glob("fdkaot_*")).name
    # A bound launcher's item is named by the launcher, not by the partial that binds it.
    assert first.outcomes[2].position == 1  # sorted by (position, arch)
    assert first.outcomes[2].label == f"{package}.bound.Quant.launch(Tensor, Tensor, Tensor, 256)"
    calls = f"from {package} import bound\n" + "".join(
        f"x = [torch.zeros({n}) for _ in range(3)]; vadd.vadd(*x, {n}); bound.QUANT.launch(*x, {n})\n"
        for n in (256, 1024, 4096)
    )
    assert _strict_traces(project, out, calls) == "0"
    again = build(spec, ["gfx942", "gfx950"], out, jobs=2, progress=False)
    assert (again.count("built"), again.count("reused"), again.count("failed")) == (0, 16, 0)
    assert not any(o.same_as for o in again.outcomes)  # each served by the index itself


def test_an_interrupted_build_keeps_what_it_built(project: Path) -> None:
    """Ctrl-C while one item still runs: the specializations built before it keep their
    rows (each is written as its build ends), the index stays readable, and a rerun reuses
    them without tracing. Before, rows were written once every item had ended: an
    interrupted build (or a killed one) left none, and the rerun traced everything again."""
    import signal

    out = project / "out"
    command = [sys.executable, "-m", "flydeps", "aot", "build", f"{project / 'spec.py'}:interrupted"]
    command += ["--arch", "gfx942", "--out", str(out), "--jobs", "2", "--no-progress"]
    build_process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and build_process.poll() is None:
            if (out / index.INDEX_NAME).exists() and len(_rows(out)) == 2:
                break
            time.sleep(0.5)
        assert build_process.poll() is None, build_process.communicate()
        assert len(_rows(out)) == 2, "the two quick builds never wrote their rows"
        os.killpg(build_process.pid, signal.SIGINT)  # a terminal's Ctrl-C: the whole process group
        _stdout, stderr = build_process.communicate(timeout=120)
    finally:
        if build_process.poll() is None:
            os.killpg(build_process.pid, signal.SIGKILL)
            build_process.wait()
    said = stderr.decode()
    assert build_process.returncode == 130, said[-2000:]
    assert f"interrupted; the 2 index rows of the specializations built so far are in {out}" in said, said[-2000:]
    assert "Traceback" not in said, said[-2000:]
    assert len(_rows(out)) == 2
    rerun = build(f"{project / 'spec.py'}:resumed", ["gfx942"], out, jobs=2, progress=False)
    assert (rerun.count("built"), rerun.count("reused"), rerun.count("failed")) == (0, 2, 0), rerun.lines()


def test_a_worker_that_dies_fails_its_specializations_not_the_build(project: Path) -> None:
    """Bad input: a spec item that kills its worker process. The pool is then closed: the
    other specialization fails with "worker died" too, whether its probe had come back (its
    build is then refused by the closed pool, or the pool ends it) or not, and the build
    ends with its summary, not an internal error."""
    summary = build(f"{project / 'spec.py'}:dies", ["gfx942"], project / "out", jobs=1, progress=False)
    assert [o.status for o in summary.outcomes] == ["failed", "failed"], summary.lines()
    assert all("worker died" in o.error for o in summary.outcomes), summary.lines()


def test_a_shipped_directory_serves_a_strict_process(project: Path) -> None:
    out = project / "out"
    build(f"{project / 'spec.py'}:specializations", ["gfx942"], out, jobs=2, progress=False)
    calls = (
        "vadd.axpy(a, c, 1024, 3); reduce.partial_sum(a, c, 256)\n"
        "try:\n"
        "    vadd.axpy(a, c, 1024, 4)\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__)"
    )
    # shipped calls without a trace; others refused (before any trace)
    assert _strict_traces(project, out, calls).split() == ["AotMissError", "0"]
    # A runtime process that traces a new specialization there writes its row, and trims
    # nothing of the shipped ones, however small its FLYDEPS_INDEX_MAX_BYTES.
    shipped_rows = _rows(out)
    assert _strict_traces(project, out, "vadd.axpy(a, c, 1024, 4)", strict=False, FLYDEPS_INDEX_MAX_BYTES="1") == "1"
    assert len(_rows(out)) == len(shipped_rows) + 1 and shipped_rows < _rows(out)


def test_a_kernel_asking_flydsl_for_the_arch_is_served_on_that_arch_whatever_the_path(project: Path) -> None:
    """FlyDSL's s_waitcnt and buffer ops encode for its get_rocm_arch() (FLYDSL_GPU_ARCH,
    HSA_OVERRIDE_GFX_VERSION or the detected GPU), not ARCH. Each arch is built with
    get_rocm_arch() answering that arch, as a runtime on that GPU detects it, and the row
    depends on that answer, not on the build host's PATH (which its detection ran
    rocm_agent_enumerator through): a strict process on each arch, with another PATH, is
    served. The oracle: FLYDEPS_VERIFY=1 traces and compares with the shipped row's IR."""
    out = project / "out"
    built = build(f"{project / 'spec.py'}:arch_queries", ["gfx942", "gfx950"], out, jobs=2, progress=False)
    assert built.count("built") == 2, built.lines()
    call = "trace_inputs.wait_launch(a, c, 1024)"
    other_path = os.pathsep.join(["/usr/bin", "/bin"])
    for arch in ("gfx942", "gfx950"):  # FLYDSL_GPU_ARCH: what a machine with that GPU answers
        assert _strict_traces(project, out, call, ARCH=arch, FLYDSL_GPU_ARCH=arch, PATH=other_path) == "0", arch
        verified = _strict_traces(
            project, out, call, strict=False, FLYDEPS_VERIFY="1", ARCH=arch, FLYDSL_GPU_ARCH=arch, PATH=other_path
        )
        assert verified == "1", arch
    # gfx942 without FLYDSL_GPU_ARCH: what a CPU-only host's detection answers (FlyDSL's fallback)
    assert _strict_traces(project, out, call, PATH=other_path) == "0"
    wrong = f"try:\n    {call}\nexcept Exception as exc:\n    print(exc)"
    refused = _strict_traces(project, out, wrong, ARCH="gfx950", FLYDSL_GPU_ARCH="gfx1100")
    assert "FlyDSL's get_rocm_arch() (read by the shipped trace): 'gfx950' -> 'gfx1100'" in refused


def test_each_specialization_is_built_in_the_state_a_new_process_has(project: Path) -> None:
    """One worker (jobs=1) builds two specializations; the second's trace reads a registry
    the first's trace appended to. Each is keyed and traced in a fork of the worker (the
    spec imported, nothing traced), so a new strict process finds both rows, in either
    order, without tracing, and a FLYDEPS_VERIFY=1 process (which traces and compares each
    with its row, raising on a difference) agrees. Before, the second row was keyed by the
    registry the first trace left, and no new process found it."""
    out = project / "out"
    spec = f"{project / 'spec.py'}:registry_pair"
    first = build(spec, ["gfx942"], out, jobs=1, progress=False)
    assert (first.count("built"), first.count("failed")) == (2, 0), first.lines()
    calls = "registry.counted_copy(a, c, 1024); registry.logged_copy(a, c, 1024)"
    assert _strict_traces(project, out, calls) == "0"
    assert _strict_traces(project, out, calls, strict=False, FLYDEPS_VERIFY="1") == "2"  # traced, equal
    again = build(spec, ["gfx942"], out, jobs=1, progress=False)
    assert (again.count("built"), again.count("reused")) == (0, 2)


def _strict_traces(project: Path, out: Path, calls: str, *, strict: bool = True, **env: str) -> str:
    """stdout of a fresh FLYDEPS_AOT=strict process (COMPILE_ONLY, gfx942) served from ``out``
    that runs ``calls`` (with ``vadd``, ``reduce``, ``registry``, ``a``, ``c`` defined) and prints how many
    times FlyDSL traced; a call ``out`` cannot serve raises AotMissError there (with
    ``strict=False`` it traces)."""
    package = next(project.glob("fdkaot_*")).name
    code = (
        "import sys, torch\n"
        f"sys.path.insert(0, {str(project)!r})\n"
        "from flydsl.compiler.jit_function import JitFunction\n"
        "calls = []\n"
        "real = JitFunction._trace\n"
        "JitFunction._trace = lambda self, *a, **k: (calls.append(1), real(self, *a, **k))[1]\n"
        f"from {package} import vadd, reduce, registry, trace_inputs\n"
        "a, c = torch.zeros(1024), torch.zeros(1024)\n"
        f"{calls}\n"
        "print(len(calls))\n"
    )
    env = {
        **__import__("os").environ,
        "COMPILE_ONLY": "1",
        "ARCH": "gfx942",
        "FLYDEPS_AOT": "strict" if strict else "off",
        "FLYDEPS_CACHE_DIR": str(out),
        "FLYDSL_RUNTIME_CACHE_DIR": str(out / "flydsl"),
        "FLYDSL_RUNTIME_ENABLE_CACHE": "1",
        **env,
    }
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.strip()


ALL_CALLS = (
    "vadd.vadd(a, a, c, 1024); vadd.axpy(a, c, 1024, 2); vadd.axpy(a, c, 1024, 3); reduce.partial_sum(a, c, 256)"
)


def test_a_shipped_directory_serves_from_a_read_only_mount(project: Path, read_only_view) -> None:
    """DIR shipped on a read-only volume (nothing can write through it, not even root): every
    shipped call is served without a trace, ``aot list`` reads it, a call it does not hold
    traces (in memory) instead of failing on FlyDSL's lock files, and nothing in DIR changes.
    A process that can write in DIR adds its row and leaves the index in rollback-journal mode."""
    out = project / "out"
    build(f"{project / 'spec.py'}:specializations", ["gfx942"], out, jobs=2, progress=False)
    with sqlite3.connect(out / index.INDEX_NAME) as conn:  # shipped self-contained, rollback journal
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    view = read_only_view(out)
    assert _strict_traces(project, view, ALL_CALLS) == "0"
    listed = shipped(view)
    assert len(listed) == 4 and all(r.artifact for r in listed)
    assert _strict_traces(project, view, f"{ALL_CALLS}; vadd.axpy(a, c, 1024, 4)", strict=False) == "1"
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before
    assert _strict_traces(project, out, "vadd.axpy(a, c, 1024, 4)", strict=False) == "1"
    with sqlite3.connect(out / index.INDEX_NAME) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
    assert len(_rows(out)) == 5


def test_prune_keeps_exactly_what_the_build_uses(project: Path) -> None:
    """After a helper edit, a pruned rebuild leaves one row and one artifact per
    specialization, and the directory still serves every one of them without a trace."""
    out = project / "out"
    spec = f"{project / 'spec.py'}:specializations"
    first = build(spec, ["gfx942"], out, jobs=2, progress=False, prune=True)
    assert first.pruned == Pruned(0, 0, 0) and len(_rows(out)) == 4
    artifacts = {p.name for p in (out / "flydsl").rglob("*.pkl")}
    assert len(artifacts) == 4
    stray = out / "flydsl" / "partial_sum" / ("0" * 64 + ".pkl")
    stray.write_bytes(b"left by an earlier FlyDSL")
    keep = out / "flydsl" / "partial_sum" / "notes.pkl"  # not a disk key: never touched
    keep.write_bytes(b"x")
    helpers = next(project.glob("fdkaot_*")) / "reduce_helpers.py"
    helpers.write_text(helpers.read_text().replace("return acc + x", "return acc - x"))
    edited = build(spec, ["gfx942"], out, jobs=2, progress=False, prune=True)
    assert (edited.count("built"), edited.count("reused")) == (1, 3)
    assert edited.pruned is not None and (edited.pruned.rows, edited.pruned.artifacts) == (1, 2)
    assert edited.lines()[-1].startswith("pruned 1 index rows and 2 artifacts")
    now = {p.name for p in (out / "flydsl").rglob("*.pkl")}
    assert len(_rows(out)) == 4 and len(now - {"notes.pkl"}) == 4 and keep.exists() and not stray.exists()
    assert len(now & artifacts) == 3  # the three reused specializations kept theirs
    wal = out / f"{index.INDEX_NAME}-wal"  # folded into the index file: DIR ships as it is
    assert not wal.exists() or wal.stat().st_size == 0
    assert _strict_traces(project, out, ALL_CALLS) == "0"
    again = build(spec, ["gfx942"], out, jobs=2, progress=False, prune=True)
    assert again.count("reused") == 4 and again.pruned == Pruned(0, 0, 0)


def test_prune_after_a_failed_specialization_deletes_nothing(project: Path) -> None:
    out = project / "out"
    build(f"{project / 'spec.py'}:specializations", ["gfx942"], out, jobs=2, progress=False)
    rows, artifacts = _rows(out), sorted((out / "flydsl").rglob("*.pkl"))
    broken = build(f"{project / 'spec.py'}:broken", ["gfx942"], out, jobs=1, progress=False, prune=True)
    assert broken.count("failed") == 1 and broken.pruned is not None
    assert broken.pruned.skipped.startswith("1 failed") and broken.lines()[-1].startswith("not pruned: 1 failed")
    assert _rows(out) == rows and sorted((out / "flydsl").rglob("*.pkl")) == artifacts

    def locked(keep: object) -> int:
        raise sqlite3.OperationalError("database is locked")

    with pytest.MonkeyPatch.context() as patch:  # another writer held the index past the timeout
        patch.setattr(index, "prune", locked)
        busy = build(f"{project / 'spec.py'}:specializations", ["gfx942"], out, jobs=2, progress=False, prune=True)
    assert busy.pruned is not None and "could not be pruned (database is locked)" in busy.pruned.skipped
    assert _rows(out) == rows and sorted((out / "flydsl").rglob("*.pkl")) == artifacts
    empty = build(f"{project / 'spec.py'}:nothing", ["gfx942"], out, jobs=1, progress=False, prune=True)
    assert empty.pruned is not None and "gave no specializations" in empty.pruned.skipped
    assert _rows(out) == rows and sorted((out / "flydsl").rglob("*.pkl")) == artifacts
    assert _strict_traces(project, out, ALL_CALLS) == "0"


def test_aot_list_names_every_shipped_specialization_and_missing_artifacts(project: Path) -> None:
    """``aot list`` against the build's own outcomes: one entry per row with its launcher,
    arguments and arch; an artifact deleted from DIR is reported missing (exit 1), and the
    index is not written."""
    out = project / "out"
    summary = build(f"{project / 'spec.py'}:specializations", ["gfx942", "gfx950"], out, jobs=2, progress=False)
    listed = shipped(out)
    assert len(listed) == len(summary.outcomes) == 8 and all(r.artifact for r in listed)
    package = next(project.glob("fdkaot_*")).name
    names = ["reduce.partial_sum", "vadd.axpy", "vadd.vadd"]
    assert sorted({r.launcher for r in listed}) == [f"{package}.{name}" for name in names]
    assert sorted(r.arch for r in listed) == ["gfx942"] * 4 + ["gfx950"] * 4
    factors = sorted(dict(r.args)["factor"] for r in listed if r.launcher.endswith("axpy"))
    assert factors == ["(int, 2)", "(int, 2)", "(int, 3)", "(int, 3)"]
    assert all(r.versions[0] == __import__("flydsl").__version__ for r in listed)
    gone = next((out / "flydsl").rglob("*.pkl"))
    gone.unlink()
    before = (out / index.INDEX_NAME).read_bytes()
    command = [sys.executable, "-m", "flydeps", "aot", "list", str(out)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert lines[0] == f"{out}: 8 specializations of 3 launchers, 1 without their artifact" and len(lines) == 9
    assert sum("artifact MISSING" in line for line in lines) == 1
    assert (out / index.INDEX_NAME).read_bytes() == before
    # Listed by a process whose FlyDSL has another toolchain (here another ROCm root, as in a
    # shell without the build's ROCM_PATH): the artifacts are there, for the build's toolchain.
    elsewhere = project / "other-rocm"
    env = {**os.environ, "ROCM_PATH": str(elsewhere)}
    other = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert other.returncode == 1, other.stderr[-2000:]
    head, *entries = other.stdout.strip().splitlines()
    assert head == (
        f"{out}: 8 specializations of 3 launchers, 8 without their artifact: 7 of them have it for another "
        f"FlyDSL toolchain than this process's (ROCm root {elsewhere}; ROCM_PATH={elsewhere})"
    )
    assert sum("artifact there for another FlyDSL toolchain only" in line for line in entries) == 7
    assert sum("artifact MISSING" in line for line in entries) == 1  # the one deleted
    assert (out / index.INDEX_NAME).read_bytes() == before
    as_json = subprocess.run([*command, "--format", "json", "--no-artifacts"], capture_output=True, text=True)
    assert as_json.returncode == 0 and len(json.loads(as_json.stdout)) == 8
    assert all(entry["artifact"] is None for entry in json.loads(as_json.stdout))
    (project / "junk").mkdir()
    (project / "junk" / index.INDEX_NAME).write_bytes(b"not sqlite")
    (project / "a_file").write_text("kept\n")
    for where, why in [
        (project / "nowhere", "no persistent index there"),
        (project / "junk", "not a readable"),
        (project / "a_file", "is a file, not the --out DIR of an AOT build"),
    ]:
        bad = subprocess.run([*command[:-1], str(where)], capture_output=True, text=True, timeout=300)
        assert bad.returncode == 2 and why in bad.stderr and str(where) in bad.stderr, bad.stderr
        assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr
    assert (project / "junk" / index.INDEX_NAME).read_bytes() == b"not sqlite"  # left as it was
    assert (project / "a_file").read_text() == "kept\n"


# `flydeps aot list` in a process that says, after the listing, which of FlyDSL and torch it imported.
_LIST_SAYING_IMPORTS = """
import sys

from flydeps.cli import main

code = main(sys.argv[1:])
print("imported:", sorted(m for m in ("flydsl", "torch") if m in sys.modules))
sys.exit(code)
"""


def test_aot_list_reads_the_toolchain_back_without_importing_flydsl_or_torch(project: Path) -> None:
    """The build remembers its toolchain key in DIR's index: a listing reads it back by the
    digest of FlyDSL's files (named without importing FlyDSL, its ROCm root asked of its C
    API library) and imports neither FlyDSL nor torch; each row's artifact is judged as
    with the key FlyDSL computes (a deleted one is missing). An index that does not
    remember the toolchain: FlyDSL computes it, with the same listing."""
    out = project / "out"
    build(f"{project / 'spec.py'}:specializations", ["gfx942"], out, jobs=2, progress=False)
    gone = next((out / "flydsl").rglob("*.pkl"))
    gone.unlink()
    present = {p.stem for p in (out / "flydsl").rglob("*.pkl")}
    toolchain = index._compute_toolchain_key()
    rows = sqlite3.connect(out / index.INDEX_NAME).execute("SELECT ir_key FROM specializations").fetchall()
    expected = sorted(index.disk_key_with(toolchain, ir_key) in present for (ir_key,) in rows)
    assert expected.count(False) == 1 and len(expected) == 4
    command = [sys.executable, "-c", _LIST_SAYING_IMPORTS, "aot", "list", "--format", "json", str(out)]

    def listed(**env: str) -> tuple[list[bool], str]:
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ, **env})
        assert done.returncode == 1, done.stderr[-2000:]  # 1: an artifact is missing
        *document, said = done.stdout.strip().splitlines()
        return sorted(entry["artifact"] for entry in json.loads("\n".join(document))), said

    assert listed() == (expected, "imported: []")
    with sqlite3.connect(out / index.INDEX_NAME) as conn:
        conn.execute("DELETE FROM toolchains")
    empty = project / "empty-cache"
    empty.mkdir(mode=0o700)
    assert listed(FLYDEPS_CACHE_DIR=str(empty)) == (expected, "imported: ['flydsl', 'torch']")


def test_failures_are_reported_and_bad_specs_refused(project: Path) -> None:
    out = project / "out"
    summary = build(f"{project / 'spec.py'}:broken", ["gfx942"], out, jobs=1, progress=False)
    assert (summary.count("built"), summary.count("failed")) == (1, 1)
    (failed,) = summary.failed
    assert "ArgumentSignatureError" in failed.error and "'c'" in failed.error
    assert any(line.startswith("failed: ") for line in summary.lines())
    for bad, why in [
        (f"{project / 'spec.py'}", "does not end in ':function'"),
        (f"{project / 'nowhere.py'}:specializations", "which is not a file"),
        (f"{project / 'spec.py'}:missing", "does not define as a callable"),
        (f"{project / 'spec.py'}:not_pairs", r"is not \(launcher, args\)"),
        ("no_such_module_xyz:f", "cannot be imported"),
    ]:
        with pytest.raises(SpecError, match=why):
            build(bad, ["gfx942"], out, jobs=1, progress=False)
    with pytest.raises(ValueError, match="--arch"):
        build(f"{project / 'spec.py'}:specializations", ["gfx9 42"], out, jobs=1, progress=False)
    with pytest.raises(ValueError, match="--executor"):
        build(f"{project / 'spec.py'}:specializations", ["gfx942"], out, executor="ray://x", progress=False)
    a_file = project / "a_file"
    a_file.write_text("kept\n")
    for bad_out, why in [(a_file, "is not a directory"), (a_file / "sub", "cannot make the directory")]:
        with pytest.raises(ValueError, match=f"--out {bad_out} {why}" if why.startswith("is") else why):
            build(f"{project / 'spec.py'}:specializations", ["gfx942"], bad_out, jobs=1, progress=False)
    assert a_file.read_text() == "kept\n"  # nothing lost
    if importlib.util.find_spec("distributed") is not None:  # a scheduler nobody listens for
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        # In a process of its own: a Client that failed to connect leaves its event-loop
        # thread behind, and this process must stay single-threaded (other tests fork).
        env = {**os.environ, "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "2s"}
        command = [sys.executable, "-m", "flydeps", "aot", "build", f"{project / 'spec.py'}:specializations"]
        command += ["--arch", "gfx942", "--out", str(out), "--executor", f"dask://127.0.0.1:{port}", "--no-progress"]
        unreachable = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert unreachable.returncode == 2 and "Traceback" not in unreachable.stderr, unreachable.stderr[-2000:]
        assert f"--executor dask://127.0.0.1:{port}: cannot reach a Dask scheduler" in unreachable.stderr
        assert "or use --executor local" in unreachable.stderr


def test_a_specialization_no_row_would_serve_fails_and_says_why(project: Path) -> None:
    """Bad input: a spec item whose call leaves nothing a runtime process could load — it
    runs no launcher (a plain function, a launcher's factory), its trace has no
    cross-process key (a function as a compile-time argument), or the launcher is FlyDSL's
    own — fails, naming why; before, each counted as built or reused and the shipped
    directory lacked it. The oracle: the index rows the build leaves, and what a rebuild is
    served (a call served by the launcher's memory in the worker is reused too)."""
    out = project / "out"
    spec = f"{project / 'spec.py'}:unserved"
    first = build(spec, ["gfx942"], out, jobs=1, progress=False)
    assert (first.count("built") + first.count("reused"), first.count("failed")) == (2, 4)
    failed = sorted(first.failed, key=lambda f: f.position)
    errors = [f.error for f in failed]
    assert "ran no flydsl_runtime launcher" in errors[0] and "it returned" not in errors[0]
    assert "ran no flydsl_runtime launcher" in errors[1] and "it returned Launcher vadd" in errors[1]
    assert "apply: a function passed as a compile-time argument has no cross-process name" in errors[2]
    assert "function fdkaot_" in failed[2].label and ".apply.double" in failed[2].label  # no address
    assert "1 trace(s) by a FlyDSL launcher that is not flydsl_runtime's" in errors[3]
    assert len(_rows(out)) == 1  # vadd's
    again = build(spec, ["gfx942"], out, jobs=1, progress=False)
    assert (again.count("built"), again.count("reused"), again.count("failed")) == (0, 2, 4)
    assert len(_rows(out)) == 1


def test_a_spec_inside_a_src_layout_package_imports_as_its_package(
    tmp_path: Path, rocm_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A src-layout repository, not installed: ``src/<pkg>/aot.py:specializations`` is
    imported as ``<pkg>.aot`` (its own absolute and relative imports work, in every worker);
    before, its directory went on sys.path, ``from <pkg> import ...`` failed, and the build
    ended in an internal error. The oracle: a rebuild is served every specialization by the
    index. Bad input: the module spelling of a package in ./src names the fix, and a spec file
    that raises while imported is a spec error naming the file."""
    monkeypatch.setattr(sys, "path", list(sys.path))  # the build puts src/ first on this process's path
    package = f"fdksrc_{uuid.uuid4().hex[:8]}"
    src = tmp_path / "repo" / "src"
    shutil.copytree(KERNELS / "fdk", src / package)
    with (src / package / "__init__.py").open("a") as init:  # a spec in the package's own __init__.py
        init.write("\n\ndef nothing():\n    return []\n")
    (src / package / "aot.py").write_text(
        f"import torch\n\nfrom {package} import vadd\nfrom . import reduce\n\n\n"
        "def specializations():\n"
        "    a, b, c = (torch.zeros(1024) for _ in range(3))\n"
        "    yield vadd.vadd, (a, b, c, 1024)\n"
        "    yield reduce.partial_sum, (a, c, 256)\n"
    )
    spec, out = f"{src / package / 'aot.py'}:specializations", tmp_path / "out"
    monkeypatch.chdir(tmp_path / "repo")  # before any build of the file puts src/ on sys.path
    with pytest.raises(SpecError, match=rf"{package} is in ./src: install the project .* or set PYTHONPATH=src"):
        build(f"{package}.aot:specializations", ["gfx942"], out, jobs=1, progress=False)
    first = build(spec, ["gfx942"], out, jobs=2, progress=False)
    assert (first.count("built"), first.count("failed")) == (2, 0), first.lines()
    again = build(spec, ["gfx942"], out, jobs=2, progress=False)
    assert (again.count("built"), again.count("reused"), again.count("failed")) == (0, 2, 0)
    assert load_spec(f"{src / package / '__init__.py'}:nothing") is sys.modules[package].nothing
    assert f"{package}.__init__" not in sys.modules
    (tmp_path / "raises.py").write_text("raise RuntimeError('no tuning table')\n")
    with pytest.raises(SpecError, match=r"raised while importing .*raises.py: RuntimeError: no tuning table"):
        build(f"{tmp_path / 'raises.py'}:f", ["gfx942"], out, jobs=1, progress=False)


def test_cli_summary_and_exit_codes(project: Path) -> None:
    command = [sys.executable, "-m", "flydeps", "aot", "build", f"{project / 'spec.py'}:specializations"]
    done = subprocess.run(
        [*command, "--arch", "gfx942", "--out", str(project / "out"), "--jobs", "2", "--no-progress"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == f"aot build into {project / 'out'}: 4 built, 0 reused, 0 failed (of 4)"
    pruned = subprocess.run(
        [*command, "--arch", "gfx942", "--out", str(project / "out"), "--jobs", "2", "--no-progress", "--prune"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pruned.returncode == 0, pruned.stderr[-2000:]
    assert pruned.stdout.strip().splitlines() == [
        f"aot build into {project / 'out'}: 0 built, 4 reused, 0 failed (of 4)",
        "pruned 0 index rows and 0 artifacts (0.0 MiB) that no specialization of this build uses",
    ]
    nothing = [*command[:-1], f"{project / 'spec.py'}:nothing", "--arch", "gfx942", "--out", str(project / "out")]
    unpruned = subprocess.run([*nothing, "--no-progress", "--prune"], capture_output=True, text=True, timeout=600)
    assert unpruned.returncode == 1 and "not pruned: the spec gave no specializations" in unpruned.stdout
    assert len(_rows(project / "out")) == 4  # nothing went
    bad = subprocess.run([*command[:-1], "spec.py", "--arch", "gfx942", "--out", "x"], capture_output=True, text=True)
    assert bad.returncode == 2 and "does not end in ':function'" in bad.stderr and "Traceback" not in bad.stderr
    odd = project / "odd\nname.py"
    odd.write_text("def f():\n    return 1\n")
    one_line = subprocess.run(
        [*command[:-1], f"{odd}:f", "--arch", "gfx942", "--out", "x"], capture_output=True, text=True
    )
    assert one_line.returncode == 2 and len(one_line.stderr.strip().splitlines()) == 1
    assert "raised while giving its specializations" in one_line.stderr and "Traceback" not in one_line.stderr
    broken = [*command[:-1], f"{project / 'spec.py'}:broken", "--arch", "gfx942", "--out", str(project / "o2")]
    failed = subprocess.run([*broken, "--no-progress"], capture_output=True, text=True, timeout=600)
    assert failed.returncode == 1 and "1 failed" in failed.stdout


EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# What examples/aot_specializations.py yields, called as a runtime process calls it.
EXAMPLE_CALLS = """
import torch
from kernels.realworld import norms, quant, softmax
x, w = torch.zeros(256 * 8), torch.zeros(8)
for width in (1, 2, 4, 8):
    norms.rmsnorm(x, w, x, 256, width)
    norms.layernorm(x, w, w, x, 256, width=width)
softmax.softmax_w4(x, x, 256)
softmax.softmax_w4_scaled(x, x, 256)
quant.QUANT.launch(x, x, 256)  # bias omitted: its default, 0.0
quant.QUANT.launch(x, x, 256, bias=1.0)
"""


def test_the_bundled_example_spec_ships_what_a_strict_process_calls(tmp_path: Path) -> None:
    """The README's AOT example: ``flydeps aot build examples/aot_specializations.py:specializations``
    builds the example kernels as their callers call them (defaults omitted, keyword
    arguments, a builder's launcher, an instance's method). The oracle is a fresh
    ``FLYDEPS_AOT=strict`` process making those calls: served without a trace, while a width
    the spec does not list is refused naming the argument; a rebuild traces nothing."""
    out = tmp_path / "aot"
    spec = f"{EXAMPLES / 'aot_specializations.py'}:specializations"
    command = [sys.executable, "-m", "flydeps", "aot", "build", spec, "--arch", "gfx942", "--out", str(out)]
    for expected in ("12 built, 0 reused", "0 built, 12 reused"):
        done = subprocess.run([*command, "--jobs", "2", "--no-progress"], capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.strip() == f"aot build into {out}: {expected}, 0 failed (of 12)"
    code = (
        "from flydsl.compiler.jit_function import JitFunction\n"
        "traces = []\n"
        "real = JitFunction._trace\n"
        "JitFunction._trace = lambda self, *a, **k: (traces.append(1), real(self, *a, **k))[1]\n"
        f"{EXAMPLE_CALLS}\n"
        "print(len(traces))\n"
        "try:\n"
        "    norms.rmsnorm(x, w, x, 256, 3)\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(EXAMPLES),
        "COMPILE_ONLY": "1",
        "ARCH": "gfx942",
        "FLYDEPS_AOT": "strict",
        "FLYDEPS_CACHE_DIR": str(out),
        "FLYDSL_RUNTIME_CACHE_DIR": str(out / "flydsl"),
        "FLYDSL_RUNTIME_ENABLE_CACHE": "1",
    }
    served = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    assert served.returncode == 0, served.stderr[-2000:]
    traces, refused = served.stdout.strip().splitlines()
    assert traces == "0"
    assert refused.startswith("AotMissError FLYDEPS_AOT=strict: kernels.realworld.norms.rmsnorm()"), refused
    assert "argument 'width': (int, " in refused and "-> (int, 3)" in refused, refused


def _dask_build(spec: str, out: Path, address: str) -> subprocess.CompletedProcess[str]:
    """`flydeps aot build SPEC --arch gfx942 --out OUT --executor dask://ADDRESS`, run."""
    command = [sys.executable, "-m", "flydeps", "aot", "build", spec, "--arch", "gfx942", "--out", str(out)]
    return subprocess.run(
        [*command, "--executor", f"dask://{address}", "--no-progress"], capture_output=True, text=True, timeout=600
    )


def test_dask_cluster_build_equals_the_local_build(project: Path, tmp_path: Path) -> None:
    """A real local Dask cluster (a scheduler and 2 single-thread worker processes, started
    with Dask's own commands) runs `flydeps aot build --executor dask://...`; its index rows
    and artifacts equal the local pool's."""
    pytest.importorskip("distributed")
    spec = f"{project / 'spec.py'}:specializations"
    local = build(spec, ["gfx942"], project / "local", jobs=2, progress=False)
    bindir = Path(sys.executable).parent
    scheduler_file = tmp_path / "scheduler.json"
    procs = [
        subprocess.Popen(
            [
                str(bindir / "dask"),
                "scheduler",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(scheduler_file),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    try:
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        worker = [str(bindir / "dask"), "worker", "--scheduler-file", str(scheduler_file), "--nworkers", "2"]
        procs.append(
            subprocess.Popen(
                [*worker, "--nthreads", "1", "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
        )
        address = json.loads(scheduler_file.read_text())["address"].removeprefix("tcp://")
        from distributed import Client

        with Client(f"tcp://{address}", timeout=60) as client:
            client.wait_for_workers(2, timeout=120)
        done = _dask_build(spec, project / "dask", address)
        # A worker whose ROCm root has no linker: the build is refused before any work,
        # naming it, instead of each specialization it takes failing with MLIR's bare words.
        no_lld = tmp_path / "rocm-without-lld"
        (no_lld / "amdgcn").mkdir(parents=True)
        procs.append(
            subprocess.Popen(
                [*worker[:-2], "--nworkers", "1", "--nthreads", "1", "--no-dashboard"],
                env={**os.environ, "ROCM_PATH": str(no_lld)},
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        with Client(f"tcp://{address}", timeout=60) as client:
            client.wait_for_workers(3, timeout=120)
        refused = _dask_build(spec, project / "dask2", address)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=60)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("4 built, 0 reused, 0 failed (of 4)") and local.count("built") == 4
    assert _rows(project / "dask") == _rows(project / "local")
    with sqlite3.connect(project / "dask" / index.INDEX_NAME) as conn:  # the live workers let go of it
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete", done.stderr[-2000:]
    names = {p.name for p in (project / "local" / "flydsl").rglob("*.pkl")}
    assert names == {p.name for p in (project / "dask" / "flydsl").rglob("*.pkl")}
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr[-3000:]
    assert refused.stderr.startswith("aot build: 1 Dask worker(s) cannot link a kernel, e.g. tcp://")
    assert f"FlyDSL links each kernel with {no_lld / 'llvm' / 'bin' / 'ld.lld'}, which is missing" in refused.stderr
    assert not list((project / "dask2").rglob("*.pkl"))


def _pool_size_in(preexec: Callable[[], object]) -> tuple[int, str]:
    """``local_workers(10)`` in a new process started with ``preexec`` (its CPUs or limits)."""
    code = "import json; from flydsl_runtime.aot.build import local_workers; print(json.dumps(local_workers(10)))"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, preexec_fn=preexec, check=True
    )
    workers, why = json.loads(done.stdout)
    return workers, why


def _rss_limit(limit: int) -> Callable[[], None]:
    import resource

    return lambda: resource.setrlimit(resource.RLIMIT_RSS, (limit, limit))


def test_the_default_pool_has_the_cpus_and_memory_the_build_may_use(project: Path) -> None:
    """Without --jobs the local pool gets one worker per CPU the process may run on (its
    affinity), no more than its memory holds at 1 GiB each (RLIMIT_RSS is the limit
    distributed.system.memory_limit reads, as it reads a cgroup's), nor more than there are
    items; a build whose pool memory made smaller says so in its summary, and builds."""
    from dask.system import cpu_count

    from flydsl_runtime.aot.build import WORKER_BYTES, local_workers

    cpus = cpu_count()
    assert local_workers(10) == (min(cpus, 10), "")  # this machine: memory holds every CPU's worker
    assert local_workers(1) == (1, "")
    assert _pool_size_in(lambda: os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})) == (1, "")
    if cpus < 2:
        pytest.skip("one usable CPU: memory cannot make the pool smaller than the CPUs")
    workers, why = _pool_size_in(_rss_limit(WORKER_BYTES * 3 // 2))
    assert workers == 1
    assert why == (
        f"workers: 1 local, not one per usable CPU ({cpus}): 1.5 GiB of memory available, "
        "1 GiB budgeted per worker; --jobs N to choose"
    )
    command = [sys.executable, "-m", "flydeps", "aot", "build", f"{project / 'spec.py'}:resumed"]
    done = subprocess.run(
        [*command, "--arch", "gfx942", "--out", str(project / "out"), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=_rss_limit(WORKER_BYTES * 3 // 2),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines() == [
        f"aot build into {project / 'out'}: 2 built, 0 reused, 0 failed (of 2)",
        why,
    ]


def test_a_rocm_root_without_its_linker_is_named_before_any_work(project: Path, rocm_root: Path) -> None:
    """FlyDSL links each kernel with $ROCM_PATH/llvm/bin/ld.lld (not one on PATH): where it is
    missing, `aot build` refuses at once, naming the file and ROCM_PATH (exit 2, nothing made),
    instead of failing every specialization with MLIR's bare "lld invocation failed"; a
    runtime call that traces gets the same words as a note on FlyDSL's error."""
    root = project / "rocm-without-lld"
    (root / "amdgcn").mkdir(parents=True)
    (root / "amdgcn" / "bitcode").symlink_to(rocm_root / "amdgcn" / "bitcode")
    env = {
        **os.environ,
        "ROCM_PATH": str(root),
        "PATH": f"{rocm_root / 'llvm' / 'bin'}{os.pathsep}{os.environ['PATH']}",
    }
    out = project / "out"
    command = [sys.executable, "-m", "flydeps", "aot", "build", f"{project / 'spec.py'}:resumed"]
    done = subprocess.run(
        [*command, "--arch", "gfx942", "--out", str(out), "--no-progress"],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    linker = root / "llvm" / "bin" / "ld.lld"
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip() == (
        f"aot build: FlyDSL links each kernel with {linker}, which is missing or not executable "
        f"(ROCM_PATH={root}): set ROCM_PATH to a ROCm root holding llvm/bin/ld.lld and amdgcn/bitcode"
    )
    assert not out.exists()
    package = next(p.name for p in project.iterdir() if p.name.startswith("fdkaot_"))
    call = (
        f"import torch\nfrom {package} import vadd\na, b, c = (torch.zeros(64) for _ in range(3))\n"
        "try:\n    vadd.vadd(a, b, c, 64)\nexcept Exception as error:\n"
        "    print(type(error).__name__, getattr(error, '__notes__', []))\n"
    )
    fresh = {"FLYDEPS_CACHE_DIR": str(project / "c"), "FLYDSL_RUNTIME_CACHE_DIR": str(project / "c" / "fl")}
    ran = subprocess.run(
        [sys.executable, "-c", call],
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, **fresh, "COMPILE_ONLY": "1"},
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert ran.stdout.strip() == (
        f"DSLCompileError ['flydsl_runtime: FlyDSL links each kernel with {linker}, which is missing or not "
        f"executable (ROCM_PATH={root}): set ROCM_PATH to a ROCm root holding llvm/bin/ld.lld and amdgcn/bitcode']"
    )


def test_an_arch_the_compiler_does_not_know_is_named_before_any_work(project: Path) -> None:
    """A misspelt --arch made LLVM abort in every specialization's build process (SIGABRT in
    instruction selection, "died (killed by signal SIGABRT)" per item), or failed every trace
    (MLIR's "Invalid chipset name"): `aot build` now asks FlyDSL's compiler about each arch
    first and refuses the unknown ones by name (exit 2, nothing made), quoting it."""
    out = project / "out"
    command = [sys.executable, "-m", "flydeps", "aot", "build", f"{project / 'spec.py'}:resumed", "--out", str(out)]
    arches = "gfx942,gfx9499,gfx950,gfx94"
    done = subprocess.run([*command, "--arch", arches, "--no-progress"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2, done.stderr[-2000:]
    assert done.stderr.strip() == (
        "aot build: --arch gfx9499,gfx94: FlyDSL's compiler does not know these processors (the compiler says "
        "gfx9499: 'gfx9499' is not a recognized processor for this target (ignoring processor); "
        "gfx94: DSLCompileError: Invalid chipset name: gfx94); "
        "name the GPU processors to build for, such as gfx942,gfx950"
    )
    assert not out.exists()
    one = subprocess.run([*command, "--arch", "gfx9499", "--no-progress"], capture_output=True, text=True, timeout=600)
    assert one.returncode == 2
    assert "--arch gfx9499: FlyDSL's compiler does not know this processor (the compiler says gfx9499: " in one.stderr
    good = subprocess.run([*command, "--arch", "gfx950", "--no-progress"], capture_output=True, text=True, timeout=600)
    assert good.returncode == 0, good.stderr[-2000:]
    assert good.stdout.startswith(f"aot build into {out}: 2 built, 0 reused, 0 failed (of 2)")


_REAL_KERNEL = """
import torch
import flydsl.compiler as flyc
import flydsl.expr as fx

@flyc.kernel
def add_one(out: fx.Tensor):
    out[fx.thread_idx.x] = out[fx.thread_idx.x] + 1.0

@flyc.jit
def launch(out: fx.Tensor, stream: fx.Stream = fx.Stream(None)):
    add_one(out).launch(grid=(1, 1, 1), block=(64, 1, 1), stream=stream)

launch(torch.zeros(64))
"""


@pytest.mark.parametrize("arch", ["gfx942", "gfx9499", "gfx94"])  # known; unknown to LLVM; refused by MLIR
def test_the_compiler_probe_agrees_with_a_real_compile(tmp_path: Path, rocm_root: Path, arch: str) -> None:
    """The oracle: a kernel that loads and stores, compiled for the arch by FlyDSL in a new
    process, succeeds exactly for the arches the probe does not report."""
    from flydsl_runtime.aot.archprobe import unknown_arches

    (tmp_path / "kernel.py").write_text(_REAL_KERNEL)
    env = {**os.environ, "ARCH": arch, "COMPILE_ONLY": "1", "FLYDSL_RUNTIME_CACHE_DIR": str(tmp_path / "fl")}
    real = subprocess.run(
        [sys.executable, str(tmp_path / "kernel.py")], capture_output=True, text=True, timeout=600, env=env
    )
    reported = unknown_arches([arch])
    assert (real.returncode == 0) == (arch not in reported), (reported, real.returncode, real.stderr[-1500:])
    if arch in reported:
        assert reported[arch] in real.stderr


def test_the_compiler_probe_tells_nothing_it_cannot_tell(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a linker the empty kernel fails to link for every arch: only LLVM's own words
    about the name count, so a known arch is not reported and an unknown one still is; a
    probe that never ends is killed and reports nothing; probes running when the command is
    interrupted are killed and reaped; no arches, no probe."""
    from flydsl_runtime.aot import archprobe

    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no-rocm"))
    assert dict(archprobe.unknown_arches(["gfx942", "gfx9499", "gfx942"])) == {
        "gfx9499": "'gfx9499' is not a recognized processor for this target (ignoring processor)"
    }
    assert archprobe.unknown_arches([]) == {}

    def never_ends(arch: str) -> int:
        time.sleep(60)
        return 0

    monkeypatch.setattr(archprobe, "_compile_empty_kernel", never_ends)
    started = time.monotonic()
    assert archprobe.unknown_arches(["gfx9499"], timeout=0.5) == {}
    assert time.monotonic() - started < 30
    # Interrupted (Ctrl-C) while the probes run: they are killed and reaped, not left behind.
    started_pids: list[int] = []

    def interrupted(children: dict, pending: set, timeout: float) -> None:
        started_pids.extend(children)
        raise KeyboardInterrupt

    monkeypatch.setattr(archprobe, "_wait_all", interrupted)
    with pytest.raises(KeyboardInterrupt):
        archprobe.unknown_arches(["gfx9499", "gfx942"])
    assert len(started_pids) == 2
    for pid in started_pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
