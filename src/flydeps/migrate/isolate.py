"""Keep a native parser (libcst) from taking the command down: a cheap pre-check of each
source, then the parse in worker processes that may crash, time out, and die with us.

Contract:

* :func:`precheck` scans a source with :mod:`tokenize` (linear, no tree) and returns
  ``(line, message)`` when it holds an expression libcst is known to crash on or to take
  minutes over -- operator/attribute/subscript/call chains longer than
  :data:`MAX_CHAIN` (a 6000-attribute chain segfaults libcst 1.9, 10,000 unary minus
  abort it after 5 GB, a 5000-term sum takes 40 s: its parse time grows with the cube of
  the chain), bracket nesting deeper than :data:`MAX_DEPTH` (CPython's own limit), or that
  the tokenizer rejects (CPython's syntax error then) -- and
  ``None`` when the source is safe to hand over.
* :func:`run_isolated` calls ``func(item)`` for every item in worker processes (at most
  ``workers`` at a time, one item per message) and yields ``(index, result)`` as results
  arrive; an item whose worker dies (a signal, ``os._exit``), raises, or outlives its
  ``timeout`` yields a :class:`Crashed` with the reason instead, the worker is replaced and
  the other items go on. Workers die with the process that started them
  (:func:`~flydeps.static.processes.die_with_parent`: ``PR_SET_PDEATHSIG`` on Linux, a parent watchdog
  elsewhere), are capped at
  :data:`MEMORY_HEADROOM` bytes of address space above what they inherit, and are stopped
  when the generator is closed. ``func`` and the items must pickle (``spawn``) unless the
  process is single-threaded, when workers are forked (cheap, and they see its state).
"""

from __future__ import annotations

import ast
import faulthandler
import io
import logging
import os
import signal
import time
import tokenize
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any, Generic, TypeVar

from ..static import processes
from ..static.processes import die_with_parent

__all__ = ["MAX_CHAIN", "MAX_DEPTH", "Crashed", "precheck", "run_isolated"]

log = logging.getLogger("flydeps.static")

#: Longest operator chain (``a.b.c``, ``a + b + c``, ``- - x``, ``f()()``) in one expression.
MAX_CHAIN = 500
#: Deepest bracket nesting; CPython refuses more than 200 itself.
MAX_DEPTH = 200
MEMORY_HEADROOM = 4 << 30

T = TypeVar("T")
R = TypeVar("R")

_KEYWORD_OPERATORS = frozenset({"and", "or", "not", "in", "is", "if", "else", "lambda", "await"})
_SEPARATORS = frozenset({",", ";", ":", "=", "->", ":="})
_OPEN, _CLOSE = frozenset("([{"), frozenset(")]}")
_ENDS_OPERAND = frozenset({tokenize.NAME, tokenize.NUMBER, tokenize.STRING})


def precheck(text: str) -> tuple[int, str] | None:
    """``(line, message)`` when ``text`` is too deep for libcst or not Python (the tokenizer
    fails: CPython's syntax error, so libcst never sees it), else None."""
    chain = [0]  # operators in a row, per open bracket
    previous: tokenize.TokenInfo | None = None
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.NEWLINE:
                chain = [0]
            elif token.type == tokenize.OP or (token.type == tokenize.NAME and token.string in _KEYWORD_OPERATORS):
                chain = _step(chain, token.string, previous)
                if len(chain) - 1 > MAX_DEPTH:
                    return token.start[0], _too_deep(f"brackets nested {len(chain) - 1} deep", MAX_DEPTH)
                if sum(chain) + len(chain) > MAX_CHAIN:
                    return token.start[0], _too_deep(f"an expression chains over {MAX_CHAIN} operators", MAX_CHAIN)
            previous = token
    except (tokenize.TokenError, SyntaxError):
        return _syntax_error(text)
    return None


