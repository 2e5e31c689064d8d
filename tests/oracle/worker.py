"""One oracle worker process: plan the mutations, or run a batch of them on real compiles.

Contract
--------
``python tests/oracle/worker.py plan OUT.json`` imports a copy of the real-world package and
writes every mutation (:mod:`plan`). ``python tests/oracle/worker.py run PLAN.json I J ...``
runs the mutations with those indices and prints one JSON :class:`~model.Outcome` per line.

Each mutation runs on its own fresh copy of ``examples/kernels/realworld`` imported under a
new package name (:class:`PackageCopy`), so nothing one mutation did can reach the next;
the mutation itself is undone exactly afterwards (:mod:`apply`) and a fresh trace after the
restore must give the baseline IR again. Per mutation (:func:`run_one`):

1. baseline: FlyDSL's IR key of a fresh plain-FlyDSL trace (:func:`truth_key`), then the
   flydsl_runtime launcher's first call (a miss; its entry must carry that IR key) and a
   warm call (must be a hit);
2. apply the mutation, call the launcher the way the caller holds it, and read whether it
   retraced (``cache_info().misses`` moved), raised ``GlobalDriftError`` or hit;
3. a fresh start in the mutated state: the launcher's in-memory state cleared
   (``cache_clear()``), the persistent index kept, the same call again (what a new
   process does: served from a row, or traced);
4. FlyDSL's IR key of a fresh plain trace of the mutated state: the ground truth. An entry
   that step 2 or 3 served from the persistent index with another IR is STALE; one they
   traced with another IR, or a fresh start that raised, is ERROR;
5. restore, and check a fresh trace gives the baseline IR again.

With ``FLYDEPS_ORACLE_NEW_PROCESS=1`` (``run.py --new-process``), a mutation a new process
can reproduce (a file edit, a reload, an environment variable, an argument, a data file) also runs in
two new processes (``worker.py fresh``): one on the unmutated copy before step 1, whose row
is keyed by the state any new process has, and one after the mutation, which imports the
edited copy, finds that index, makes the call and then its own fresh plain trace. Its IR
must be that trace's: loaded from the index with other IR is STALE, traced with other IR,
or failing, ERROR, unless plain FlyDSL fails the same way in that process (the edited code
does not trace in a new process, while the parent's caller still holds the launcher from
before a reload): then the new process is reported as invalid, beside the verdict. The
control must come out stale there too.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
import types
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
PACKAGE = HERE.parents[1] / "examples" / "kernels" / "realworld"

from apply import applied, env_applied, value_of  # noqa: E402
from flydsl.compiler.jit_function import JitFunction  # noqa: E402
from model import LINE_EDIT_KINDS, Mutation, Outcome, is_user_data, mutation_from_json, outcome_to_json, verdict  # noqa: E402
from sites import source_sites, used_names  # noqa: E402
from subjects import BY_NAME, Subject, call_args  # noqa: E402

from flydeps.builds import protocol as build  # noqa: E402
from flydeps.errors import GlobalDriftError  # noqa: E402
from flydeps.keys.fingerprint import fingerprint_roots  # noqa: E402
from flydsl_runtime import Launcher  # noqa: E402


class PackageCopy:
    """A private copy of the real-world package under a unique name, imported fresh."""

    def __init__(self, scratch: Path) -> None:
        self.name = f"rw_{uuid.uuid4().hex[:10]}"
        self.root = scratch / self.name
        shutil.copytree(PACKAGE, self.root, ignore=shutil.ignore_patterns("__pycache__"))
        self._mtime_step = 0
        self._names: set[str] | None = None

    def module(self, short: str) -> types.ModuleType:
        return importlib.import_module(f"{self.name}.{short}")

    def path(self, short: str) -> Path:
        return self.root / f"{short}.py"

    def drop(self) -> None:
        for mod in [m for m in sys.modules if m == self.name or m.startswith(self.name + ".")]:
            del sys.modules[mod]
        shutil.rmtree(self.root, ignore_errors=True)

    def _write(self, short: str, data: bytes) -> types.ModuleType:
        path = self.path(short)
        path.write_bytes(data)
        self._mtime_step += 2  # a new mtime, so no bytecode or rewrite cache reuses old code
        stamp = time.time() + self._mtime_step
        os.utime(path, (stamp, stamp))
        importlib.invalidate_caches()
        return importlib.reload(self.module(short))

    @contextlib.contextmanager
    def edited(self, short: str, start: int, end: int, old: str, new: str) -> Iterator[None]:
        original = self.path(short).read_bytes()
        text = original.decode()
        if text[start:end] != old:
            raise AssertionError(f"{short}.py[{start}:{end}] is {text[start:end]!r}, expected {old!r}")
        self._write(short, (text[:start] + new + text[end:]).encode())
        try:
            yield
        finally:
            self._write(short, original)
            if self.path(short).read_bytes() != original:
                raise AssertionError(f"{short}.py was not restored exactly")

    @contextlib.contextmanager
    def data_edited(self, rel: str, new: str | None) -> Iterator[None]:
        """The package's data file ``rel`` holds ``new`` (None: removed); afterwards its exact
        old bytes again, or its absence. No module is reloaded: the trace reads the file."""
        path = self.root / rel
        original = path.read_bytes() if path.exists() else None
        if new is None:
            path.unlink()
        else:
            path.write_text(new)
        try:
            yield
        finally:
            if original is None:
                path.unlink(missing_ok=True)
            else:
                path.write_bytes(original)
            if (path.read_bytes() if path.exists() else None) != original:
                raise AssertionError(f"{rel} was not restored exactly")

    @contextlib.contextmanager
    def reloaded(self, short: str) -> Iterator[None]:
        importlib.reload(self.module(short))
        yield

    def definition_source(self, fn: types.FunctionType) -> tuple[str, int]:
        """The dedented source of ``fn``'s definition, decorators included, and its first line."""
        text = Path(fn.__code__.co_filename).read_text()
        tree = ast.parse(text)
        first = fn.__code__.co_firstlineno
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name == fn.__name__:
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                if start == first or node.lineno == first:
                    lines = text.splitlines(keepends=True)[start - 1 : node.end_lineno]
                    return textwrap.dedent("".join(lines)), start
        raise LookupError(f"no definition of {fn.__qualname__} at line {first} of {fn.__code__.co_filename}")

    def import_lines(self, fn: types.FunctionType) -> list[str]:
        """The top-level import statements of ``fn``'s module, one line each."""
        tree = ast.parse(Path(fn.__code__.co_filename).read_text())
        return [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]

    def first_edit(self, fn: types.FunctionType) -> tuple[int, int, str, str]:
        """The first semantic edit of ``fn``'s body (a literal or an operator), for variants."""
        source, _ = self.definition_source(fn)
        for site in source_sites(source, self.names()):
            if site.kind in ("edit+reload", "unrelated function") and site.detail.startswith(fn.__name__):
                return site.start, site.end, site.old, site.new
        raise LookupError(f"no literal or operator to edit in {fn.__qualname__}")

    def names(self) -> set[str]:
        if self._names is None:
            names = used_names([ast.parse(p.read_text()) for p in sorted(self.root.glob("*.py"))])
            # what callers outside the package use: the subjects' launchers
            self._names = names | {part for s in BY_NAME.values() for part in s.path.split(".")}
        return self._names

    def resolve_subject(self, subject: Subject) -> tuple[object, Launcher, object]:
        """What a caller holds: ``(callable, launcher, bound instance or None)``."""
        obj: object = self.module(subject.module)
        owner = None
        for part in subject.path.split("."):
            owner, obj = obj, getattr(obj, part)
        if isinstance(obj, Launcher):
            return obj, obj, None
        launcher = vars(type(owner))[subject.path.split(".")[-1]]
        return obj, launcher, owner

    def call_other(self, subject_name: str, width: int) -> None:
        """Another managed launcher sharing the helpers traces (with another width) first."""
        other = BY_NAME[subject_name]
        callable_, _, _ = self.resolve_subject(other)
        args, kwargs = call_args(other, {other.width_param: width} if other.width_param else {})
        cast(Callable[..., object], callable_)(*args, **kwargs)


