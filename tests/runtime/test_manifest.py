"""AOT manifests (issue 40): record what a real run calls, merge, and build from it.

Recording is driven through :func:`flydsl_runtime.persist.manifest.note_call`, the call the
launcher's miss path makes the first time a process stores an entry for a key. Until that
call is wired into ``launch/miss.py``, the processes here install it themselves
(:data:`RECORDING`: the same call, after ``MissPath._miss``); the end-to-end test at the
bottom runs the real ``flydeps aot record`` / ``merge`` / ``build --manifest`` commands and
is skipped until the launcher and the CLI are wired. The oracle for a build is a fresh
``FLYDEPS_AOT=strict`` process per arch that makes the recorded calls and counts FlyDSL's
traces (as tests/runtime/test_aotbuild.py does): 0, and a call the manifest could not name
is refused.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("flydsl")

from flydsl_runtime.aot.build import build  # noqa: E402
from flydsl_runtime.launch.jit import launcher_of  # noqa: E402
from flydsl_runtime.persist import manifest  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SERVE = EXAMPLES / "serve_kernels.py"

# The launcher's call of note_call, installed by hand (see the module docstring), then the script.
RECORDING = """
import runpy, sys
from flydsl_runtime.launch.miss import MissPath
from flydsl_runtime.persist import manifest
real = MissPath._miss
def _miss(self, owner, state, bound_self, positional, key, compile_only, stale=False):
    result = real(self, owner, state, bound_self, positional, key, compile_only, stale)
    entry = self._entries.get(key)
    if entry is not None:
        manifest.note_call(self, bound_self, positional, entry)
    return result
MissPath._miss = _miss
sys.argv = sys.argv[1:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""

# A fresh strict process: the server's named calls at other sizes, FlyDSL's traces counted,
# then the call the manifest could not name (refused: strict never traces).
STRICT = """
from flydsl.compiler.jit_function import JitFunction
traces = []
real = JitFunction._trace
JitFunction._trace = lambda self, *a, **k: (traces.append(1), real(self, *a, **k))[1]
import serve_kernels as s
for rows in (64, 256, 4096):
    s.serve_norms(rows)
    x = s.torch.zeros(rows * 4)
    s.softmax.softmax_w4(x, x, rows)
    s.softmax.softmax_w4_scaled(x, x, rows)
    s.quant.QUANT.launch(x, x, rows, bias=1.0)
print(len(traces))
try:
    s._on_the_fly(s.torch.zeros(1024), 256)
except Exception as exc:
    print(type(exc).__name__)
"""


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FLYDEPS_")}
    env.update(PYTHONPATH=os.pathsep.join([str(EXAMPLES), *os.environ.get("PYTHONPATH", "").split(os.pathsep)]))
    env.update(COMPILE_ONLY="1", **extra)
    return env


def _serve(subset: str, record: Path, cache: Path, **extra: str) -> subprocess.Popen[str]:
    """``serve_kernels.py SUBSET`` recording into ``record`` (its own index and FlyDSL cache)."""
    env = _env(
        FLYDEPS_RECORD=str(record),
        FLYDEPS_CACHE_DIR=str(cache),
        FLYDSL_RUNTIME_CACHE_DIR=str(cache / "flydsl"),
        **extra,
    )
    command = [sys.executable, "-c", RECORDING, str(SERVE), subset]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _finish(process: subprocess.Popen[str]) -> None:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-2000:]
    assert out.startswith("served"), out


BUILD = """
import json, sys
from pathlib import Path
from flydsl_runtime.aot.build import build
summary = build(None, sys.argv[2].split(","), Path(sys.argv[3]), manifest=sys.argv[1], jobs=2, progress=False)
print(json.dumps({"lines": summary.lines(), "outcomes": [[o.status, o.error] for o in summary.outcomes]}))
"""


