"""AOT builds: compile a list of specializations for several arches into one shippable directory.

Contract
--------
``SPEC`` names a Python callable, ``package.module:function`` or ``path/to/file.py:function``.
Called with no arguments, it returns or yields the specializations to build, each
``(launcher, args)`` or ``(launcher, args, kwargs)`` — a launcher (from a compile factory,
as kernel repositories write their AOT scripts) and the arguments of one call (CPU tensors
are compile placeholders) — in the same order every time: workers enumerate it again and
take theirs by position. flydsl_runtime's facade is installed while the spec is imported and
run, so ``flydsl.compiler.jit`` in the spec's modules makes flydsl_runtime launchers.

:func:`build` runs every (specialization, arch) pair in a pool of worker processes — a local
process pool (spawn), or the workers of a Dask distributed scheduler (``dask://HOST:PORT``,
one thread per worker, ``OUT`` on a file system they share) —
each call with ``ARCH`` set to the arch, ``COMPILE_ONLY=1``, ``FLYDEPS_CACHE_DIR=OUT`` and
``FLYDSL_RUNTIME_CACHE_DIR=OUT/flydsl``: a specialization whose key already has a row in
``OUT``'s index is *reused* without tracing; any other is *built* (FlyDSL traces and
compiles into ``OUT/flydsl``); one that raises is *failed* with its error. Items whose calls
have one key (a launcher called with tensors of several sizes) are built once: the others
wait for that build and are reused, served by its row. Workers never
write the index: the rows they would add come back to the parent, the only writer. ``OUT``
is then what a runtime points ``FLYDEPS_CACHE_DIR`` and ``FLYDSL_RUNTIME_CACHE_DIR`` at.

With ``reuse_here`` (the command's), the parent first asks ``OUT``'s index itself, as a
worker's probe asks it, which (specialization, arch) pairs it already serves: those are
*reused* there, and only the rest needs the compiler's arch probes, the linker check and
the pool, none of which starts when nothing is left (a rebuild with nothing to build is the
command's imports, the spec's enumeration and one strict probe per pair). Only an exact
hit of one flydsl_runtime launcher's call is taken: anything else goes to the workers as
before. A library caller holding modules imported before an edit would key the old code,
so it is off by default; so it is with Dask (its workers' FlyDSL toolchain, which names the
artifacts, may not be this process's).

With ``prune``, once every specialization was built or reused, ``OUT`` keeps only what this
build uses: the index rows its specializations were served from or wrote, and the FlyDSL
artifacts (``OUT/flydsl/<function>/<disk key>.pkl``) those rows were loaded from or written
to, as the workers report them (a Dask worker computes disk keys with its own toolchain).
Everything else an earlier build left there (rows and artifacts of helpers since edited,
of specializations the spec no longer yields, of another FlyDSL) is deleted. A build with
a failed specialization prunes nothing: the row an earlier build made for it may be the
only build of it; nor does a spec that gave no specializations (everything would go).
FlyDSL's ``.lock`` files are left in place (another process may hold one).

``manifest`` instead of ``SPEC``: an AOT manifest (:mod:`flydsl_runtime.persist.manifest`, what
``FLYDEPS_RECORD`` wrote while a real run called its kernels). Each named entry is one item:
its launcher resolved by import path (modules imported with the facade installed, as a
spec's), its arguments rebuilt (tensors as CPU placeholders keyed as the recorded ones), and
its call made with the entry's code-generation environment, the variables its trace read
and its compile hints (:func:`flydsl_runtime.persist.manifest.applied`). An entry whose
launcher cannot be resolved or whose arguments cannot be rebuilt here fails with that
reason; an ``unnamed`` entry is not built: the summary lists it as skipped with its reason.
A manifest with a bad line raises :class:`~flydsl_runtime.persist.manifest.ManifestError`
naming ``file:line`` before any work.

A spec that cannot be loaded or enumerated raises :class:`SpecError` naming ``SPEC`` and
what to fix, before any work starts, and so does its own exit (``sys.exit``, a
``SystemExit``) while it is imported or enumerated; an item whose call exits fails its
specialization. So does an arch FlyDSL's compiler does not know (:mod:`.archprobe`: a
ValueError naming it) and, for the local pool, a ROCm root without FlyDSL's linker.

The local pool's workers die with the process that started them, even by SIGKILL
(``PR_SET_PDEATHSIG``, :func:`flydeps.static.processes.die_with_parent`), and so does the
child each forks to build; with no worker left, multiprocessing's resource tracker ends
too. They ignore SIGINT (started with it blocked, so a Ctrl-C while they import prints
nothing): on Ctrl-C, or any error, :func:`build` kills them and raises
:class:`BuildInterrupted` (a ``KeyboardInterrupt``) saying what was kept.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import logging
import multiprocessing
import os
import pickle
import signal
import sqlite3
import sys
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from flydeps.errors import FlydepsError

from ..persist import manifest as manifests
from ..persist import strict as aot
from ..persist.strict import AotMissError
from . import archprobe

if TYPE_CHECKING:
    from ..persist.index import Uses

log = logging.getLogger("flydsl_runtime")

__all__ = ["BuildInterrupted", "Outcome", "Pruned", "Skipped", "SpecError", "Summary", "build", "load_spec"]

_ARCH_SELECTORS = ("ARCH", "FLYDSL_GPU_ARCH", "HSA_OVERRIDE_GFX_VERSION")


class SpecError(FlydepsError, ValueError):
    """The SPEC of an AOT build cannot be loaded or does not give specializations."""

    def __init__(self, spec: str, why: str) -> None:
        self.spec = spec
        super().__init__(
            f"aot build: SPEC {spec!r} {why}. SPEC is 'package.module:function' or 'path/to/file.py:function'; "
            "the function takes no arguments and yields (launcher, args) or (launcher, args, kwargs) tuples."
        )


@dataclass(frozen=True)
class Outcome:
    """One (specialization, arch): ``status`` is ``built``, ``reused`` or ``failed``."""

    position: int
    arch: str
    label: str
    status: str
    error: str = ""
    rows: tuple = ()
    # What the worker used of OUT: ((key, env_reads JSON) of rows served, FlyDSL disk keys)
    used: tuple[tuple[tuple[str, str], ...], tuple[str, ...]] = ((), ())
    # A reused item whose specialization another item of this build built (its label):
    # the same key (the row that item wrote serves both).
    same_as: str = ""


class BuildInterrupted(KeyboardInterrupt):
    """Ctrl-C during :func:`build`: ``kept`` index rows were written before it (None: rows
    are written only once every build has ended, with Dask or ``OUT`` on a network file
    system, so none were)."""

    def __init__(self, out: Path, kept: int | None) -> None:
        self.out, self.kept = out, kept
        if kept is None:
            said = (
                f"interrupted; no index rows were written to {out} (with Dask, or on a network file system, "
                "rows are written once every build has ended): running the same command again traces again, "
                "and FlyDSL's disk cache there spares the compiles it finished"
            )
        else:
            said = (
                f"interrupted; the {kept} index rows of the specializations built so far are in {out}: "
                "run the same command again to build the rest"
            )
        super().__init__(said)


@dataclass(frozen=True)
class Pruned:
    """What ``prune`` deleted from ``OUT`` (``skipped``: why nothing was)."""

    rows: int = 0
    artifacts: int = 0
    bytes: int = 0
    skipped: str = ""

    def line(self) -> str:
        if self.skipped:
            return f"not pruned: {self.skipped}"
        return (
            f"pruned {self.rows} index rows and {self.artifacts} artifacts ({self.bytes / 2**20:.1f} MiB) "
            "that no specialization of this build uses"
        )


@dataclass(frozen=True)
class Skipped:
    """A manifest entry that is not built: its launcher, ``file:line`` and why (``unnamed``)."""

    launcher: str
    where: str
    reason: str


@dataclass(frozen=True)
class Summary:
    out: Path
    outcomes: tuple[Outcome, ...] = field(default_factory=tuple)
    pruned: Pruned | None = None
    # Why the local pool had fewer workers than usable CPUs when --jobs was not given ("": it
    # had one per CPU, or --jobs chose, or Dask ran the build).
    workers: str = ""
    skipped: tuple[Skipped, ...] = ()

    def count(self, status: str) -> int:
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def failed(self) -> tuple[Outcome, ...]:
        return tuple(o for o in self.outcomes if o.status == "failed")

    def lines(self) -> list[str]:
        same = sum(1 for o in self.outcomes if o.same_as)
        also = f"; {same} of them the same specialization as another item" if same else ""
        skipped = f", {len(self.skipped)} skipped" if self.skipped else ""
        head = (
            f"aot build into {self.out}: {self.count('built')} built, {self.count('reused')} reused, "
            f"{self.count('failed')} failed{skipped} (of {len(self.outcomes)}{also})"
        )
        tail = [self.pruned.line()] if self.pruned is not None else []
        tail += [self.workers] if self.workers else []
        return [
            head,
            *(f"failed: {o.label} [{o.arch}]: {o.error}" for o in self.failed),
            *(f"skipped: {s.launcher} ({s.where}): {s.reason}" for s in self.skipped),
            *tail,
        ]


# --- the spec --------------------------------------------------------------------------


def load_spec(spec: str) -> Callable[[], Any]:
    """The callable ``SPEC`` names (imported with the facade installed). A file inside a
    package (``src/pkg/aot.py``, its directory holding ``__init__.py``) is imported as
    ``pkg.aot`` with the directory above its top package first on ``sys.path``, so its own
    absolute and relative imports work; any other file by its location, its directory on
    ``sys.path``. Whatever the import raises is a :class:`SpecError` naming the spec."""
    target, sep, name = spec.rpartition(":")
    if not sep or not target or not name.isidentifier():
        raise SpecError(spec, "does not end in ':function'")
    import flydsl_runtime

    flydsl_runtime.install()
    try:
        if target.endswith(".py") or os.sep in target or "/" in target:
            module = _import_file(spec, Path(target).resolve())
        else:
            try:
                module = importlib.import_module(target)
            except ImportError as exc:
                raise SpecError(
                    spec, f"names module {target!r}, which cannot be imported ({exc}){_src_hint(target)}"
                ) from exc
            except SystemExit as exc:
                raise SpecError(spec, f"{_exited(exc)} while importing {target}") from None
            except Exception as exc:
                raise SpecError(spec, f"raised while importing {target}: {type(exc).__name__}: {exc}") from exc
    finally:
        flydsl_runtime.uninstall()
    fn = getattr(module, name, None)
    if not callable(fn):
        raise SpecError(spec, f"names {name!r}, which {target} does not define as a callable")
    return fn  # type: ignore[no-any-return]


def _import_file(spec: str, path: Path) -> ModuleType:
    """The module of the spec file ``path`` (see :func:`load_spec`)."""
    if not path.is_file():
        raise SpecError(spec, f"names {path}, which is not a file")
    root, parts = path.parent, [path.stem]
    while (root / "__init__.py").is_file() and root.name.isidentifier():
        parts.insert(0, root.name)
        root = root.parent
    try:
        if len(parts) > 1 and path.stem.isidentifier():  # inside a package: by its dotted name
            dotted = ".".join(parts[:-1] if path.name == "__init__.py" else parts)
            if str(root) not in sys.path:
                sys.path.insert(0, str(root))
            module = importlib.import_module(dotted)
            found = getattr(module, "__file__", None)
            if found is None or Path(found).resolve() != path:
                raise SpecError(
                    spec, f"names {path}, but {dotted} imports from {found} (another copy comes first on sys.path)"
                )
            return module
        module_name = f"_flydeps_aot_spec_{abs(hash(str(path)))}"
        loaded = sys.modules.get(module_name)
        if loaded is not None:
            return loaded
        if str(path.parent) not in sys.path:
            sys.path.insert(0, str(path.parent))
        loader_spec = importlib.util.spec_from_file_location(module_name, path)
        if loader_spec is None or loader_spec.loader is None:
            raise SpecError(spec, f"names {path}, which Python cannot import")
        module = importlib.util.module_from_spec(loader_spec)
        sys.modules[module_name] = module
        try:
            loader_spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[module_name]
            raise
        return module
    except SpecError:
        raise
    except SystemExit as exc:
        raise SpecError(spec, f"{_exited(exc)} while importing {path}") from None
    except Exception as exc:
        raise SpecError(spec, f"raised while importing {path}: {type(exc).__name__}: {exc}") from exc


def _exited(exc: SystemExit) -> str:
    """How code of the spec ended the process it ran in (``sys.exit``, ``exit()``, ``raise
    SystemExit``): caught, as the spec's error, so an AOT build never ends with the status a
    spec chose and no word of why."""
    if exc.code is None or isinstance(exc.code, int):
        return f"exited with status {int(exc.code or 0)} (sys.exit)"
    return f"exited (sys.exit({exc.code!r}))"


def _src_hint(dotted: str) -> str:
    """A hint when ``dotted``'s top package lies in ``./src`` (a src-layout project not installed)."""
    top = dotted.partition(".")[0]
    if (Path("src") / top / "__init__.py").is_file():
        return f"; {top} is in ./src: install the project (pip install -e .) or set PYTHONPATH=src"
    return ""