def truth_key(launcher: Launcher, bound_self: object, args: tuple, kwargs: dict) -> str:
    """FlyDSL's IR key from a fresh trace by a plain ``JitFunction`` of the same function.

    A new ``JitFunction`` sharing only the (already AST-rewritten) Python function: its
    signature, memory cache and last-compiled state start empty, so nothing of an earlier
    call is reused; FlyDSL's disk cache makes an unchanged IR cost no second compile.

    The trace runs under flydeps' build protocol, as every trace does in a process where
    flydsl_runtime is installed: what it writes to shared data (a memo, a trace log) is a
    build's own effect, exactly as the launcher's own traces are, not a user's change.
    """
    owner = type(bound_self) if bound_self is not None else None
    start = build.begin(fingerprint_roots(launcher._roots(owner)))
    try:
        return _plain_trace(launcher, bound_self, args, kwargs)
    finally:
        build.finish(start)


def _plain_trace(launcher: Launcher, bound_self: object, args: tuple, kwargs: dict) -> str:
    jf = launcher.jit_function
    fresh = object.__new__(JitFunction)
    fresh.__dict__.update(jf.__dict__)
    fresh.compile_hints = dict(jf.compile_hints)
    fresh.cache_manager, fresh._sig, fresh._has_self_param = None, None, False
    fresh._backend_target, fresh._mem_cache, fresh._last_compiled = None, {}, None
    full = (bound_self, *args) if bound_self is not None else args
    fresh._compile_or_execute(full, dict(kwargs), execute=False)
    return fresh._last_compiled[0]