def _build(record: Path, arches: str, out: Path) -> dict:
    """``build(--manifest record)`` in a process that imports the examples' ``kernels``
    (this one may hold the tests' package of that name): its summary lines and outcomes."""
    command = [sys.executable, "-c", BUILD, str(record), arches, str(out)]
    env = {k: v for k, v in os.environ.items() if k not in ("COMPILE_ONLY", "FLYDEPS_RECORD")}
    env["PYTHONPATH"] = os.pathsep.join([str(EXAMPLES), *os.environ.get("PYTHONPATH", "").split(os.pathsep)])
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _strict(out: Path, arch: str, **extra: str) -> list[str]:
    env = _env(
        ARCH=arch,
        FLYDSL_GPU_ARCH=arch,  # what a runtime on that GPU detects (get_rocm_arch)
        FLYDEPS_AOT="strict",
        FLYDEPS_CACHE_DIR=str(out),
        FLYDSL_RUNTIME_CACHE_DIR=str(out / "flydsl"),
        FLYDSL_RUNTIME_ENABLE_CACHE="1",
        **extra,
    )
    done = subprocess.run([sys.executable, "-c", STRICT], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.split()


NAMED = {
    "kernels.realworld.norms:rmsnorm": 2,  # widths 1 and 2
    "kernels.realworld.norms:layernorm": 1,
    "kernels.realworld.softmax:softmax_w4": 1,
    "kernels.realworld.softmax:softmax_w4_scaled": 1,
    "kernels.realworld.quant:QUANT.launch": 1,
}


def test_two_processes_record_each_specialization_once_and_a_build_serves_a_strict_process(
    tmp_path: Path, rocm_root: Path
) -> None:
    """Two servers append to one manifest at the same time (``norms`` and ``all``: the norms
    calls made by both), then one again: each specialization is one line (several sizes of
    one specialization too), the factory-made launcher an ``unnamed`` line with its reason.
    The server ran with a code-generation variable and a variable its kernels read set;
    the build, whose own environment has neither, builds each entry under them: a strict
    process with the server's environment makes every named call at other sizes, for both
    arches, with 0 traces. Before: no FLYDEPS_RECORD, no manifest, no --manifest."""
    record = tmp_path / "calls.jsonl"
    server_env = {"RW_NORM_PRECISE": "1", "FLYDSL_COMPILE_OPT_LEVEL": "2"}
    first = _serve("norms", record, tmp_path / "cache1", **server_env)
    second = _serve("all", record, tmp_path / "cache2", **server_env)
    _finish(first)
    _finish(second)
    _finish(_serve("norms", record, tmp_path / "cache3", **server_env))  # a third process: nothing new
    lines = record.read_text().splitlines()
    assert lines[0] == manifest.HEADER and len(lines) == len(set(lines))
    entries = _lines(record)[1:]
    named = [e for e in entries if "unnamed" not in e]
    assert {name: sum(e["launcher"] == name for e in named) for name in NAMED} == NAMED
    assert len(named) == sum(NAMED.values())
    (unnamed,) = [e for e in entries if "unnamed" in e]
    assert unnamed["launcher"] == "kernels.realworld.softmax.build_softmax.<locals>.softmax"
    assert "not reachable by import path" in unnamed["unnamed"]
    layernorm = next(e for e in named if e["launcher"].endswith(":layernorm"))
    tensor = {"tensor": {"dtype": "float32", "shape": [-1], "stride": [1]}}
    assert layernorm["args"] == [tensor, tensor, tensor, tensor, 0, 4]  # eps and stream: defaults, omitted
    assert layernorm["env"] == {"FLYDSL_COMPILE_OPT_LEVEL": "2"}
    assert layernorm["environ"]["RW_NORM_PRECISE"] == "1"
    quant = next(e for e in named if e["launcher"].endswith("QUANT.launch"))
    assert quant["kwargs"] == {"bias": 1.0}
    # Every line reads back, one entry each; the placeholders rebuild what was keyed.
    assert [e.identity for e in manifest.read(record)] == lines[1:]
    placeholder: Any = manifest.decode_value(tensor)
    assert placeholder.stride() == (1,) and placeholder.dtype.is_floating_point

    for name in ("RW_NORM_PRECISE", "FLYDSL_COMPILE_OPT_LEVEL"):
        assert name not in os.environ  # the build's own environment has neither
    out = tmp_path / "aot"
    summary = _build(record, "gfx942,gfx950", out)
    lines_out = summary["lines"]
    assert [status for status, _error in summary["outcomes"]] == ["built"] * 12, lines_out
    assert lines_out[0].endswith("0 failed, 1 skipped (of 12)"), lines_out
    where = f"{record}:{lines.index(json.dumps(unnamed, sort_keys=True)) + 1}"
    assert lines_out[1] == f"skipped: {unnamed['launcher']} ({where}): {unnamed['unnamed']}"
    for arch in ("gfx942", "gfx950"):
        assert _strict(out, arch, **server_env) == ["0", "AotMissError"]
    # Without the server's environment, those are other specializations: refused (strict).
    done = subprocess.run(
        [sys.executable, "-c", STRICT],
        env=_env(
            ARCH="gfx942",
            FLYDEPS_AOT="strict",
            FLYDEPS_CACHE_DIR=str(out),
            FLYDSL_RUNTIME_CACHE_DIR=str(out / "flydsl"),
        ),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "AotMissError" in done.stderr, done.stderr[-2000:]
    assert "RW_NORM_PRECISE" in done.stderr or "FLYDSL_COMPILE_OPT_LEVEL" in done.stderr, done.stderr[-2000:]
    again = _build(record, "gfx942,gfx950", out)
    assert [status for status, _error in again["outcomes"]] == ["reused"] * 12, again["lines"]


def _call_and_note(call: object, *args: object, **kwargs: object) -> None:
    """Call a launcher (or one bound to an instance) and make the launcher's note_call for the
    entry it stored."""
    launcher = launcher_of(call)
    assert launcher is not None
    bound = call.args[0] if launcher is not call else None  # type: ignore[attr-defined]
    before = {id(e) for e in launcher.entries()}
    call(*args, **kwargs)  # type: ignore[operator]
    (entry,) = [e for e in launcher.entries() if id(e) not in before]
    manifest.note_call(launcher, bound, launcher._bind(args, kwargs), entry)


def test_calls_that_cannot_be_named_are_recorded_with_why(
    fdk, compile_only, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A function passed as a compile-time value, a launcher a factory made, an instance no
    module-level name holds: one ``unnamed`` line each, with the reason, never dropped; a
    module-level launcher and a module-level instance's method are named by import path.
    With FLYDEPS_RECORD unset nothing is written."""
    import torch

    vadd, apply, factory, bound = (fdk.module(m) for m in ("vadd", "apply", "factory", "bound"))
    a, c = torch.zeros(1024), torch.zeros(1024)
    _call_and_note(vadd.axpy, a, c, 1024, 5)  # unset: no file
    record = tmp_path / "m.jsonl"
    monkeypatch.setenv("FLYDEPS_RECORD", str(record))
    assert not record.exists()
    _call_and_note(vadd.axpy, a, c, 1024, 3)
    _call_and_note(apply.apply, a, c, 1024, apply.double)
    _call_and_note(factory.compile_pair_sum(64), a, c, 1024)
    _call_and_note(bound.QUANT.launch, a, a, c, 1024)
    _call_and_note(bound.Quant(factor=5).launch, a, a, c, 1024)
    entries = _lines(record)[1:]
    assert [e["launcher"] for e in entries] == [
        f"{fdk.name}.vadd:axpy",
        f"{fdk.name}.apply:apply",  # named; its argument is not
        f"{fdk.name}.factory.compile_pair_sum.<locals>.launch",
        f"{fdk.name}.bound:QUANT.launch",
        f"{fdk.name}.bound.Quant.launch",
    ]
    assert ["unnamed" in e for e in entries] == [False, True, True, False, True]
    assert entries[0]["args"][-1] == 3
    assert entries[1]["unnamed"] == "argument 'fn': a value of type builtins.function has no manifest form"
    assert "not reachable by import path" in entries[2]["unnamed"]
    assert entries[2]["launcher"] == f"{fdk.name}.factory.compile_pair_sum.<locals>.launch"
    assert (
        entries[4]["unnamed"].startswith(f"the {fdk.name}.bound.Quant instance ")
        and "not reachable" in entries[4]["unnamed"]
    )
    # A build lists the unnamed ones as skipped, with the line and the reason, and builds nothing for them.
    assert len(manifest.read(record)) == 5
    assert sum(e.unnamed is not None for e in manifest.read(record)) == 3


def test_compile_hints_and_the_code_generation_environment_are_recorded_and_applied(
    fdk, compile_only, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key's compile hints (FlyDSL's thread-local overlay) and code-generation variables
    are in the entry; a build's :func:`manifest.applied` puts them back around the call and
    restores what was there (a variable the server did not set is unset meanwhile)."""
    import torch
    from flydsl.compiler.kernel_function import CompilationContext

    vadd = fdk.module("vadd")
    record = tmp_path / "m.jsonl"
    monkeypatch.setenv("FLYDEPS_RECORD", str(record))
    monkeypatch.setenv("FLYDSL_COMPILE_OPT_LEVEL", "2")
    a, c = torch.zeros(1024), torch.zeros(1024)
    with CompilationContext.compile_hints({"waves_per_eu": 2}):
        _call_and_note(vadd.axpy, a, c, 1024, 6)
    (entry,) = manifest.read(record)
    assert entry.field("hints") == {"waves_per_eu": 2} and entry.field("env") == {"FLYDSL_COMPILE_OPT_LEVEL": "2"}
    monkeypatch.setenv("FLYDSL_COMPILE_OPT_LEVEL", "3")
    monkeypatch.setenv("FLYDSL_KTRACE_ENABLE", "1")
    with manifest.applied(entry):
        assert CompilationContext.get_compile_hints() == {"waves_per_eu": 2}
        assert os.environ["FLYDSL_COMPILE_OPT_LEVEL"] == "2" and "FLYDSL_KTRACE_ENABLE" not in os.environ
    assert CompilationContext.get_compile_hints() == {}
    assert os.environ["FLYDSL_COMPILE_OPT_LEVEL"] == "3" and os.environ["FLYDSL_KTRACE_ENABLE"] == "1"


def test_a_file_that_is_not_a_manifest_is_left_alone_with_one_warning(
    fdk, compile_only, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import torch

    vadd = fdk.module("vadd")
    target = tmp_path / "notes.txt"
    target.write_text("my notes\n")
    monkeypatch.setenv("FLYDEPS_RECORD", str(target))
    a, c = torch.zeros(1024), torch.zeros(1024)
    with caplog.at_level(logging.WARNING, logger="flydsl_runtime"):
        _call_and_note(vadd.axpy, a, c, 1024, 3)
        _call_and_note(vadd.axpy, a, c, 1024, 4)
    assert target.read_text() == "my notes\n"
    (warning,) = [r.getMessage() for r in caplog.records if "FLYDEPS_RECORD" in r.getMessage()]
    assert str(target) in warning and "not an AOT manifest" in warning


TENSOR = {"tensor": {"dtype": "float32", "shape": [-1], "stride": [1]}}


def _entry(launcher: str, *args: object, **kwargs: object) -> dict:
    entry: dict = {"launcher": launcher, "args": list(args)}
    if kwargs:
        entry["kwargs"] = kwargs
    return entry


def _write(path: Path, *lines: object) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def _merge(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "flydsl_runtime.aot.record", "merge", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=_env())


def test_merge_is_a_union_in_first_seen_order_and_refuses_bad_lines(tmp_path: Path) -> None:
    """Duplicates (also written with other key order and spacing) are one line; the order is
    first occurrence, input by input; the output may be an input. A bad line anywhere: each
    is named ``file:line: what`` on stderr, exit 2, and the output is not written."""
    e1 = _entry("kernels.realworld.norms:rmsnorm", TENSOR, TENSOR, TENSOR, 0, 1)
    e2 = _entry("kernels.realworld.quant:QUANT.launch", TENSOR, TENSOR, 0, bias=1.0)
    e3 = _entry("kernels.realworld.norms:rmsnorm", TENSOR, TENSOR, TENSOR, 0, 2)
    e4 = {"launcher": "k.mod.make.<locals>.launch", "unnamed": "not reachable by import path"}
    reordered = (
        '{"kwargs": {"bias": 1.0},   "launcher": "kernels.realworld.quant:QUANT.launch", "args": '
        + json.dumps([TENSOR, TENSOR, 0])
        + "}"
    )
    a = _write(tmp_path / "a.jsonl", manifest.HEADER, e1, e2)
    b = _write(tmp_path / "b.jsonl", manifest.HEADER, reordered, e3, e1, e4, "")
    out = tmp_path / "m.jsonl"
    done = _merge(str(a), str(b), "-o", str(out))
    assert done.returncode == 0, done.stderr
    assert (
        done.stdout.strip()
        == f"aot merge into {out}: 4 specializations from 2 manifests (2 duplicates dropped, 1 unnamed)"
    )
    assert _lines(out) == [{"schema": manifest.SCHEMA}, e1, e2, e3, e4]
    assert all(line == manifest.canonical(json.loads(line)) for line in out.read_text().splitlines()[1:])
    in_place = _merge(str(a), str(out), "-o", str(a))  # the output one of the inputs
    assert in_place.returncode == 0 and _lines(a) == _lines(out)

    bad = _write(
        tmp_path / "bad.jsonl",
        manifest.HEADER,
        e1,
        '{"launcher": "kernels.realworld.norms:rmsnorm", "args": [',  # cut off
        {**e1, "colour": "red"},
        _entry("kernels.realworld.norms:rmsnorm", {"tensor": {"dtype": "float32", "shape": [-1]}}),
        _entry("rmsnorm", TENSOR),  # no module
        {**e1, "env": {"FLYDSL_COMPILE_OPT_LEVEL": 2}},
        [1, 2],
    )
    before = out.read_bytes()
    refused = _merge(str(a), str(bad), "-o", str(out))
    assert refused.returncode == 2 and refused.stdout == ""
    assert out.read_bytes() == before  # nothing written
    assert refused.stderr.splitlines() == [
        f"{bad}:3: not JSON (Expecting value at column 58)",
        f"{bad}:4: unknown field 'colour' (fields: launcher, args, kwargs, hints, env, environ, unnamed)",
        f"{bad}:5: args[0]: tensor {json.dumps({'tensor': {'dtype': 'float32', 'shape': [-1]}})} is not "
        "{dtype, shape, stride}",
        f"{bad}:6: launcher 'rmsnorm' is not an import path 'package.module:qualname'",
        f"{bad}:7: env.FLYDSL_COMPILE_OPT_LEVEL is 2, not a string",
        f"{bad}:8: a line is a JSON object, not list",
        f"aot merge: nothing written to {out}",
    ]
    other = _write(tmp_path / "v2.jsonl", '{"schema": "flydeps.aot-manifest/2"}', e1)
    headless = _write(tmp_path / "headless.jsonl", e1)
    refused = _merge(str(other), str(headless), "-o", str(tmp_path / "new.jsonl"))
    assert refused.returncode == 2 and not (tmp_path / "new.jsonl").exists()
    assert refused.stderr.splitlines()[:2] == [
        f"{other}:1: schema 'flydeps.aot-manifest/2': the first line must be {manifest.HEADER}",
        f"{headless}:1: no header: the first line must be {manifest.HEADER}",
    ]


def _record(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "flydsl_runtime.aot.record", "record", *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, env=_env())


def test_record_returns_the_commands_status_and_refuses_a_file_that_is_not_a_manifest(tmp_path: Path) -> None:
    """``aot record``: the command's exit status (a signal as 128 + its number), the
    manifest made with its header, the command given FLYDEPS_RECORD; bad input refused before
    the command runs (one line, exit 2, the file untouched)."""
    made = tmp_path / "new.jsonl"
    probe = "import os, sys; print(os.environ['FLYDEPS_RECORD']); sys.exit(7)"
    done = _record("--manifest", str(made), "--", sys.executable, "-c", probe)
    assert done.returncode == 7 and done.stdout.strip() == str(made), done.stderr
    assert made.read_text() == manifest.HEADER + "\n"
    assert done.stderr.strip() == f"aot record: {made} holds 0 specializations (0 new)"
    killed = _record("--manifest", str(made), "--", sys.executable, "-c", "import os; os.kill(os.getpid(), 9)")
    assert killed.returncode == 128 + 9
    notes = _write(tmp_path / "notes.txt", "my notes")
    refused = _record("--manifest", str(notes), "--", sys.executable, "-c", "print('ran')")
    assert refused.returncode == 2 and "ran" not in refused.stdout and notes.read_text() == "my notes\n"
    assert refused.stderr.splitlines() == [f"aot record: --manifest {notes}:1: not JSON (Expecting value at column 1)"]
    assert _record("--manifest", str(made)).returncode == 2
    missing = _record("--manifest", str(made), "--", str(tmp_path / "no-such-program"))
    assert missing.returncode == 127 and "no-such-program" in missing.stderr


def test_build_needs_exactly_one_source_and_names_bad_manifest_lines(tmp_path: Path) -> None:
    """Bad input to ``build --manifest``: a bad line is a ManifestError naming file:line before
    any work (nothing made); SPEC and --manifest together, or neither, are refused; an entry
    whose launcher no longer exists fails with its line and the rest still builds."""
    bad = _write(tmp_path / "bad.jsonl", manifest.HEADER, {"launcher": "x:y", "args": {}})
    out = tmp_path / "out"
    with pytest.raises(manifest.ManifestError, match=rf"^{bad}:2: args is dict, not a list$"):
        build(None, ["gfx942"], out, manifest=bad, progress=False)
    assert not out.exists()
    with pytest.raises(ValueError, match="exactly one of SPEC and --manifest"):
        build("spec.py:items", ["gfx942"], out, manifest=bad, progress=False)
    with pytest.raises(ValueError, match="exactly one of SPEC and --manifest"):
        build(None, ["gfx942"], out, progress=False)


def test_an_entry_whose_launcher_is_gone_fails_with_its_line(tmp_path: Path, rocm_root: Path) -> None:
    record = _write(
        tmp_path / "m.jsonl",
        manifest.HEADER,
        _entry("kernels.realworld.softmax:softmax_w4", TENSOR, TENSOR, 0),
        _entry("kernels.realworld.softmax:softmax_w8", TENSOR, TENSOR, 0),
        _entry("kernels.nowhere:launch", TENSOR),
    )
    summary = _build(record, "gfx942", tmp_path / "out")
    outcomes = summary["outcomes"]
    assert [status for status, _error in outcomes] == ["built", "failed", "failed"], summary["lines"]
    assert outcomes[1][1] == (
        f"ValueError: {record}:3: kernels.realworld.softmax:softmax_w8: kernels.realworld.softmax has no attribute "
        "'softmax_w8' (renamed or removed since it was recorded?)"
    )
    assert outcomes[2][1].startswith(
        f"ValueError: {record}:4: kernels.nowhere:launch: module kernels.nowhere cannot be imported"
    )


# --- end to end, through the CLI ------------------------------------------------------------


def _wired() -> bool:
    miss = (ROOT / "src/flydsl_runtime/launch/miss.py").read_text()
    cli = (ROOT / "src/flydeps/cli.py").read_text()
    return "note_call" in miss and '"record"' in cli and "--manifest" in cli


@pytest.mark.skipif(
    not _wired(), reason="runs once note_call is wired into launch/miss.py and record/merge/--manifest into the CLI"
)
def test_end_to_end_record_merge_build_serve(tmp_path: Path, rocm_root: Path) -> None:
    """The issue's workflow with the real commands: two servers recorded by ``flydeps aot
    record`` (exit status theirs), ``flydeps aot merge``, ``flydeps aot build --manifest`` for
    two arches, then strict processes served without a trace."""
    flydeps = [sys.executable, "-m", "flydeps", "aot"]
    env = _env(FLYDEPS_CACHE_DIR=str(tmp_path / "cache"), FLYDSL_RUNTIME_CACHE_DIR=str(tmp_path / "cache/flydsl"))
    for subset in ("norms", "softmax"):
        command = [
            *flydeps,
            "record",
            "--manifest",
            str(tmp_path / f"{subset}.jsonl"),
            "--",
            sys.executable,
            str(SERVE),
            subset,
        ]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert "specializations" in done.stderr and done.stdout.startswith("served")
    failing = subprocess.run(
        [
            *flydeps,
            "record",
            "--manifest",
            str(tmp_path / "x.jsonl"),
            "--",
            sys.executable,
            "-c",
            "raise SystemExit(7)",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert failing.returncode == 7
    merged = tmp_path / "m.jsonl"
    done = subprocess.run(
        [*flydeps, "merge", str(tmp_path / "norms.jsonl"), str(tmp_path / "softmax.jsonl"), "-o", str(merged)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "aot"
    command = [
        *flydeps,
        "build",
        "--manifest",
        str(merged),
        "--arch",
        "gfx942,gfx950",
        "--out",
        str(out),
        "--jobs",
        "2",
        "--no-progress",
    ]
    done = subprocess.run(command, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == f"aot build into {out}: 12 built, 0 reused, 0 failed, 1 skipped (of 12)"
    assert done.stdout.splitlines()[1].startswith("skipped: kernels.realworld.softmax.build_softmax.<locals>.softmax (")
    for arch in ("gfx942", "gfx950"):
        assert _strict(out, arch) == ["0", "AotMissError"]
    neither = subprocess.run(
        [*flydeps, "build", "--arch", "gfx942", "--out", str(out)],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert neither.returncode == 2 and len(neither.stderr.splitlines()) == 1