@dataclass(frozen=True)
class _Manifest:
    """The source of a build from a manifest (a SPEC is its string): what workers enumerate."""

    path: str


# What a build enumerates: a SPEC, or a manifest.
_Source = str | _Manifest
# One item: (launcher, args, kwargs, the manifest entry whose environment its call runs in).
_Item = tuple[Any, tuple, dict, "manifests.ManifestEntry | None"]


class _Unbuildable:
    """A manifest entry whose launcher or arguments cannot be made here: calling it raises
    why, so it fails its specialization with that reason (the build goes on)."""

    def __init__(self, entry: manifests.ManifestEntry, why: str) -> None:
        self._name = f"{entry.launcher} ({entry.where})"
        self.why = why

    def __call__(self) -> None:
        raise ValueError(self.why)


def _items(source: _Source) -> list[_Item]:
    if isinstance(source, _Manifest):
        return _manifest_items(source.path)[0]
    return _spec_items(source)


def _manifest_items(path: str) -> tuple[list[_Item], list[Skipped]]:
    """The items of a manifest's named entries, and its unnamed entries (not built)."""
    import flydsl_runtime

    entries = manifests.read(path)  # ManifestError names every bad line
    items: list[_Item] = []
    skipped: list[Skipped] = []
    flydsl_runtime.install()  # as for a spec: flydsl.compiler.jit in the kernels' modules is ours
    try:
        for entry in entries:
            if entry.unnamed is not None:
                skipped.append(Skipped(entry.launcher, entry.where, entry.unnamed))
                continue
            try:
                launcher = manifests.resolve(entry.launcher)
                args = tuple(manifests.decode_value(a) for a in entry.field("args"))
                kwargs = {k: manifests.decode_value(v) for k, v in entry.field("kwargs").items()}
            except SystemExit as exc:
                items.append((_Unbuildable(entry, f"{entry.where}: {_exited(exc)} while imported"), (), {}, None))
                continue
            except Exception as exc:  # ValueError from resolve/decode, or what an import raised
                items.append((_Unbuildable(entry, f"{entry.where}: {exc}"), (), {}, None))
                continue
            if not callable(launcher):
                why = f"{entry.where}: {entry.launcher} is a {type(launcher).__name__}, not a launcher"
                items.append((_Unbuildable(entry, why), (), {}, None))
                continue
            items.append((launcher, args, kwargs, entry))
    finally:
        flydsl_runtime.uninstall()
    return items, skipped