@contextlib.contextmanager
def lines_run(root: Path) -> Iterator[set[tuple[str, int]]]:
    """``(file, line)`` of every line of the package copy that runs inside the block."""
    prefix, seen = str(root), set()

    def local(frame: types.FrameType, event: str, arg: object) -> Any:
        if event == "line":
            seen.add((frame.f_code.co_filename, frame.f_lineno))
        return local

    def calls(frame: types.FrameType, event: str, arg: object) -> Any:
        return local if frame.f_code.co_filename.startswith(prefix) else None

    sys.settrace(calls)
    try:
        yield seen
    finally:
        sys.settrace(None)


def _line_ran(m: Mutation, pkg: PackageCopy, ran: set[tuple[str, int]]) -> bool | None:
    if m.kind not in LINE_EDIT_KINDS:
        return None
    return (str(pkg.path(m.module)), int(m.where.rpartition(":")[2])) in ran


class _Reasons(logging.Handler):
    """The launcher's own recompile reasons (``retracing ...: why``), kept for the report."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _decide(call: object, launcher: Launcher, args: tuple, kwargs: dict) -> tuple[str, str]:
    before = launcher.cache_info().misses
    reasons, logger = _Reasons(), logging.getLogger("flydsl_runtime")
    logger.addHandler(reasons)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        call(*args, **kwargs)  # type: ignore[operator]
    except GlobalDriftError as exc:
        return "drift", str(exc)
    except Exception as exc:  # noqa: BLE001 - any failure is a fact for the verdict
        return "error", f"{type(exc).__name__}: {exc}"
    finally:
        logger.removeHandler(reasons)
        logger.setLevel(level)
    return ("retrace" if launcher.cache_info().misses != before else "hit"), " | ".join(reasons.lines)


def _truth(launcher: Launcher, bound_self: object, args: tuple, kwargs: dict) -> tuple[str | None, str]:
    try:
        return truth_key(launcher, bound_self, args, kwargs), ""
    except Exception as exc:  # noqa: BLE001 - the mutated code may not trace at all
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"


# What a launcher logs when it serves a call from the persistent index (flydsl_runtime.launch.jit).
_LOADED = "loaded from the persistent index"
# Mutations a new process reproduces from the files and the environment alone (a file edit,
# a reload, an environment variable, an argument): with FLYDEPS_ORACLE_NEW_PROCESS=1 each is
# also run in a new process that imports the edited copy and finds the persistent index.
NEW_PROCESS_OPS = frozenset({"edit", "reload", "env", "args", "data"})


def _new_process(
    m: Mutation, pkg: PackageCopy, plan: tuple[Path, int] | None, *, mutated: bool
) -> subprocess.Popen | None:
    """Start the call in a new process (:func:`fresh_main`; read it with
    :func:`_new_process_facts`), or None when not asked for (``FLYDEPS_ORACLE_NEW_PROCESS``)
    or when a new process cannot reproduce ``m`` (``NEW_PROCESS_OPS``)."""
    if plan is None or m.op not in NEW_PROCESS_OPS or os.environ.get("FLYDEPS_ORACLE_NEW_PROCESS") != "1":
        return None
    mode = "mutated" if mutated else "baseline"
    command = [sys.executable, str(Path(__file__).resolve()), "fresh", mode, str(plan[0]), str(plan[1]), str(pkg.root)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _new_process_facts(proc: subprocess.Popen | None) -> dict | None:
    """The new process's facts: the IR it ran, whether it loaded it from the persistent
    index, the IR of its own fresh trace, ``stale`` when they differ; or ``{"error"}``."""
    if proc is None:
        return None
    out, err = proc.communicate(timeout=600)
    lines = [line for line in out.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit {proc.returncode}: {err.strip()[-300:]}"}
    facts: dict = json.loads(lines[-1])
    return facts


def fresh_main(mode: str, plan_path: Path, position: int, root: Path) -> dict:
    """In a new process: import the package copy at ``root`` as it is on disk, with the
    persistent index as earlier processes left it, make mutation ``position``'s call
    (``mode`` ``baseline``: the call before the mutation, which writes the row a later
    process may load; ``mutated``: with its argument, the files and environment the parent
    holds mutated), then a fresh plain trace of the same call:
    ``{"ir", "loaded", "truth", "stale", "why"}`` or ``{"error"}``."""
    m = [mutation_from_json(d) for d in json.loads(plan_path.read_text())][position]
    sys.path.insert(0, str(root.parent))
    pkg = PackageCopy.__new__(PackageCopy)
    pkg.name, pkg.root, pkg._mtime_step, pkg._names = root.name, root, 0, None
    subject = BY_NAME[m.subject]
    overrides = {m.payload[0]: value_of(m.payload[1])} if m.op == "args" and mode == "mutated" else {}
    args, kwargs = call_args(subject, {**{k: value_of(v) for k, v in m.base_args}, **overrides})
    with env_applied(m.base_env):  # as the parent holds it (and, mutated, the mutation's own)
        call, launcher, bound_self = pkg.resolve_subject(subject)
        decision, why = _decide(call, launcher, args, kwargs)
        if decision == "error":
            # The edited code may not trace at all in a new process while the parent's caller
            # still holds the old launcher (a reload does not replace held references): plain
            # FlyDSL must then raise the same in this process, else the failure is flydeps'.
            truth, note = _truth(launcher, bound_self, args, kwargs)
            if truth is None and note[:120] == why[:120]:
                return {"invalid": f"the mutated code raises here under plain FlyDSL too: {note}"[:400]}
        if decision != "retrace":
            return {"error": f"the first call in a new process {decision}: {why}"[:400]}
        ir = launcher.entries()[-1].ir_key
        truth, note = _truth(launcher, bound_self, args, kwargs)
    if truth is None:
        return {"error": f"its fresh trace failed: {note}"}
    return {"ir": ir, "loaded": _LOADED in why, "truth": truth, "stale": ir != truth, "why": why[:300]}


def run_one(m: Mutation, scratch: Path, plan: tuple[Path, int] | None = None) -> Outcome:
    """``plan``: (plan file, this mutation's position), for the new-process step."""
    started = time.perf_counter()
    pkg = PackageCopy(scratch)
    sys.path.insert(0, str(scratch))
    environ = dict(os.environ)
    try:
        with env_applied(m.base_env):
            outcome = _run(m, pkg, started, plan)
        if dict(os.environ) != environ:
            return Outcome(m, "ERROR", outcome.decision, note="the environment was not restored exactly")
        return outcome
    except Exception as exc:  # noqa: BLE001 - the harness reports, never stops the batch
        note = f"harness: {type(exc).__name__}: {exc} | {traceback.format_exc(limit=-3)}"
        return Outcome(m, "ERROR", note=note, seconds=time.perf_counter() - started)
    finally:
        sys.path.remove(str(scratch))
        pkg.drop()


def _run(m: Mutation, pkg: PackageCopy, started: float, plan: tuple[Path, int] | None = None) -> Outcome:
    subject = BY_NAME[m.subject]
    base_kwargs = {k: value_of(v) for k, v in m.base_args}
    args, kwargs = call_args(subject, base_kwargs)
    call, launcher, bound_self = pkg.resolve_subject(subject)
    ran: set[tuple[str, int]] = set()
    # A new process on the unmutated copy first: the row it writes is keyed by the state a
    # new process has (this process's own traces write memos its rows' keys then cover).
    before_process = _new_process(m, pkg, plan, mutated=False)
    if m.kind in LINE_EDIT_KINDS:  # its own trace: a trace function changes debug-info locations
        with lines_run(pkg.root) as ran:
            truth_key(launcher, bound_self, args, kwargs)
    base = truth_key(launcher, bound_self, args, kwargs)
    first, note = _decide(call, launcher, args, kwargs)
    warm, warm_note = _decide(call, launcher, args, kwargs)
    if first != "retrace" or warm != "hit" or launcher.entries()[0].ir_key != base:
        why = f"baseline unstable: first call {first} {note}, warm call {warm} {warm_note}"
        return Outcome(m, "ERROR", decision=warm, note=why, seconds=time.perf_counter() - started)
    baseline_process = _new_process_facts(before_process)
    with applied(m, pkg) as overrides:
        m_args, m_kwargs = call_args(subject, {**base_kwargs, **overrides})
        before = set(map(id, launcher.entries()))
        decision, why = _decide(call, launcher, m_args, m_kwargs)
        added = [e.ir_key for e in launcher.entries() if id(e) not in before]
        # A process that starts in the mutated state: nothing in memory, the persistent index
        # as the calls so far left it (the baseline's row, and the row of the call above).
        launcher.cache_clear()
        fresh, fresh_why = _decide(call, launcher, m_args, m_kwargs)
        fresh_added = [e.ir_key for e in launcher.entries()]
        truth, truth_note = _truth(launcher, bound_self, m_args, m_kwargs)
        new_process = _new_process_facts(_new_process(m, pkg, plan, mutated=True))
    restored, restore_note = _truth(launcher, bound_self, args, kwargs)
    facts: dict[str, object] = {
        "base": base,
        "truth": truth,
        "restored": restored,
        "line_ran": _line_ran(m, pkg, ran),
        "fresh_start": fresh,
        "fresh_loaded": _LOADED in fresh_why,
        # the fresh start ran IR a fresh trace does not give (the control subject must)
        "fresh_stale": truth is not None and any(ir != truth for ir in fresh_added),
    }
    if new_process is not None:
        facts["new_process"], facts["baseline_process"] = new_process, baseline_process
    changed = truth is not None and truth != base
    result = verdict(decision, ir_changed=changed, truth_failed=truth is None, user_data=is_user_data(m))
    note = (why or truth_note)[:600]
    if decision == "retrace" and truth is not None and any(ir != truth for ir in added):
        if _LOADED in why:  # served from the persistent index: IR the mutated code does not give
            result, note = "STALE", f"the persistent index served IR {added[-1][:10]}, a fresh trace gives {truth[:10]}"
        else:
            result, note = "ERROR", "the launcher's new entry has another IR key than a fresh FlyDSL trace"
    if truth is not None and result != "STALE":
        if fresh == "error":
            result, note = "ERROR", f"a fresh start in the mutated state failed: {fresh_why}"[:600]
        elif any(ir != truth for ir in fresh_added):
            if _LOADED in fresh_why:
                result = "STALE"
                note = f"a fresh start loaded IR {fresh_added[-1][:10]} from the persistent index"
                note += f", a fresh trace gives {truth[:10]}"
            else:
                result, note = "ERROR", "a fresh start traced another IR key than a fresh FlyDSL trace"
    if new_process is not None and truth is not None and result != "STALE":
        if baseline_process is None or baseline_process.get("error") or baseline_process["stale"]:
            result, note = "ERROR", f"the new process on the unmutated copy: {baseline_process}"[:600]
        elif new_process.get("invalid"):
            note = f"{note} | {new_process['invalid']}".strip(" |")[:600]
        elif new_process.get("error"):
            result, note = "ERROR", f"a new process in the mutated state failed: {new_process['error']}"[:600]
        elif new_process["stale"]:
            result = "STALE" if new_process["loaded"] else "ERROR"
            note = (
                f"a new process {'loaded' if new_process['loaded'] else 'traced'} IR {new_process['ir'][:10]}, "
                f"its own fresh trace gives {new_process['truth'][:10]}"
            )
    if restored != base:
        result, note = "ERROR", f"restore was not exact: fresh trace after restore gives {restored} {restore_note}"
    return Outcome(m, result, decision, changed, note, time.perf_counter() - started, facts)


def _setup_env() -> None:
    """Real compiles without a GPU; the FlyDSL disk cache is the run's own directory."""
    root = os.environ.get("ROCM_PATH") or os.environ.get("FLYDEPS_ROCM_ROOT") or "/opt/flydeps-rocm"
    os.environ["ROCM_PATH"] = root
    os.environ.setdefault("ARCH", "gfx942")
    os.environ["COMPILE_ONLY"] = "1"
    if not (Path(root) / "llvm/bin/ld.lld").exists():
        raise SystemExit(f"oracle: no ROCm compile root at {root}: run .ci/setup_rocm.sh (lld-19, rocm-device-libs)")


def main(argv: list[str]) -> int:
    _setup_env()
    scratch = Path(tempfile.mkdtemp(prefix="flydeps-oracle-"))
    try:
        if argv[:1] == ["plan"] and len(argv) == 2:
            from plan import write_plan

            write_plan(PackageCopy(scratch), scratch, Path(argv[1]))
            return 0
        if argv[:1] == ["run"] and len(argv) >= 2:
            plan = [mutation_from_json(d) for d in json.loads(Path(argv[1]).read_text())]
            for index in argv[2:]:
                print(outcome_to_json(run_one(plan[int(index)], scratch, (Path(argv[1]), int(index)))), flush=True)
            return 0
        if argv[:1] == ["fresh"] and len(argv) == 5 and argv[1] in ("baseline", "mutated"):
            print(json.dumps(fresh_main(argv[1], Path(argv[2]), int(argv[3]), Path(argv[4]))), flush=True)
            return 0
        print(
            "usage: worker.py plan OUT.json | worker.py run PLAN.json INDEX... "
            "| worker.py fresh baseline|mutated PLAN.json INDEX ROOT",
            file=sys.stderr,
        )
        return 2
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
