"""flydeps.watch.watchers: every watched mutation bumps version(), nothing else does, and no crash.

The behavioural tests run on CPython >= 3.12 against each backend that can run here: the
module's own (the C extension, normally) and the opt-in ctypes one (dicts and types only).
On older interpreters only the no-op contract is checked.
"""

from __future__ import annotations

import gc
import importlib
import subprocess
import sys
import textwrap
import types
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flydeps.watch import watchers as _watch

HAS_WATCHERS = sys.version_info >= (3, 12) and sys.implementation.name == "cpython"
needs_watchers = pytest.mark.skipif(not HAS_WATCHERS, reason="watcher C-API needs CPython >= 3.12")
SRC = str(Path(_watch.__file__).resolve().parent.parent)


@dataclass
class Backend:
    name: str
    version: Callable[[], int]
    watch_dict: Callable[[dict[Any, Any]], None]
    watch_type: Callable[[type], None]
    watch_function: Callable[[Any], None]
    functions: bool


_CTYPES: Backend | None = None


def _ctypes_backend() -> Backend:
    global _CTYPES
    if _CTYPES is None:  # one instance per test process: watcher ids are scarce
        b = _watch._CtypesBackend()
        _CTYPES = Backend("ctypes", b.version, b.watch_dict, b.watch_type, _watch._noop, False)
    return _CTYPES


@pytest.fixture(params=["module", "ctypes"])
def be(request: pytest.FixtureRequest) -> Backend:
    if not HAS_WATCHERS:
        pytest.skip("watcher C-API needs CPython >= 3.12")
    if request.param == "ctypes":
        return _ctypes_backend()
    if not _watch.AVAILABLE:
        pytest.skip(f"no watcher backend loaded (BACKEND={_watch.BACKEND}); build the extension with pip install -e .")
    return Backend(
        _watch.BACKEND, _watch.version, _watch.watch_dict, _watch.watch_type, _watch.watch_function, _watch.FUNCTIONS
    )


def bumps(be: Backend, action: Callable[[], object]) -> int:
    before = be.version()
    action()
    return be.version() - before


# ----------------------------------------------------------------------------- dicts


@needs_watchers
@pytest.mark.parametrize(
    "name, action",
    [
        ("set new key", lambda d: d.__setitem__("new", object())),
        ("rebind key", lambda d: d.__setitem__("a", object())),
        ("del", lambda d: d.__delitem__("a")),
        ("pop", lambda d: d.pop("a")),
        ("popitem", lambda d: d.popitem()),
        ("clear", lambda d: d.clear()),
        ("update kw", lambda d: d.update(z=1)),
        ("update dict", lambda d: d.update({"a": 2, "q": 3})),
        ("ior", lambda d: d.__ior__({"r": 1})),
        ("setdefault new", lambda d: d.setdefault("s", 1)),
    ],
)
def test_every_dict_mutation_bumps(be: Backend, name: str, action: Callable[[dict[str, Any]], object]) -> None:
    d: dict[str, Any] = {"a": 1, "b": 2}
    be.watch_dict(d)
    assert bumps(be, lambda: action(d)) >= 1, name


@needs_watchers
def test_clone_into_empty_watched_dict_bumps(be: Backend) -> None:
    d: dict[str, int] = {}
    be.watch_dict(d)
    assert bumps(be, lambda: d.update({"x": 1, "y": 2})) >= 1


@needs_watchers
def test_reads_and_unwatched_mutations_do_not_bump(be: Backend) -> None:
    watched = {"a": 1}
    be.watch_dict(watched)
    other: dict[str, int] = {}

    class Plain:
        x = 1

    def g() -> None:
        pass

    def churn() -> None:
        _ = watched["a"], watched.get("zz"), list(watched.items()), dict(watched), watched.copy()
        watched.setdefault("a", 5)  # existing key: no change
        watched["a"] = watched["a"]  # same object: no change
        other["k"] = 1
        other.clear()
        Plain.x = 2
        Plain.y = 3  # type: ignore[attr-defined]
        g.__defaults__ = (1,)
        exec("def fresh(a=1):\n    return a\n", {})  # noqa: S102

    assert bumps(be, churn) == 0


@needs_watchers
def test_module_setattr_delattr_bump(be: Backend) -> None:
    mod = types.ModuleType("flydeps_watch_tmpmod")
    mod.helper = lambda: 1  # type: ignore[attr-defined]
    be.watch_dict(mod.__dict__)
    assert bumps(be, lambda: setattr(mod, "helper", lambda: 2)) >= 1
    assert bumps(be, lambda: setattr(mod, "extra", 1)) >= 1
    assert bumps(be, lambda: delattr(mod, "extra")) >= 1


@pytest.fixture
def tmp_module(tmp_path: Path) -> Iterator[tuple[types.ModuleType, Path]]:
    name = f"flydeps_watch_reload_{uuid.uuid4().hex[:8]}"
    path = tmp_path / f"{name}.py"
    path.write_text("def helper():\n    return 1\n\nVALUE = 1\n")
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module(name)
        yield mod, path
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