def _spec_items(spec: str) -> list[_Item]:
    import flydsl_runtime

    fn = load_spec(spec)
    flydsl_runtime.install()  # factories called while enumerating build flydsl_runtime launchers
    try:
        produced = fn()
        items: list[_Item] = []
        for i, item in enumerate(produced if produced is not None else ()):
            if not isinstance(item, tuple) or len(item) not in (2, 3) or not callable(item[0]):
                raise SpecError(spec, f"gave item {i} that is not (launcher, args) or (launcher, args, kwargs)")
            launcher, args, *rest = item
            kwargs = rest[0] if rest else {}
            if not isinstance(args, (tuple, list)) or not isinstance(kwargs, dict):
                raise SpecError(spec, f"gave item {i} whose args are not a tuple (or kwargs not a dict)")
            items.append((launcher, tuple(args), kwargs, None))
    except SpecError:
        raise
    except SystemExit as exc:
        raise SpecError(spec, f"{_exited(exc)} while giving its specializations") from None
    except Exception as exc:
        raise SpecError(spec, f"raised while giving its specializations: {type(exc).__name__}: {exc}") from exc
    finally:
        flydsl_runtime.uninstall()
    return items


def _label(launcher: Any, args: tuple, kwargs: dict) -> str:
    from ..launch.jit import launcher_of
    from ..trace.explain import short

    named = launcher_of(launcher) or launcher  # a launcher bound to an instance: the launcher's name
    name = getattr(named, "_name", None) or getattr(named, "__qualname__", type(named).__name__)
    shown = [short(type(a)) if hasattr(a, "dtype") else short(a) for a in args]
    shown += [f"{k}={short(v)}" for k, v in kwargs.items()]
    return f"{name}({', '.join(shown)})"


# --- workers ---------------------------------------------------------------------------

_worker_items: dict[_Source, list[_Item]] = {}
_traces = [0]


def _linker_problem() -> str | None:
    from ..persist import index

    return index.linker_problem()


