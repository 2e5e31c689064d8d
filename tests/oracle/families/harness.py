"""Run family cases on real FlyDSL compiles: in this process, and in new processes.

Contract
--------
``python tests/oracle/families/harness.py run FAMILY [CASE ...]`` runs the family's cases
(all, or those named) one after another in this process and prints one JSON
:class:`~families.model.Outcome` per line. ``... fresh baseline|mutated FAMILY CASE ROOT``
is the new-process step (:func:`fresh_main`). Each case (:func:`run_case`):

1. its package is written under a unique name (:class:`Package`); with
   ``FLYDEPS_ORACLE_NEW_PROCESS=1`` a new process on the unmutated files fills an index of
   the case's own (``FLYDEPS_CACHE_DIR``), so only the baseline row is in it;
2. ``setup``; the baseline: FlyDSL's IR key of a fresh plain trace (``truth_key`` of
   ``tests/oracle/worker.py``), a first call (a miss, that IR) and a warm call (a hit);
3. ``mutate`` (its ``call()`` checkpoints are judged), then the judged call as a caller
   makes it (``mod.launch(...)``, looked up again), a fresh start (``cache_clear()``, the
   persistent index kept: what a new process finds) and, with the variable set, a new
   process in the mutated state (files as edited, ``startup`` run before the call, the
   parent's environment) that compares what it ran with its own fresh trace;
4. ``restore``; the environment, torch's global switches and ``sys.modules`` put back.

Every verdict is :func:`families.model.judge` of an observed :class:`~families.model.Call`.
"""

from __future__ import annotations

import contextvars
import dataclasses
import functools
import importlib
import json
import logging
import operator
import os
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import types
import unittest.mock
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ORACLE = HERE.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]  # run as a script: no `model` clash
sys.path.insert(0, str(ORACLE))

import flydsl.expr as fx  # noqa: E402
import torch  # noqa: E402
from worker import _LOADED, _Reasons, _setup_env, truth_key  # noqa: E402  (the runtime oracle's harness)

import flydeps  # noqa: E402
import flydsl_runtime.flyc as flyc  # noqa: E402
from families import registry  # noqa: E402
from families.model import Call, Case, Outcome, judge, outcome_to_json, worst  # noqa: E402
from flydeps.errors import GlobalDriftError  # noqa: E402

ROWS, WIDTH = 64, 4
KERNEL_NAMES = frozenset({"rmsnorm_kernel", "softmax_kernel", "quant_kernel", "gather_kernel"})


class Package:
    """A case's kernel package, written under a unique import name in ``scratch``."""

    def __init__(self, root: Path) -> None:
        self.root, self.name, self._step = root, root.name, 0

    @classmethod
    def write(cls, case: Case, scratch: Path) -> Package:
        pkg = cls(scratch / f"fam_{uuid.uuid4().hex[:10]}")
        for rel, text in case.files:
            path = pkg.root / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text.replace("{PKG}", pkg.name))
        return pkg

    def mod(self, short: str) -> types.ModuleType:
        return importlib.import_module(f"{self.name}.{short}")

    def edit(self, rel: str, old: str, new: str, *, reload: bool = True) -> None:
        """Replace the one occurrence of ``old`` in the file ``rel``; reload its module."""
        path = self.root / rel
        text = path.read_text()
        if text.count(old) != 1:
            raise AssertionError(f"{rel}: {old!r} occurs {text.count(old)} times, expected once")
        self._step += 2  # a new mtime: no bytecode cache reuses the old code
        path.write_text(text.replace(old, new))
        os.utime(path, (time.time() + self._step, time.time() + self._step))
        importlib.invalidate_caches()
        if reload and rel.endswith(".py"):
            short = rel[:-3].replace("/", ".").removesuffix(".__init__")
            importlib.reload(self.mod(short) if short != "__init__" else importlib.import_module(self.name))

    def target(self, case: Case) -> Any:
        module, _, attr = case.target.rpartition(".")
        return getattr(self.mod(module), attr)

    def drop(self) -> None:
        for name in [m for m in sys.modules if m == self.name or m.startswith(self.name + ".")]:
            del sys.modules[name]


def make_args() -> tuple:
    return (torch.zeros(ROWS * WIDTH, dtype=torch.float32), torch.zeros(ROWS * WIDTH, dtype=torch.float32), ROWS)


@contextmanager
def _reasons() -> Iterator[_Reasons]:
    handler, logger = _Reasons(), logging.getLogger("flydsl_runtime")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@contextmanager
