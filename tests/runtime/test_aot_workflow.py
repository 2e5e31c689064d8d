"""Issue 40's workflow, end to end with the real commands and a real Dask cluster.

A server-like script (``examples/serve_kernels.py``, on a copy of the example kernels) is
recorded in two processes (``flydeps aot record``), the manifests merged (``flydeps aot
merge``) and built for two arches on a local Dask cluster (``flydeps aot build --manifest
--executor dask://``); a fresh ``FLYDEPS_AOT=strict`` process then makes every recorded call
with 0 traces. After a helper edit, ``flydeps aot plan`` names exactly the entries whose IR
changes — checked against FlyDSL itself: a fresh build of the edited tree into another
directory, whose rows' IR keys say which specializations now trace to other IR — and the
rebuild rebuilds only those.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("flydsl")
pytest.importorskip("distributed")

from flydsl_runtime.persist import index  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FLYDEPS = [sys.executable, "-m", "flydeps", "aot"]

STRICT = """
from flydsl.compiler.jit_function import JitFunction
traces = []
real = JitFunction._trace
JitFunction._trace = lambda self, *a, **k: (traces.append(1), real(self, *a, **k))[1]
import serve_kernels
serve_kernels._on_the_fly = lambda x, rows: None  # unnamed in the manifest: strict would refuse it
serve_kernels.main(["all", "--requests", "4"])
print(len(traces))
"""


def _env(project: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLYDEPS_") and k != "COMPILE_ONLY"}
    env.update(PYTHONPATH=os.pathsep.join([str(project), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]))
    env.update(extra)
    return env


def _run(command: list[str], env: dict[str, str], cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    return done


def _ir_keys(out: Path) -> dict[str, str]:
    """Persistent key -> FlyDSL's IR key of every row in ``out``."""
    return {key: ir_key for key, _reads, _launcher, ir_key, *_rest in index.read_rows(out / index.INDEX_NAME)}


def _plan(project: Path, manifest: Path, out: Path) -> tuple[int, dict]:
    """``flydeps aot plan --exit-code --format json``: its exit status and document."""
    command = [*FLYDEPS, "plan", "--manifest", str(manifest), "--out", str(out), "--root", str(project)]
    done = subprocess.run(
        [*command, "--exit-code", "--format", "json"], env=_env(project), cwd=project, capture_output=True, text=True
    )
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, json.loads(done.stdout)


def _units(doc: dict) -> dict[tuple[str, str], dict]:
    """(manifest line, arch) -> the plan's unit."""
    return {(u["where"], u["arch"]): u for u in doc["units"]}