def _worker_init(out: str) -> None:
    from flydsl.compiler.jit_function import JitFunction

    os.environ.update(
        COMPILE_ONLY="1",
        FLYDEPS_CACHE_DIR=out,
        FLYDSL_RUNTIME_CACHE_DIR=os.path.join(out, "flydsl"),
        FLYDSL_RUNTIME_ENABLE_CACHE="1",
        FLYDEPS_INDEX="1",
    )
    for name in ("FLYDEPS_AOT", "FLYDEPS_VERIFY", "FLYDEPS_RECORD"):  # a build records no manifest
        os.environ.pop(name, None)
    real = JitFunction._trace

    def counted(self: JitFunction, *args: Any, **kwargs: Any) -> Any:
        _traces[0] += 1
        return real(self, *args, **kwargs)

    JitFunction._trace = counted  # type: ignore[method-assign]


@dataclass(frozen=True)
class _Unbuilt:
    """A (specialization, arch) the index could not serve, with its persistent key: the
    parent builds one item per key (:func:`build`), however many items give that key."""

    position: int
    arch: str
    label: str
    key: str


# Set in a local pool's worker (:func:`_local_worker_init`): its build forks die with it, as
# it dies with the command. A Dask worker's forks are left as they are.
_DIES_WITH_PARENT = False


def _local_worker_init(out: str, parent: int) -> None:
    """A local pool's worker (:class:`_WorkerProcess`): it exits as soon as ``parent``, the
    command, dies, even by SIGKILL (as the static analyzer's pool workers do:
    :func:`flydeps.static.processes.die_with_parent`), and it ignores SIGINT, which it was
    started with blocked: a Ctrl-C, which a terminal sends to the whole process group, ends
    the command, which ends its workers (:func:`_pool`) and says what was kept. Then
    :func:`_worker_init`. A Dask worker's process is the user's own: left alone."""
    from flydeps.static.processes import die_with_parent

    global _DIES_WITH_PARENT
    die_with_parent(parent)
    _DIES_WITH_PARENT = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # discards a Ctrl-C pending since the start
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    _worker_init(out)


class _WorkerProcess(multiprocessing.context.SpawnProcess):
    """A local pool's worker process, started (spawned) with SIGINT blocked: a Ctrl-C while
    it imports Python, torch and FlyDSL, before :func:`_local_worker_init` runs, would
    otherwise print the KeyboardInterrupt traceback of each worker. The block is the
    starting thread's for the few milliseconds of the start (a Ctrl-C then is delivered
    to the command when it ends); the worker inherits it through ``exec``."""

    def start(self) -> None:
        if not hasattr(signal, "pthread_sigmask"):
            super().start()
            return
        before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            super().start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, before)


class _WorkerContext(multiprocessing.context.SpawnContext):
    """The local pool's start method: spawn, each worker a :class:`_WorkerProcess`."""

    Process = _WorkerProcess


def _kill_workers() -> None:
    """SIGKILL this process's local-pool workers (each one's build fork dies with it: it
    asked for that, :func:`_in_fork`): on Ctrl-C, or any error, the command does not wait
    for the compiles they run."""
    for process in multiprocessing.active_children():
        if isinstance(process, _WorkerProcess):
            process.kill()


def _build_one(spec: _Source, position: int, arch: str, *, probe: bool = False) -> Outcome | _Unbuilt:
    """One (specialization, arch) task of a worker (the spec enumerated once per worker):
    served from the index in the worker, or built in a fork of it (:func:`_in_fork`).
    ``probe``: a call the index refuses, made by one launcher called directly, comes back
    as :class:`_Unbuilt` instead of being built."""
    _select_arch(arch)
    items = _worker_items.get(spec)
    if items is None:
        items = _worker_items[spec] = _items(spec)
    launcher, args, kwargs, entry = items[position]
    label = _label(launcher, args, kwargs)
    # A manifest entry's environment and hints (inherited by the build fork); a SPEC's: as is.
    with manifests.applied(entry) if entry is not None else contextlib.nullcontext():
        return _build_here(position, arch, label, launcher, args, kwargs, probe)


def _select_arch(arch: str) -> None:
    """This process's environment set to build for ``arch``."""
    for name in _ARCH_SELECTORS:
        os.environ.pop(name, None)
    # ARCH picks the target; FLYDSL_GPU_ARCH is what FlyDSL's get_rocm_arch() answers (buffer
    # ops and s_waitcnt encode for it, and without it a host without that GPU answers its own
    # or gfx942): the arch a runtime on that GPU detects, so the row holds there.
    os.environ["ARCH"] = os.environ["FLYDSL_GPU_ARCH"] = arch


# What :func:`_worker_init` and :func:`_select_arch` set or remove: saved and put back around
# the parent's own probes (:func:`_served_here`).
_WORKER_ENV = (
    "COMPILE_ONLY",
    "FLYDEPS_CACHE_DIR",
    "FLYDSL_RUNTIME_CACHE_DIR",
    "FLYDSL_RUNTIME_ENABLE_CACHE",
    "FLYDEPS_INDEX",
    "FLYDEPS_AOT",
    "FLYDEPS_VERIFY",
    "FLYDEPS_RECORD",
    *_ARCH_SELECTORS,
)