def profiled(root: Path, hooks: dict[str, Callable[[int], None]]) -> Iterator[dict[str, int]]:
    """Count calls of the package's functions in this thread by name; ``hooks[name](n)`` runs
    at the n-th entry of ``name`` (an A-B-A race, a trace count)."""
    prefix, counts = str(root), dict[str, int]()

    def profile(frame: types.FrameType, event: str, arg: object) -> None:
        if event == "call" and frame.f_code.co_filename.startswith(prefix):
            name = frame.f_code.co_name
            counts[name] = counts.get(name, 0) + 1
            if name in hooks:
                hooks[name](counts[name])

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(previous)


def _served_on_hit(entries: list) -> tuple[str | None, str]:
    irs = {e.ir_key for e in entries}
    if len(irs) == 1:
        return irs.pop(), ""
    valid = {e.ir_key for e in entries if e.fingerprint is not None and e.fingerprint.guard().check()}
    if len(valid) == 1:
        return valid.pop(), ""
    return None, f"hit with {len(entries)} entries of {len(irs)} IRs, {len(valid)} of them valid now"


def _truth(launcher: Any) -> tuple[str | None, str]:
    try:
        return truth_key(launcher, None, make_args(), {}), ""
    except Exception as exc:  # noqa: BLE001 - the mutated code may not trace at all
        return None, f"{type(exc).__name__}: {str(exc)[:200]}"


def observe(pkg: Package, case: Case, label: str, base: str | None, *, count: bool = False, truth: bool = True) -> Call:
    """Make the call a caller makes and judge-ready facts about it."""
    launcher = pkg.target(case)
    before, misses = {id(e) for e in launcher.entries()}, launcher.cache_info().misses
    decision, note, traces = "", "", None
    with _reasons() as why, profiled(pkg.root, {}) as counts:
        try:
            launcher(*make_args())
            if count:  # two more calls, as a caller's loop makes them
                launcher(*make_args())
                launcher(*make_args())
        except GlobalDriftError as exc:
            decision, note = "drift", str(exc)[:300]
        except Exception as exc:  # noqa: BLE001 - any failure is a fact for the verdict
            decision, note = "error", f"{type(exc).__name__}: {str(exc)[:300]}"
    if count:
        traces = sum(n for name, n in counts.items() if name in KERNEL_NAMES)
    served = None
    if not decision:
        entries = launcher.entries()
        if launcher.cache_info().misses != misses:
            added = [e for e in entries if id(e) not in before]
            served = added[0].ir_key if added else None
            decision = "loaded" if any(_LOADED in line for line in why.lines) else "retrace"
        else:
            decision = "hit"
            served, note = _served_on_hit(entries)
        note = note or " | ".join(why.lines)[:300]
        if decision == "retrace" and not why.lines:
            note = "no recompile reason logged: a new launcher object, or the first call after cache_clear()"
    true_ir, truth_note = _truth(launcher) if truth else (None, "")
    return Call(label, decision, served, true_ir, base, note or truth_note, traces)


def in_thread(fn: Callable[[], object]) -> object:
    """Run ``fn`` in a new thread (a fresh context), return its result or raise its error."""
    box: dict[str, object] = {}

    def body() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller
            box["error"] = exc

    thread = threading.Thread(target=body)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box.get("value")