class _Cluster:
    """A Dask scheduler and two single-thread worker processes, started with Dask's own
    commands; the workers import the project's kernels (``PYTHONPATH``)."""

    def __init__(self, tmp: Path, env: dict[str, str]) -> None:
        bindir = Path(sys.executable).parent
        scheduler_file = tmp / "scheduler.json"
        quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL, "env": env}
        scheduler = [str(bindir / "dask"), "scheduler", "--port", "0", "--no-dashboard"]
        self.procs = [subprocess.Popen([*scheduler, "--scheduler-file", str(scheduler_file)], **quiet)]  # type: ignore[call-overload]
        deadline = time.monotonic() + 60
        while not scheduler_file.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        worker = [str(bindir / "dask"), "worker", "--scheduler-file", str(scheduler_file), "--nworkers", "2"]
        self.procs.append(subprocess.Popen([*worker, "--nthreads", "1", "--no-dashboard"], **quiet))  # type: ignore[call-overload]
        self.address = json.loads(scheduler_file.read_text())["address"].removeprefix("tcp://")
        from distributed import Client

        with Client(f"tcp://{self.address}", timeout=60) as client:
            client.wait_for_workers(2, timeout=120)

    def close(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()


def test_record_merge_build_on_dask_serve_strict_then_plan_and_rebuild_only_what_changed(
    tmp_path: Path, rocm_root: Path
) -> None:
    project = tmp_path / "project"
    (project / "kernels").mkdir(parents=True)
    shutil.copy(EXAMPLES / "kernels" / "__init__.py", project / "kernels" / "__init__.py")
    shutil.copytree(EXAMPLES / "kernels" / "realworld", project / "kernels" / "realworld")
    shutil.copy(EXAMPLES / "serve_kernels.py", project / "serve_kernels.py")
    cache = tmp_path / "cache"
    serving = _env(
        project, COMPILE_ONLY="1", FLYDEPS_CACHE_DIR=str(cache), FLYDSL_RUNTIME_CACHE_DIR=str(cache / "flydsl")
    )

    # Two server processes, each recorded into its own manifest; merged.
    for subset in ("norms", "softmax"):
        command = [*FLYDEPS, "record", "--manifest", str(tmp_path / f"{subset}.jsonl"), "--"]
        _run([*command, sys.executable, "serve_kernels.py", subset], serving, project)
    merged = tmp_path / "m.jsonl"
    _run(
        [*FLYDEPS, "merge", str(tmp_path / "norms.jsonl"), str(tmp_path / "softmax.jsonl"), "-o", str(merged)],
        serving,
        project,
    )
    entries = [json.loads(line) for line in merged.read_text().splitlines()[1:]]
    named = [e for e in entries if "unnamed" not in e]
    assert len(named) == 6 and len(entries) == 7, entries  # the on-the-fly launcher is listed, unnamed

    # Built for two arches on a local Dask cluster.
    out = tmp_path / "aot"
    build = [*FLYDEPS, "build", "--manifest", str(merged), "--arch", "gfx942,gfx950", "--no-progress"]
    cluster = _Cluster(tmp_path, _env(project))
    try:
        done = _run([*build, "--out", str(out), "--executor", f"dask://{cluster.address}"], _env(project), project)
    finally:
        cluster.close()
    assert done.stdout.splitlines()[0] == f"aot build into {out}: 12 built, 0 reused, 0 failed, 1 skipped (of 12)"
    assert len(_ir_keys(out)) == 12

    # A fresh strict process per arch makes every recorded call with 0 traces.
    for arch in ("gfx942", "gfx950"):
        strict = _env(
            project,
            ARCH=arch,
            FLYDSL_GPU_ARCH=arch,
            COMPILE_ONLY="1",
            FLYDEPS_AOT="strict",
            FLYDEPS_CACHE_DIR=str(out),
            FLYDSL_RUNTIME_CACHE_DIR=str(out / "flydsl"),
            FLYDSL_RUNTIME_ENABLE_CACHE="1",
        )
        served = _run([sys.executable, "-c", STRICT], strict, project).stdout.split()
        assert served == ["served", "4", "requests", "(all)", "0"], served

    code, doc = _plan(project, merged, out)
    assert code == 0 and doc["counts"] == {"present": 12, "invalidated": 0, "missing": 0, "unchecked": 0}, doc
    shipped = {where: u["row_key"] for where, u in _units(doc).items()}

    # A helper edit: the norms' inv_std computes otherwise.
    norms = project / "kernels/realworld/norms.py"
    norms.write_text(norms.read_text().replace("return fx.rsqrt(var + eps)", "return fx.rsqrt(var + eps + eps)", 1))
    code, doc = _plan(project, merged, out)
    assert code == 1 and doc["counts"]["missing"] == 0, doc
    invalidated = {where for where, u in _units(doc).items() if u["status"] == "invalidated"}

    # The oracle: FlyDSL's IR of every specialization, traced afresh from the edited tree.
    fresh = tmp_path / "fresh"
    _run([*build, "--out", str(fresh), "--jobs", "2"], _env(project), project)
    code, doc = _plan(project, merged, fresh)
    assert code == 0, doc
    old_ir, new_ir = _ir_keys(out), _ir_keys(fresh)
    changed = {where for where, u in _units(doc).items() if new_ir[u["row_key"]] != old_ir[shipped[where]]}
    assert changed and invalidated == changed, (sorted(invalidated), sorted(changed))

    # The rebuild of the shipped directory rebuilds exactly those.
    done = _run([*build, "--out", str(out), "--jobs", "2"], _env(project), project)
    assert done.stdout.splitlines()[0] == (
        f"aot build into {out}: {len(changed)} built, {12 - len(changed)} reused, 0 failed, 1 skipped (of 12)"
    )