@contextmanager
def _as_worker(out: Path) -> Iterator[None]:
    """This process set up as a build worker is (:func:`_worker_init`: its environment, its
    trace counter), and put back as it was on leaving."""
    from flydsl.compiler.jit_function import JitFunction

    saved = {name: os.environ.get(name) for name in _WORKER_ENV}
    real = JitFunction.__dict__["_trace"]
    try:
        _worker_init(str(out))
        yield
    finally:
        JitFunction._trace = real  # type: ignore[method-assign]
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _served_here(items: Sequence[_Item], tasks: Sequence[tuple[int, str]], out: Path) -> list[Outcome]:
    """The tasks ``out``'s index serves, asked in this process as a worker's probe asks
    (:func:`_call` with ``reuse_only``: strict, refused before any trace), with the
    environment a worker has. Asked only of an item that is one flydsl_runtime launcher's
    call (plain or bound to an instance): its probe traces nothing, so this process stays as
    a worker starts, the spec enumerated and nothing traced, and every later probe keys as
    a worker's would. Anything else, a refusal, an error or a trace, leaves the task to the
    workers, which decide it as before: only an exact hit is taken here. Nothing is
    written: the rows served are already there. With no index in ``out``: nothing served."""
    from ..launch.jit import launcher_of
    from ..persist import index

    if not tasks or not (out / index.INDEX_NAME).is_file():
        return []
    served: list[Outcome] = []
    selected = None
    with _as_worker(out):
        for position, arch in tasks:
            launcher, args, kwargs, entry = items[position]
            if isinstance(launcher, _Unbuildable) or launcher_of(launcher) is None:
                continue
            if arch != selected:  # (set again, the environment's version would move: every key re-read)
                _select_arch(selected := arch)
            label = _label(launcher, args, kwargs)
            before = _traces[0]
            try:
                with manifests.applied(entry) if entry is not None else contextlib.nullcontext():
                    outcome = _call(position, arch, label, launcher, args, kwargs, reuse_only=True)
            except AotMissError:
                continue
            if _traces[0] != before:  # not a worker's state any more: the workers ask the rest
                break
            if outcome.status == "reused":
                served.append(outcome)
    log.info("aot build: %d of %d served by %s as it is", len(served), len(tasks), out)
    return served


def _build_here(
    position: int, arch: str, label: str, launcher: Any, args: tuple, kwargs: dict, probe: bool
) -> Outcome | _Unbuilt:
    """:func:`_build_one`'s task once its item is known: served, refused (probe) or built."""
    if not _FORK:
        return _call(position, arch, label, launcher, args, kwargs)
    try:
        return _call(position, arch, label, launcher, args, kwargs, reuse_only=True)
    except AotMissError as refused:  # refused before any trace: build it in a fork
        # Its key names the specialization only when the item is that one launcher's call,
        # plain or bound to an instance (a function calling launchers may call others after
        # the one refused).
        from ..launch.jit import launcher_of

        called = launcher_of(launcher)
        if probe and refused.key is not None and called is not None and called._name == refused.launcher:
            return _Unbuilt(position, arch, label, refused.key)
    return _in_fork(functools.partial(_call, position, arch, label, launcher, args, kwargs), position, arch, label)


# A specialization the index cannot serve is keyed and built in a child forked from its
# worker, whose state is what a new runtime process has: the spec imported and enumerated,
# nothing traced. A trace writes what the kernel code writes while tracing (a memo dict, a
# registry, a trace log); in the worker itself, the next specialization's key would cover
# those writes, and no new process, which has not traced, would ever find its row. The
# worker first asks the index strictly (aot.probing), which serves or refuses before any
# trace, so it stays in that state and a reused specialization costs no fork. Linux only
# (FlyDSL's ROCm targets): elsewhere the worker builds in place.
_FORK = sys.platform.startswith("linux") and hasattr(os, "fork")


def _in_fork(run: Callable[[], Outcome], position: int, arch: str, label: str) -> Outcome:
    """``run()`` in a child forked from this worker, its outcome pickled back through a pipe;
    a child that dies without one is a failed specialization naming how it ended."""
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    read_fd, write_fd = os.pipe()
    worker = os.getpid()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child (its coverage is not collected)
        code = 0
        try:
            if _DIES_WITH_PARENT:  # a local pool's worker: its build fork dies with it
                from flydeps.static.processes import die_with_parent

                die_with_parent(worker)
            os.close(read_fd)
            try:
                outcome = run()
            except BaseException as exc:  # the specialization's failure
                outcome = Outcome(position, arch, label, "failed", f"{type(exc).__name__}: {exc}".splitlines()[0])
            with os.fdopen(write_fd, "wb") as pipe:
                pipe.write(pickle.dumps(outcome))
        except BaseException:  # the parent reports the empty pipe
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        payload = pipe.read()
    _pid, status = os.waitpid(pid, 0)
    if payload:
        outcome = pickle.loads(payload)
        if type(outcome) is Outcome:
            return outcome
    code = os.waitstatus_to_exitcode(status)
    how = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exit status {code}"
    return Outcome(position, arch, label, "failed", f"the build process of this specialization died ({how})")


def _call(
    position: int, arch: str, label: str, launcher: Any, args: tuple, kwargs: dict, *, reuse_only: bool = False
) -> Outcome:
    """Call one specialization's launcher: its outcome, and the rows it would add.
    ``reuse_only``: strict (:func:`flydsl_runtime.persist.strict.probing`), raising AotMissError when the index
    cannot serve it (refused before any trace)."""
    from ..launch.jit import memory_hits
    from ..persist import index

    rows = index.defer_writes()
    uses = index.collect_uses()
    before, hits = _traces[0], memory_hits()
    try:
        with aot.probing() if reuse_only else contextlib.nullcontext():
            result = launcher(*args, **kwargs)
    except SystemExit as exc:  # the item's own exit: its failure, not the worker's end
        return Outcome(position, arch, label, "failed", f"the call {_exited(exc)}")
    except Exception as exc:
        if reuse_only and isinstance(exc, AotMissError):
            raise
        return Outcome(position, arch, label, "failed", f"{type(exc).__name__}: {exc}".splitlines()[0])
    finally:
        index.stop_deferring()
        index.stop_collecting()
        index.close()  # before a fork; and a Dask worker lives on: the index is left in rollback-journal mode
    why_not = _unserved(_traces[0] - before, uses, memory_hits() > hits, result)
    if why_not is not None:
        return Outcome(position, arch, label, "failed", why_not)
    status = "built" if _traces[0] > before else "reused"
    # EnvReads carry a generated check: they cross the process boundary as plain data.
    plain = tuple((k, name, ir, (r.values, r.listed), detail, rep) for k, name, ir, r, detail, rep in rows)
    return Outcome(position, arch, label, status, rows=plain, used=(tuple(uses.rows), tuple(uses.artifacts)))