class Session:
    """What a case's statements see (``pkg``, ``mod``, ``call``, ``during_trace``, ...) and
    the checkpoints its ``call()`` made."""

    def __init__(self, case: Case, pkg: Package, base: str | None) -> None:
        self.case, self.pkg, self.base = case, pkg, base
        self.checkpoints: list[tuple[Call, bool, bool | None]] = []  # (call, judged, reaches)
        self.namespace: dict[str, Any] = {
            "pkg": pkg,
            "mod": pkg.mod,
            "call": self.call,
            "during_trace": self.during_trace,
            "in_thread": in_thread,
            "make_args": make_args,
            **{m.__name__: m for m in (os, sys, importlib, functools, operator, threading, contextvars, logging)},
            **{"types": types, "json": json, "mock": unittest.mock, "torch": torch, "fx": fx, "flyc": flyc},
            "flydeps": flydeps,
        }

    def run(self, statements: str) -> None:
        exec(compile(statements, f"<{self.case.label}>", "exec"), self.namespace)  # noqa: S102 - the case's own code

    def call(self, label: str = "intermediate call", judged: bool = True, reaches: bool | None | str = "case") -> Call:
        """An intermediate call, judged (with ``reaches``, default the case's) at the end."""
        observed = observe(self.pkg, self.case, label, self.base, truth=judged)
        self.checkpoints.append((observed, judged, self.case.reaches if isinstance(reaches, str) else reaches))
        return observed

    def during_trace(
        self, patch: Callable[[], None], at: tuple[str, int], restore: Callable[[], None], until: tuple[str, int]
    ) -> Call:
        """The next call, while another thread runs ``patch`` when the trace enters function
        ``at[0]`` for the ``at[1]``-th time and ``restore`` at ``until`` (an A-B-A race).
        The raced call itself is recorded, not judged: plain FlyDSL races the same way."""

        def at_count(action: Callable[[], None], wanted: int) -> Callable[[int], None]:
            def hook(n: int) -> None:
                if n == wanted:
                    in_thread(action)

            return hook

        hooks = {at[0]: at_count(patch, at[1]), until[0]: at_count(restore, until[1])}
        launcher = self.pkg.target(self.case)
        with profiled(self.pkg.root, hooks) as counts:
            try:
                launcher(*make_args())
                note = f"raced call ran; {at[0]} entered {counts.get(at[0], 0)}x, {until[0]} {counts.get(until[0], 0)}x"
            except Exception as exc:  # noqa: BLE001
                note = f"raced call raised {type(exc).__name__}: {exc}"[:300]
        if counts.get(at[0], 0) < at[1] or counts.get(until[0], 0) < until[1]:
            raise AssertionError(f"the race did not happen as planned: {note}")
        raced = Call(
            "raced call",
            "retrace",
            launcher.entries()[-1].ir_key if launcher.entries() else None,
            None,
            self.base,
            note,
        )
        self.checkpoints.append((raced, False, None))
        return raced


@contextmanager
def global_state_kept() -> Iterator[None]:
    """The environment and torch's global switches, as they were, afterwards."""
    environ = dict(os.environ)
    dtype, det = torch.get_default_dtype(), torch.are_deterministic_algorithms_enabled()
    tf32 = (
        torch.backends.cuda.matmul.allow_tf32,
        torch.backends.cudnn.allow_tf32,
        torch.get_float32_matmul_precision(),
    )
    try:
        yield
    finally:
        if dict(os.environ) != environ:
            os.environ.clear()
            os.environ.update(environ)
        torch.set_default_dtype(dtype)
        torch.use_deterministic_algorithms(det)
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = tf32[0], tf32[1]
        torch.set_float32_matmul_precision(tf32[2])


def _baseline(session: Session) -> tuple[str | None, str]:
    """(baseline IR, why it is unstable or ""). The plain trace runs first, unless the case
    is ``cold`` (the launcher's own trace must be the first to run the package's code)."""
    case, pkg = session.case, session.pkg
    first = observe(pkg, case, "first call", None, truth=False) if case.cold and case.baseline_calls else None
    base, note = _truth(pkg.target(case))
    if base is None:
        return None, f"the baseline does not trace under plain FlyDSL: {note}"
    session.base = base
    if not case.baseline_calls:
        return base, ""
    first = first or observe(pkg, case, "first call", base, truth=False)
    warm = observe(pkg, case, "warm call", base, truth=False)
    if first.decision not in ("retrace", "loaded") or first.served != base or warm.decision != "hit":
        why = f"first call {first.decision} ({first.note}), warm call {warm.decision} ({warm.note})"
        return base, f"baseline unstable: {why}"
    return base, ""