@needs_watchers
@pytest.mark.parametrize("new_source", ["def helper():\n    return 2\n\nVALUE = 1\n", None])
def test_reload_of_watched_module_bumps(
    be: Backend, tmp_module: tuple[types.ModuleType, Path], new_source: str | None
) -> None:
    mod, path = tmp_module
    if new_source is not None:
        path.write_text(new_source)
    importlib.invalidate_caches()
    be.watch_dict(mod.__dict__)
    assert bumps(be, lambda: importlib.reload(mod)) >= 1
    if new_source is not None:
        assert mod.helper() == 2


# ----------------------------------------------------------------------------- functions


def _watched_function(be: Backend) -> Any:
    if not be.functions:
        pytest.skip(f"backend {be.name} does not watch functions")

    def f(a: int = 1, *, k: int = 2) -> int:
        return a + k

    be.watch_function(f)
    return f


@needs_watchers
def test_function_code_swap_bumps(be: Backend) -> None:
    f = _watched_function(be)
    assert bumps(be, lambda: setattr(f, "__code__", (lambda a=1, *, k=2: a * k).__code__)) >= 1


@needs_watchers
def test_function_defaults_swap_bumps(be: Backend) -> None:
    f = _watched_function(be)
    assert bumps(be, lambda: setattr(f, "__defaults__", (5,))) >= 1
    assert bumps(be, lambda: setattr(f, "__defaults__", None)) >= 1


@needs_watchers
def test_function_kwdefaults_swap_bumps(be: Backend) -> None:
    f = _watched_function(be)
    assert bumps(be, lambda: setattr(f, "__kwdefaults__", {"k": 7})) >= 1


@needs_watchers
def test_dead_function_address_reuse_is_not_watched(be: Backend) -> None:
    if not be.functions:
        pytest.skip(f"backend {be.name} does not watch functions")
    for _ in range(200):
        f = _watched_function(be)
        del f
    gc.collect()
    fresh = [eval("lambda a=1: a") for _ in range(500)]  # some land on freed addresses

    def mutate() -> None:
        for fn in fresh:
            fn.__defaults__ = (2,)

    assert bumps(be, mutate) == 0