def _unserved(traced: int, uses: Uses, memory_hit: bool, result: object) -> str | None:
    """Why a runtime process would not be served this specialization from the directory
    (None: it would): a trace that left no row (not persistable, or not by a flydsl_runtime
    launcher), or a call that ran no launcher at all (SPEC yielded something else)."""
    unstored = [f"{name}: {why}" for name, why in uses.traces if why is not None]
    foreign = traced - len(uses.traces)
    if foreign > 0:
        unstored.append(
            f"{foreign} trace(s) by a FlyDSL launcher that is not flydsl_runtime's (import flyc from "
            "flydsl_runtime in the kernel's module, or call flydsl_runtime.install() before importing it)"
        )
    if unstored:
        return "traced, but no index row serves it: " + "; ".join(unstored)
    if traced or uses.rows or memory_hit:
        return None
    returned = f"; it returned {type(result).__name__} {getattr(result, '__qualname__', '')}".rstrip()
    return (
        "the call ran no flydsl_runtime launcher, so there is nothing to build or reuse"
        + (returned if callable(result) else "")
        + ": SPEC yields (launcher, args), the launcher called with args (a factory's result, "
        "not the factory)"
    )


# --- the parent ------------------------------------------------------------------------

# What one local worker is budgeted when the pool is sized by memory: measured here, a worker
# holds ~0.3 GB once it imported torch and FlyDSL and ~0.4 GB after compiling the example
# kernels (the child it forks to trace adds its own); LLVM takes more for a large kernel.
WORKER_BYTES = 1 << 30