def run_case(case: Case, scratch: Path) -> Outcome:
    """One case, in memory and (when asked) in new processes; see the module docstring."""
    started = time.perf_counter()
    pkg = Package.write(case, scratch)
    index = Path(tempfile.mkdtemp(prefix="np-index-", dir=scratch))  # the new processes' own index
    try:
        with global_state_kept():
            spawn = case.new_process and os.environ.get("FLYDEPS_ORACLE_NEW_PROCESS") == "1" and _selected(case)
            first_process = _fresh(case, pkg, index, "baseline") if spawn else None
            session = Session(case, pkg, None)
            session.run(case.setup)
            base, unstable = _baseline(session)
            if unstable:
                return Outcome(case.label, case.family, "ERROR", None, unstable, time.perf_counter() - started)
            session.run(case.mutate)
            judged = observe(pkg, case, "judged call", base, count=case.max_traces is not None)
            pkg.target(case).cache_clear()
            fresh = observe(pkg, case, "fresh start", base)
            second_process = _fresh(case, pkg, index, "mutated") if spawn else None
            session.run(case.restore)
        process = _process_verdict(case, base, first_process, second_process)
        return _outcome(session, judged, fresh, process, time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 - the harness reports, never stops the family
        note = f"harness: {type(exc).__name__}: {exc} | {traceback.format_exc(limit=-3)}"
        return Outcome(case.label, case.family, "ERROR", None, note[:900], time.perf_counter() - started)
    finally:
        pkg.drop()


def _outcome(session: Session, judged: Call, fresh: Call, process: tuple[str | None, str], seconds: float) -> Outcome:
    """The in-memory verdict (judged intermediate calls, the judged call, the fresh start)
    beside the new-process one."""
    case = session.case
    verdicts = [judge(c, r) for c, j, r in session.checkpoints if j]
    verdicts.append(judge(judged, case.reaches, expect_hit=case.expect_hit, max_traces=case.max_traces))
    verdicts.append(judge(fresh, case.reaches))
    verdict, note = worst(verdicts)
    note = " || ".join(n for n in (note, process[1]) if n)
    calls = [c for c, _, _ in session.checkpoints] + [judged, fresh]
    facts = {"base": judged.base, "truth": judged.truth}
    return Outcome(
        case.label,
        case.family,
        verdict,
        process[0],
        note[:600],
        seconds,
        tuple(dataclasses.asdict(c) for c in calls),
        facts,
    )


def _selected(case: Case) -> bool:
    """Whether ``run.py --new-process-per-family`` chose this case for new processes
    (``ORACLE_FAMILIES_NEW_PROCESS_CASES``: labels, comma-separated; unset: every case)."""
    chosen = os.environ.get("ORACLE_FAMILIES_NEW_PROCESS_CASES")
    return chosen is None or case.label in chosen.split(",")


def _process_verdict(case: Case, base: str | None, first: dict | None, second: dict | None) -> tuple[str | None, str]:
    if first is None or second is None:
        return None, ""
    if (
        first.get("error")
        or first.get("decision") not in ("retrace", "loaded")
        or first.get("served") not in (None, first.get("truth"))
    ):
        return "ERROR", f"new process in the baseline state: {first}"[:300]
    kept = "" if first.get("served") else "the baseline process kept no entry (no row): " + str(first.get("note"))[:150]
    if second.get("error"):
        return "ERROR", f"new process in the mutated state failed: {second['error']}"[:300]
    call = Call("new process", second["decision"], second["served"], second["truth"], base, second.get("note", ""))
    if call.decision == "hit":
        return "ERROR", "the first call of a new process hit"
    verdict, why = judge(call, case.reaches)
    return verdict, " | ".join(n for n in (f"new process: {why}" if why else "", kept) if n)


def _fresh(case: Case, pkg: Package, index: Path, mode: str) -> dict:
    """Run :func:`fresh_main` in a new process with this process's environment (the
    mutated one, for ``mutated``) and the case's own persistent index."""
    env = {**os.environ, "FLYDEPS_CACHE_DIR": str(index)}
    command = [sys.executable, str(Path(__file__)), "fresh", mode, case.family, case.name, str(pkg.root)]
    proc = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit {proc.returncode}: {proc.stderr.strip()[-400:]}"}
    result: dict = json.loads(lines[-1])
    return result


def fresh_main(mode: str, family: str, name: str, root: Path) -> dict:
    """In a new process: import the package at ``root`` as it is on disk, run ``setup`` and,
    ``mutated``, ``startup`` (or ``mutate``), make the call, then a fresh plain trace."""
    case = registry.case(family, name)
    sys.path.insert(0, str(root.parent))
    pkg = Package(root)
    session = Session(case, pkg, None)
    session.run(case.setup)
    if mode == "mutated":
        session.run(case.mutate if case.startup is None else case.startup)
    observed = observe(pkg, case, f"new process ({mode})", None)
    return {"decision": observed.decision, "served": observed.served, "truth": observed.truth, "note": observed.note}


def main(argv: list[str]) -> int:
    _setup_env()
    if argv[:1] == ["run"] and len(argv) >= 2:
        cases = registry.cases(argv[1], argv[2:])
        with tempfile.TemporaryDirectory(prefix="flydeps-families-") as tmp:
            sys.path.insert(0, tmp)
            for case in cases:
                print(outcome_to_json(run_case(case, Path(tmp))), flush=True)
        return 0
    if argv[:1] == ["fresh"] and len(argv) == 5 and argv[1] in ("baseline", "mutated"):
        print(json.dumps(fresh_main(argv[1], argv[2], argv[3], Path(argv[4]))), flush=True)
        return 0
    print(
        "usage: harness.py run FAMILY [CASE ...] | harness.py fresh baseline|mutated FAMILY CASE ROOT", file=sys.stderr
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