@needs_watchers
def test_function_set_survives_churn(be: Backend) -> None:
    # Many watch/free cycles grow, tombstone and rehash the extension's address set.
    if not be.functions:
        pytest.skip(f"backend {be.name} does not watch functions")
    import random

    rng = random.Random(1234)
    watched: list[Any] = []
    plain: list[Any] = []
    for _ in range(30):
        for _ in range(rng.randrange(50, 400)):
            fn = eval("lambda a=1: a")
            if rng.random() < 0.5:
                be.watch_function(fn)
                be.watch_function(fn)  # idempotent
                watched.append(fn)
            else:
                plain.append(fn)
        rng.shuffle(watched)
        rng.shuffle(plain)
        del watched[: len(watched) // 2], plain[: len(plain) // 2]
        gc.collect()
    for fn in plain:
        before = be.version()
        fn.__defaults__ = (2,)
        assert be.version() == before
    for fn in watched:
        before = be.version()
        fn.__defaults__ = (3,)
        assert be.version() > before


@needs_watchers
def test_watch_function_rejects_non_functions(be: Backend) -> None:
    if not be.functions:
        pytest.skip(f"backend {be.name} does not watch functions")
    with pytest.raises(TypeError):
        be.watch_function(len)


# ----------------------------------------------------------------------------- types


@needs_watchers
def test_class_attribute_set_and_delete_bump(be: Backend) -> None:
    class K:
        def m(self) -> int:
            return 1

    be.watch_type(K)
    assert bumps(be, lambda: setattr(K, "m", lambda self: 2)) >= 1
    assert bumps(be, lambda: setattr(K, "m", lambda self: 3)) >= 1  # again, no lookup between
    assert bumps(be, lambda: setattr(K, "new", 1)) >= 1
    assert bumps(be, lambda: delattr(K, "new")) >= 1


@needs_watchers
def test_base_class_change_bumps_watched_subclass(be: Backend) -> None:
    class Base:
        def helper(self) -> int:
            return 1

    class Sub(Base):
        pass

    class Other:
        def helper(self) -> int:
            return 2

    be.watch_type(Sub)

    def rebind(value: int) -> Callable[[], None]:
        return lambda: setattr(Base, "helper", lambda self: value)

    for value in range(3):  # each time, including repeats with no attribute lookup between
        assert bumps(be, rebind(value)) >= 1
    assert bumps(be, lambda: setattr(Sub, "__bases__", (Other,))) >= 1
    assert bumps(be, lambda: setattr(Sub, "__bases__", (Base,))) >= 1


@needs_watchers
def test_watch_type_rejects_non_types(be: Backend) -> None:
    with pytest.raises(TypeError):
        be.watch_type(object())  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        be.watch_dict([])  # type: ignore[arg-type]


# ----------------------------------------------------------------------------- lifetime


@needs_watchers
def test_dealloc_of_watched_objects_is_safe(be: Backend) -> None:
    for _ in range(300):
        d = {"x": 1}
        be.watch_dict(d)

        class T:
            pass

        be.watch_type(T)
        del d, T
    gc.collect()
    # New dicts/classes may reuse the freed memory: they are not watched.
    fresh: list[dict[str, object]] = [{"x": 1} for _ in range(300)]

    def mutate() -> None:
        for fd in fresh:
            fd["x"] = object()

    assert bumps(be, mutate) == 0


@needs_watchers
def test_no_crash_under_gc_with_cycles(be: Backend) -> None:
    for round_ in range(20):
        keep = []
        for i in range(50):
            d: dict[str, Any] = {"i": i}
            d["self"] = d  # cycle: freed by the collector, not by refcount

            class C:
                pass

            C.me = C  # type: ignore[attr-defined]

            def f(a: int = i) -> int:
                return a

            f.cycle = f  # type: ignore[attr-defined]
            be.watch_dict(d)
            be.watch_type(C)
            be.watch_function(f)
            if i % 3 == 0:
                keep.append((d, C, f))
        gc.collect()
        before = be.version()
        for kd, _kc, _kf in keep:
            kd["i"] = object()
        assert be.version() > before
        be.version()
        del keep
        gc.collect()
        assert isinstance(be.version(), int), round_


@needs_watchers
def test_pending_exception_survives_dealloc_of_watched_dict() -> None:
    # CPython frees a call's arguments with the callee's exception already set.
    if _watch.BACKEND != "ext":
        pytest.skip("only the C-extension backend is exception-safe; ctypes is opt-in for that reason")

    def make() -> dict[str, int]:
        d = {"x": 1}
        _watch.watch_dict(d)
        return d

    with pytest.raises(TypeError):
        len(make(), 1)  # type: ignore[call-arg]


# ----------------------------------------------------------------------------- selection


def _run(code: str, env: dict[str, str] | None = None) -> str:
    import os

    full_env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    full_env.update(env or {})
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        check=False,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


@pytest.mark.skipif(HAS_WATCHERS, reason="no-op contract of interpreters without watchers")
def test_noop_below_312() -> None:
    assert _watch.AVAILABLE is False and _watch.FUNCTIONS is False and _watch.BACKEND == "none"
    d: dict[str, int] = {}
    _watch.watch_dict(d)

    class K:
        pass

    _watch.watch_type(K)
    _watch.watch_function(_watch._noop)  # type: ignore[arg-type]
    d["x"] = 1
    K.y = 1  # type: ignore[attr-defined]
    assert _watch.version() == 0


@needs_watchers
def test_off_switch_and_ctypes_opt_in() -> None:
    out = _run(
        """
        from flydeps.watch import watchers as w
        print(w.BACKEND, w.AVAILABLE, w.FUNCTIONS, w.version())
        """,
        {"FLYDEPS_WATCH": "off"},
    )
    assert out.split() == ["none", "False", "False", "0"]
    out = _run(
        """
        from flydeps.watch import watchers as w
        d = {}
        w.watch_dict(d)
        v = w.version(); d["a"] = 1
        print(w.BACKEND, w.AVAILABLE, w.FUNCTIONS, w.version() > v)
        """,
        {"FLYDEPS_WATCH": "ctypes"},
    )
    assert out.split() == ["ctypes", "True", "False", "True"]


@needs_watchers
@pytest.mark.parametrize("mode", ["auto", "ctypes"])
def test_no_free_watcher_slot_degrades_safely(mode: str) -> None:
    # Another user took every dict watcher id before flydeps asked for one.
    out = _run(
        """
        import ctypes, logging
        logging.basicConfig(level=logging.WARNING)
        api = ctypes.pythonapi
        api.PyDict_AddWatcher.argtypes = [ctypes.c_void_p]
        api.PyDict_AddWatcher.restype = ctypes.c_int
        proto = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
        cb = proto(lambda *a: 0)
        taken = 0
        while True:
            try:
                api.PyDict_AddWatcher(ctypes.cast(cb, ctypes.c_void_p))
            except RuntimeError:
                break
            taken += 1
        from flydeps.watch import watchers as w
        if not w.AVAILABLE:
            print("SKIP no backend")
            raise SystemExit(0)
        w.watch_dict({})
        a, b = w.version(), w.version()
        print("RESULT", w.AVAILABLE, b != a, taken > 0)
        """,
        {"FLYDEPS_WATCH": mode},
    )
    if "SKIP" in out:
        pytest.skip(out)
    assert "RESULT False True True" in out
    assert "cannot use the CPython dict watcher" in out