def local_workers(tasks: int) -> tuple[int, str]:
    """The local pool's size when ``--jobs`` is not given, and, when memory made it smaller
    than the CPUs, the summary's line saying so ("" otherwise).

    One worker per CPU this process may run on: its affinity and a cgroup's CPU quota, as
    ``dask.system.cpu_count`` reads them (a container given 4 CPUs of a 128-core host gets 4,
    where ``os.cpu_count()``, what a process pool takes by default, says 128); no more than
    the memory available holds at :data:`WORKER_BYTES` each (``psutil``'s available memory,
    within ``distributed.system.memory_limit()``: a cgroup's limit, ``RLIMIT_RSS``); never
    more than there are tasks, nor fewer than one (Dask and psutil come with the ``flydsl``
    extra, as FlyDSL and tqdm do)."""
    import psutil
    from dask.system import cpu_count
    from distributed.system import memory_limit

    cpus = cpu_count()
    available = min(psutil.virtual_memory().available, memory_limit())
    fits = max(1, available // WORKER_BYTES)
    workers = max(1, min(cpus, fits, tasks))
    if fits >= min(cpus, tasks):
        return workers, ""
    return workers, (
        f"workers: {workers} local, not one per usable CPU ({cpus}): {available / 2**30:.1f} GiB of memory "
        f"available, {WORKER_BYTES / 2**30:.0f} GiB budgeted per worker; --jobs N to choose"
    )


@contextmanager
def _pool(executor: str, jobs: int | None, out: Path) -> Iterator[Any]:
    """A ``concurrent.futures`` executor: a local process pool, or a Dask cluster's."""
    if executor == "local":
        with ProcessPoolExecutor(
            max_workers=jobs,
            mp_context=_WorkerContext(),
            initializer=_local_worker_init,
            initargs=(str(out), os.getpid()),
        ) as pool:
            try:
                yield pool
            except BaseException:  # Ctrl-C, or an error: the pool's shutdown would wait for running compiles
                _kill_workers()
                raise
        return
    if not executor.startswith("dask://") or not executor[len("dask://") :]:
        raise ValueError(f"aot build: --executor is 'local' or 'dask://HOST:PORT', got {executor!r}")
    try:
        from distributed import Client
    except ImportError as exc:
        raise ValueError(f"aot build: --executor {executor} needs Dask (pip install distributed): {exc}") from None
    address = f"tcp://{executor[len('dask://') :]}"
    try:
        client = Client(address)  # waits distributed.comm.timeouts.connect (Dask's config: 30 s)
    except (OSError, TimeoutError) as exc:  # distributed raises OSError (and its TimeoutError) for both
        raise ValueError(
            f"aot build: --executor {executor}: cannot reach a Dask scheduler at {address} ({exc}); "
            "start one (`dask scheduler`, then `dask worker --nthreads 1 HOST:PORT`) or use --executor local"
        ) from None
    try:
        threads = client.nthreads()
        if not threads:
            raise ValueError(f"aot build: the Dask scheduler at {executor} has no workers")
        crowded = sorted(addr for addr, n in threads.items() if n != 1)
        if crowded:
            raise ValueError(
                f"aot build: Dask workers {', '.join(crowded)} run several threads; each build sets ARCH for its "
                "process, so start workers with --nthreads 1 (LocalCluster(threads_per_worker=1))"
            )
        client.run(_worker_init, str(out))
        unable = {addr: why for addr, why in client.run(_linker_problem).items() if why is not None}
        if unable:
            addr, why = sorted(unable.items())[0]
            raise ValueError(f"aot build: {len(unable)} Dask worker(s) cannot link a kernel, e.g. {addr}: {why}")
        yield client.get_executor(pure=False)
    finally:
        client.close()


def build(
    spec: str | None,
    arches: Sequence[str],
    out: Path,
    *,
    jobs: int | None = None,
    progress: bool = True,
    executor: str = "local",
    prune: bool = False,
    manifest: Path | str | None = None,
    reuse_here: bool = False,
) -> Summary:
    """Build every specialization of ``spec`` (or of the AOT ``manifest``: exactly one of
    them) for every arch into ``out`` (module docstring). ``executor``: ``local`` (a process
    pool of ``jobs`` workers) or ``dask://HOST:PORT`` (the workers of that Dask scheduler, one
    thread each, sharing ``out``'s file system). ``prune``: then delete from ``out`` the rows
    and artifacts this build does not use. ``reuse_here``: this process asks ``out``'s index
    itself which items it serves (:func:`_served_here`), starting no worker when it serves
    them all; exact only in a process that imported the spec's modules in this call (the
    command's), not one holding modules imported before an edit (a library caller's)."""
    if (spec is None) == (manifest is None):
        raise ValueError("aot build: give exactly one of SPEC and --manifest M")
    if not arches or any(not a or not a.replace("_", "").isalnum() for a in arches):
        raise ValueError(f"aot build: --arch needs arch names such as gfx942,gfx950, got {','.join(arches)!r}")
    out = out.resolve()
    if out.exists() and not out.is_dir():
        raise ValueError(f"aot build: --out {out} is not a directory; name a directory to build into (made if missing)")
    # The spec (or manifest) must load and enumerate here, before any work starts.
    source: _Source
    skipped: list[Skipped] = []
    if manifest is not None:
        source = _Manifest(str(Path(manifest).resolve()))
        items, skipped = _manifest_items(source.path)
        count = len(items)
    else:
        assert spec is not None
        source = spec
        items = _items(spec)
        count = len(items)
    tasks = [(position, arch) for arch in arches for position in range(count)]
    from ..persist import index, sqlitefile

    # What OUT's index already serves is asked here, in this process, as a worker asks it
    # (:func:`_served_here`): only the rest needs the compiler probes, the pool and its workers.
    # Not for Dask: its workers may have another FlyDSL toolchain, whose artifacts are not these.
    served = _served_here(items, tasks, out) if reuse_here and executor == "local" else []
    done = {(o.position, o.arch) for o in served}
    tasks = [t for t in tasks if t not in done]
    if executor == "local" and tasks:
        problem = index.linker_problem()  # else every specialization fails alike, each with MLIR's bare words
        if problem is not None:
            raise ValueError(f"aot build: {problem}")
    if tasks:
        # A processor the compiler does not know (a misspelt --arch) kills every specialization's
        # build process (LLVM: SIGABRT in instruction selection) or fails each trace (MLIR's
        # chipset parser): asked of the compiler once per arch instead.
        unknown = archprobe.unknown_arches(arches)
        if unknown:
            said = "; ".join(f"{arch}: {line}" for arch, line in unknown.items())
            raise ValueError(
                f"aot build: --arch {','.join(unknown)}: FlyDSL's compiler does not know "
                f"{'this processor' if len(unknown) == 1 else 'these processors'} (the compiler says {said}); "
                "name the GPU processors to build for, such as gfx942,gfx950"
            )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(
            f"aot build: --out {out}: cannot make the directory ({exc.strerror or exc}); name one you can write"
        ) from None
    from tqdm import tqdm

    # No monitor thread: it would outlive the build in the caller's process (a library
    # caller, a test run), where another thread changes how processes may be forked.
    tqdm.monitor_interval = 0

    # Rows written while workers read the index: only where SQLite's locks hold, a local
    # pool on a local file system. Workers on other hosts (Dask), or DIR on a network file
    # system, read it while nothing writes it; their rows are written once all have ended.
    as_they_end = executor == "local" and not sqlitefile.on_network_fs(out)
    with index.at(out):
        index.mark_built()  # a shipped directory: runtime processes writing there never trim it
    outcomes: list[Outcome] = list(served)
    workers = ""
    if executor == "local" and jobs is None and tasks:
        jobs, workers = local_workers(len(tasks))
        log.info("aot build: %d local worker(s)", jobs)
    try:
        if tasks:  # nothing left: no pool, no worker started
            with _pool(executor, jobs, out) as pool:
                total, initial = len(tasks) + len(served), len(served)
                bar = tqdm(
                    total=total, initial=initial, desc="aot build", unit="spec", disable=not progress, file=sys.stderr
                )
                try:
                    _run(pool, source, tasks, out if as_they_end else None, bar, outcomes)
                finally:
                    bar.close()  # before the summary, or the interruption's message
    except KeyboardInterrupt:
        kept = sum(len(o.rows) for o in outcomes) if as_they_end else None
        raise BuildInterrupted(out, kept) from None
    if not as_they_end:
        _write_rows(out, [row for o in outcomes for row in o.rows])
    with index.at(out):
        # This process's FlyDSL toolchain key, remembered in OUT's index (workers write no
        # index): `aot list` in a process with another toolchain tells OUT's artifacts are
        # there for this one, and a runtime on this machine reads the key instead of hashing.
        index.remember_toolchain()

    _snapshot_sources(out, items, outcomes)
    pruned = _prune(out, outcomes) if prune else None
    with index.at(out):
        index.compact(vacuum=pruned is not None and pruned.rows > 0)
    ordered = tuple(sorted(outcomes, key=lambda o: (o.position, o.arch)))
    return Summary(out, ordered, pruned, workers, tuple(skipped))


def _snapshot_sources(out: Path, items: Sequence[_Item], outcomes: Sequence[Outcome]) -> None:
    """The sources of the launchers' modules, with the rows built or served on them, kept in
    ``out`` for ``aot plan`` (:mod:`.sources`); a failure to snapshot is a warning: the build
    stands, and ``aot plan`` says the directory has no snapshot."""
    from ..launch.jit import launcher_of
    from . import sources

    modules = set()
    for launcher, _args, _kwargs, entry in items:
        if isinstance(launcher, _Unbuildable):
            continue
        if entry is not None:  # the module the manifest names (a launcher built by a builder there)
            modules.add(entry.launcher.partition(":")[0])
        called = launcher_of(launcher)  # a SPEC's item: the traced function's module, when it is one launcher
        name = called._jf.func.__module__ if called is not None else getattr(launcher, "__module__", None)
        if isinstance(name, str):
            modules.add(name)
    rows = {key for o in outcomes if o.status != "failed" for key, _env in o.used[0]}
    rows |= {row[0] for o in outcomes for row in o.rows}
    try:
        sources.write(out, modules, rows)
    except Exception as exc:  # the analysis or the write: the rows are built either way
        log.warning("aot build: no source snapshot in %s for `aot plan` (%s: %s)", out, type(exc).__name__, exc)
        (out / sources.SOURCES_NAME).unlink(missing_ok=True)


def _run(
    pool: Any, spec: _Source, tasks: Sequence[tuple[int, str]], out: Path | None, bar: Any, outcomes: list[Outcome]
) -> None:
    """Every task's outcome, appended to ``outcomes`` and its rows written to ``out`` as it
    ends (a build interrupted later, by Ctrl-C or a killed parent, keeps every row made so
    far; a rerun reuses them); with ``out`` None, written by the caller once all have ended.

    Each task first asks the index (a probe in a worker); one it cannot serve comes back
    with its key, and the parent builds one task per key: tasks giving the key of a
    specialization another task builds (the same launcher with tensors of other sizes:
    FlyDSL keys tensors layout-dynamic) wait for that build and are then served by its row.
    When the build of a key fails, the next task of that key is built, with its own error."""
    # future -> (position, arch, the key it builds: None for a probe)
    futures: dict[Future[Outcome | _Unbuilt], tuple[int, str, str | None]] = {
        pool.submit(_build_one, spec, p, a, probe=True): (p, a, None) for p, a in tasks
    }
    running: dict[str, list[_Unbuilt]] = {}  # key -> the tasks waiting for its build
    finished: dict[str, Outcome] = {}  # key -> the build that wrote its row

    def start(task: _Unbuilt, waiting: list[_Unbuilt]) -> list[Outcome]:
        """Submit ``task``'s build, ``waiting`` the other tasks of its key; the failed outcomes
        of all of them when the pool takes no more work (a worker died)."""
        try:
            futures[pool.submit(_build_one, spec, task.position, task.arch)] = (task.position, task.arch, task.key)
        except (BrokenProcessPool, RuntimeError) as exc:
            return [Outcome(t.position, t.arch, t.label, "failed", f"worker died: {exc}") for t in (task, *waiting)]
        running[task.key] = waiting
        return []

    while futures:
        done, _running = wait(futures, return_when=FIRST_COMPLETED)
        for future in done:
            position, arch, key = futures.pop(future)
            try:
                result = future.result()
            except BrokenProcessPool as exc:
                result = Outcome(position, arch, f"specialization {position}", "failed", f"worker died: {exc}")
            except SpecError as exc:
                result = Outcome(position, arch, f"specialization {position}", "failed", str(exc))
            settled: list[Outcome] = []
            if isinstance(result, _Unbuilt):
                if result.key in finished:
                    settled.append(_same_as(result, finished[result.key]))
                elif result.key in running:
                    running[result.key].append(result)
                else:
                    settled += start(result, [])
            else:
                settled.append(result)
                if key is not None:  # the build of a key: its waiters are served, or the next one builds
                    waiters = running.pop(key)
                    if result.status == "built" and any(row[0] == key for row in result.rows):
                        finished[key] = result
                        settled += [_same_as(w, result) for w in waiters]
                    elif waiters:
                        settled += start(waiters[0], waiters[1:])
            for outcome in settled:
                if out is not None:
                    _write_rows(out, outcome.rows)
                outcomes.append(outcome)
                built = sum(o.status == "built" for o in outcomes)
                bar.set_postfix(built=built, failed=sum(o.status == "failed" for o in outcomes), refresh=False)
                bar.update(1)  # shows the counts with the item they count


def _same_as(item: _Unbuilt, built: Outcome) -> Outcome:
    """``item``, whose key ``built`` wrote a row for in this build: a runtime is served it."""
    return Outcome(item.position, item.arch, item.label, "reused", same_as=built.label)


def _prune(out: Path, outcomes: Sequence[Outcome]) -> Pruned:
    """Delete from ``out`` the index rows and FlyDSL artifacts no outcome used (module docstring)."""
    from flydeps.observe.environ import EnvReads

    from ..persist import index

    if not outcomes:  # everything would go: more likely a spec that lost its items than a wish
        return Pruned(skipped="the spec gave no specializations (delete DIR to start over)")
    failed = sum(o.status == "failed" for o in outcomes)
    if failed:
        return Pruned(skipped=f"{failed} failed (the rows an earlier build made for them may be their only build)")
    keep = {tuple(row) for o in outcomes for row in o.used[0]}
    for o in outcomes:
        for key, _launcher, _ir, (values, listed), _detail, _replace in o.rows:
            reads = index.reads_json(EnvReads(values, listed))
            if reads is not None:
                keep.add((key, reads))
    try:
        with index.at(out):
            rows = index.prune(keep)  # type: ignore[arg-type]
    except sqlite3.Error as error:  # rolled back: every row and artifact is still there
        return Pruned(skipped=f"the index in {out} could not be pruned ({error})")
    artifacts = {key for o in outcomes for key in o.used[1]}
    count = size = 0
    for pkl in sorted((out / "flydsl").glob("*/*.pkl")):
        if pkl.stem in artifacts or not _is_disk_key(pkl.stem):
            continue
        try:
            size += pkl.stat().st_size
            pkl.unlink()
            count += 1
        except FileNotFoundError:
            continue
    log.info("aot build: pruned %d rows and %d artifacts from %s", rows, count, out)
    return Pruned(rows, count, size)


def _is_disk_key(name: str) -> bool:
    """A FlyDSL disk-cache key (sha256 hex): the only files prune may delete."""
    return len(name) == 64 and all(c in "0123456789abcdef" for c in name)


def _write_rows(out: Path, rows: Sequence[tuple]) -> None:
    """The one writer: the workers' rows into ``out``'s index."""
    from flydeps.observe.environ import EnvReads

    from ..persist import index

    if not rows:
        return
    with index.at(out):
        for key, launcher, ir_key, (values, listed), detail, replace in rows:
            index.record(key, launcher, ir_key, EnvReads(values, listed), detail, replace=replace)