def _syntax_error(text: str) -> tuple[int, str] | None:
    """CPython's own account of a source the tokenizer rejects (never handed to libcst)."""
    try:
        compile(text, "<source>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        return exc.lineno or 1, f"syntax error: {exc.msg}; fix the file"
    except (RecursionError, MemoryError, ValueError) as exc:
        return 1, f"syntax error: {type(exc).__name__} in CPython's parser; fix the file"
    return None


def _step(chain: list[int], op: str, previous: tokenize.TokenInfo | None) -> list[int]:
    if op in _OPEN:
        trailer = previous is not None and (previous.type in _ENDS_OPERAND or previous.string in _CLOSE)
        chain[-1] += trailer  # `f(x)(y)`, `a[0][1]` chain like attributes
        chain.append(0)
    elif op in _CLOSE:
        if len(chain) > 1:
            chain.pop()
    elif op in _SEPARATORS:
        chain[-1] = 0
    else:
        chain[-1] += 1
    return chain


def _too_deep(what: str, limit: int) -> str:
    return (
        f"{what} (limit {limit}): libcst could crash or take minutes on it, so the file is not "
        "migrated; split the expression or migrate the file by hand"
    )


@dataclass(frozen=True)
class Crashed:
    """An item whose worker died, raised or ran out of time; ``reason`` says which."""

    reason: str


@dataclass
class _Worker(Generic[T]):
    process: Any  # multiprocessing.Process of whichever context
    conn: Connection
    index: int | None = None
    deadline: float = 0.0


def run_isolated(
    func: Callable[[T], R],
    items: Sequence[T],
    *,
    workers: int,
    timeout: Callable[[T], float],
) -> Iterator[tuple[int, R | Crashed]]:
    """``(index, func(items[index]))`` for every item, in completion order."""
    context = processes.context()
    pending = deque(range(len(items)))
    pool: list[_Worker[T]] = []
    try:
        while pending or any(w.index is not None for w in pool):
            for worker in pool:
                if worker.index is None and pending:
                    _assign(worker, pending.popleft(), items, timeout)
            while pending and len(pool) < max(1, workers):
                pool.append(_start(context, func))
                _assign(pool[-1], pending.popleft(), items, timeout)
            yield from _collect(pool)
    finally:
        for worker in pool:
            _stop(worker)


def _start(context: Any, func: Callable[[T], R]) -> _Worker[T]:
    parent_end, child_end = context.Pipe()
    process = context.Process(target=_serve, args=(child_end, func, os.getpid()), daemon=True)
    process.start()
    child_end.close()
    return _Worker(process, parent_end)


def _assign(worker: _Worker[T], index: int, items: Sequence[T], timeout: Callable[[T], float]) -> None:
    worker.index, worker.deadline = index, time.monotonic() + timeout(items[index])
    worker.conn.send((index, items[index]))


def _collect(pool: list[_Worker[T]]) -> Iterator[tuple[int, Any]]:
    """Wait for the first answers (or deaths, or deadlines) of the busy workers; a dead or
    late worker leaves the pool (the caller starts another if work is left)."""
    busy = [w for w in pool if w.index is not None]
    left = min(w.deadline for w in busy) - time.monotonic()
    wait([w.conn for w in busy] + [w.process.sentinel for w in busy], timeout=max(0.0, left))
    for worker in busy:
        index = worker.index
        assert index is not None
        answer: Any = None
        if worker.conn.poll():
            try:
                answer = worker.conn.recv()
            except (EOFError, OSError):
                answer = None
        if answer is not None:
            worker.index = None
            yield index, answer[1]
        elif not worker.process.is_alive() or time.monotonic() >= worker.deadline:
            pool.remove(worker)
            yield index, Crashed(_death(worker))


def _death(worker: _Worker[T]) -> str:
    late = worker.process.is_alive()
    _stop(worker)
    if late:
        return "did not finish in time (killed)"
    code = worker.process.exitcode
    if code is not None and code < 0:
        try:
            return f"crashed (killed by {signal.Signals(-code).name})"
        except ValueError:
            return f"crashed (killed by signal {-code})"
    return f"crashed (exit status {code})"


def _stop(worker: _Worker[T]) -> None:
    try:
        worker.conn.close()
    except OSError:
        pass
    if worker.process.is_alive():
        worker.process.kill()
    worker.process.join(5)


def _serve(conn: Connection, func: Callable[[Any], Any], parent: int) -> None:
    """A worker: answer ``(index, item)`` messages with ``(index, func(item))`` until EOF."""
    die_with_parent(parent)
    _limit_memory()
    faulthandler.disable()  # a crash is reported by the parent in one line, not dumped here
    while True:
        try:
            index, item = conn.recv()
        except (EOFError, OSError):
            return
        try:
            result: Any = func(item)
        except Exception as exc:  # the item's failure, reported on it; the worker goes on
            result = Crashed(f"raised {type(exc).__name__}: {exc}")
        try:
            conn.send((index, result))
        except (EOFError, OSError):
            return
        except Exception as exc:  # an answer that does not pickle
            conn.send((index, Crashed(f"cannot send the result back: {type(exc).__name__}: {exc}")))


def _limit_memory() -> None:
    """Cap the address space, so that a runaway parse fails (and is reported) in the
    worker instead of swapping the machine."""
    try:
        import resource

        with open("/proc/self/statm") as handle:
            current = int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = current + MEMORY_HEADROOM
        if hard == resource.RLIM_INFINITY or limit < hard:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ImportError, OSError, ValueError):
        log.debug("no address-space limit for the migrate worker on this platform")
