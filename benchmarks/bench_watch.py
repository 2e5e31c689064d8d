"""Micro-benchmark of flydeps.watch.watchers: version() cost and the tax watchers put on mutations.

Run:  python benchmarks/bench_watch.py [--number N]
Prints ns per operation (best of 7 repeats) for:
  * version() of the selected backend, the opt-in ctypes backend and the no-op one, next to a
    functools.lru_cache hit and an empty call for scale;
  * d[k] = v on an unwatched dict, a dict watched by the C extension and one watched by ctypes;
  * creating and freeing a closure before any function watcher exists, and with the C
    extension's process-wide function watcher active (1 and 10,000 functions watched).
"""

from __future__ import annotations

import argparse
import functools
import platform
import sys
import timeit
import types
from collections.abc import Callable
from pathlib import Path
from typing import cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))

from flydeps.watch import watchers as _watch


def ns(fn: Callable[[], object], number: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=7)) / number * 1e9


def row(label: str, value: float | None) -> None:
    print(f"  {label:<58} {'n/a' if value is None else f'{value:8.1f} ns'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--number", type=int, default=500_000)
    n = parser.parse_args().number

    print(f"Python {platform.python_version()} ({sys.executable})")
    print(f"flydeps.watch.watchers: BACKEND={_watch.BACKEND} AVAILABLE={_watch.AVAILABLE} FUNCTIONS={_watch.FUNCTIONS}")
    watchers = sys.version_info >= (3, 12) and platform.python_implementation() == "CPython"
    ext = _watch.BACKEND == "ext"
    ctb = _watch._CtypesBackend() if watchers else None

    # Function creation before any function watcher is registered in this process.
    def make_closure() -> Callable[[], None]:
        def inner() -> None:
            pass

        return inner

    closure_before = ns(make_closure, n)

    @functools.lru_cache(maxsize=None)  # noqa: UP033 (the lru_cache hit is the reference)
    def cached(x: int) -> int:
        return x

    cached(1)

    print("\nversion() per call")
    row("empty lambda call (scale)", ns(lambda: None, n))
    row("functools.lru_cache hit  cached(1)", ns(lambda: cached(1), n))
    row(f"flydeps.watch.watchers.version()  [{_watch.BACKEND}]", ns(_watch.version, n))
    row("ctypes backend version()", ns(ctb.version, n) if ctb else None)
    row("no-op backend version()", ns(_watch._zero, n))

    print("\nd[k] = v, alternating two objects (every store is a modification)")
    a, b = object(), object()

    def store_loop(d: dict[str, object]) -> Callable[[], None]:
        def run() -> None:
            d["k"] = a
            d["k"] = b

        return run

    plain: dict[str, object] = {"k": a}
    row("unwatched dict (per store)", ns(store_loop(plain), n) / 2)
    if ext:
        wd: dict[str, object] = {"k": a}
        _watch.watch_dict(wd)
        row("dict watched by the C extension (per store)", ns(store_loop(wd), n) / 2)
    else:
        row("dict watched by the C extension (per store)", None)
    if ctb:
        cd: dict[str, object] = {"k": a}
        ctb.watch_dict(cd)
        row("dict watched by ctypes (per store)", ns(store_loop(cd), n // 10) / 2)
    else:
        row("dict watched by ctypes (per store)", None)

    print("\ncreate + free a closure (function watchers fire for every function in the process)")
    row("no function watcher registered", closure_before)
    if ext and _watch.FUNCTIONS:
        keep = [cast(types.FunctionType, make_closure()) for _ in range(10_000)]
        _watch.watch_function(keep[0])
        row("C-extension watcher active, 1 function watched", ns(make_closure, n))
        for f in keep:
            _watch.watch_function(f)
        row("C-extension watcher active, 10,000 functions watched", ns(make_closure, n))
    else:
        row("C-extension watcher active", None)


if __name__ == "__main__":
    main()
