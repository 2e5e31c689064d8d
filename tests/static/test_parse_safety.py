"""One file can never take ``flydeps graph`` down: pathological sources, special files and
crashing parses end as one ``path[:line]: message`` problem each (exit status 1) while the
other files are analysed; pool workers and parse children die with their parent.

Each case runs the real CLI in a child process with a generous time limit (a hang fails
the test; no timing is asserted).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

GOOD = "def good_root(n):\n    return n + 1\n"
PREFIX = '"""A generated module."""\n\n'  # the pathological statement is on line 3


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "pkg"
    root.mkdir()
    (root / "__init__.py").write_text("")
    (root / "good.py").write_text(GOOD)
    for name, text in files.items():
        (root / name).write_text(text)
    return root


def _graph(root: Path, *, python: str = sys.executable, memory: int | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, "FLYDEPS_CACHE_DIR": str(root.parent / "cache")}
    limit = None
    if memory is not None:
        import resource

        def limit() -> None:
            resource.setrlimit(resource.RLIMIT_AS, (memory, memory))

    return subprocess.run(
        [python, "-m", "flydeps", "graph", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limit,  # noqa: PLW1509 - only sets a resource limit
        check=False,
    )


def _assert_one_problem(done: subprocess.CompletedProcess, name: str, message: str, line: int | None) -> None:
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    where = f"pkg/{name}:{line}: " if line is not None else f"pkg/{name}: "
    problems = [x for x in done.stderr.splitlines() if f"pkg/{name}" in x]
    assert len(problems) == 1, done.stderr
    assert where in problems[0] and re.search(message, problems[0]), problems[0]
    assert "pkg.good:good_root" in done.stdout  # the rest of the tree was analysed


@pytest.mark.parametrize(
    ("source", "message"),
    [
        pytest.param(
            "x = " + "(" * 20_000 + "1" + ")" * 20_000, "syntax error: too many nested parentheses", id="paren-20000"
        ),
        pytest.param("x = a" + ".a" * 6000, "nested too deeply", id="attributes-6000"),
        pytest.param("x = " + "-" * 10_000 + "1", "nested too deeply", id="unary-minus-10000"),
        pytest.param("x = " + " + ".join(["1"] * 100_000), "nested too deeply", id="sum-100000"),
        pytest.param("x = " + "not " * 20_000 + "1", "nested too deeply", id="not-20000"),
    ],
)
def test_pathological_expression_is_one_problem_on_its_line(tmp_path: Path, source: str, message: str) -> None:
    root = _package(tmp_path, {"bad.py": PREFIX + source + "\n"})
    done = _graph(root)
    try:  # the oracle: what this interpreter's own compiler says (3.13 accepts 6000 attributes)
        compile(source, "bad.py", "exec")
    except (SyntaxError, RecursionError, MemoryError):
        _assert_one_problem(done, "bad.py", message, 3)
    else:
        assert (done.returncode, done.stderr) == (0, "")
        assert "pkg.good:good_root" in done.stdout


def test_a_fifo_is_skipped_unopened(tmp_path: Path) -> None:
    root = _package(tmp_path, {})
    os.mkfifo(root / "x.py")
    _assert_one_problem(_graph(root), "x.py", r"not a regular file \(a FIFO\)", None)


def test_a_symlink_to_dev_zero_is_skipped(tmp_path: Path) -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero here")
    root = _package(tmp_path, {})
    (root / "zero.py").symlink_to("/dev/zero")
    _assert_one_problem(_graph(root), "zero.py", "not a regular file", None)


def test_an_unreadable_file_is_one_problem(tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    root = _package(tmp_path, {"secret.py": GOOD})
    (root / "secret.py").chmod(0)
    _assert_one_problem(_graph(root), "secret.py", "cannot read file: Permission denied", None)


def test_out_of_memory_on_a_31_mb_file_is_not_called_nesting(tmp_path: Path) -> None:
    body = "".join(f"def f{i}(a, b):\n    return a + b * {i}\n\n" for i in range(680_000))
    assert 30e6 < len(body) < 32e6
    root = _package(tmp_path, {"big.py": body})
    done = _graph(root, memory=1 << 30)
    _assert_one_problem(done, "big.py", r"out of memory while compiling this 31\.\d MB file", 1)
    assert "nest" not in done.stderr


def _python310() -> str | None:
    """A CPython 3.10 with flydeps importable: this one, or the project's .venv310 next to it."""
    if sys.version_info[:2] == (3, 10):
        return sys.executable
    candidate = Path(sys.prefix).parent / ".venv310" / "bin" / "python"
    if not candidate.exists():
        return None
    probe = subprocess.run([str(candidate), "-c", "import flydeps.static"], capture_output=True, check=False)
    return str(candidate) if probe.returncode == 0 else None


def test_a_parser_crash_is_a_problem_of_its_file(tmp_path: Path) -> None:
    """CPython 3.10's parser overflows the C stack on 300,000 chained attributes (SIGSEGV):
    the pre-check sends the file to a child process and the crash stays there."""
    python = _python310()
    if python is None:
        pytest.skip("needs CPython 3.10 with flydeps (.venv310)")
    root = _package(tmp_path, {"chain.py": PREFIX + "x = a" + ".a" * 300_000 + "\n"})
    _assert_one_problem(_graph(root, python=python), "chain.py", r"crashed \(SIGSEGV\)", 3)


_STUCK_CHILDREN = """
import os, sys, time
from flydeps.static import parse

def stuck(source, filename):  # holds every worker busy, as a long parse would
    os.write(1, b"%d\\n" % os.getpid())  # one write: two workers' lines never interleave
    time.sleep(600)

parse.extract = stuck
parse.POOL_MIN_BYTES = 0
jobs = [(f"m{i}.py", b"x = 1\\n" * 100, None) for i in range(4)]
jobs.append(("big.py", b"x = 1\\n" * 40_000, None))  # over the pre-check size: a child of its own
parse._run(jobs[-1:], 1)
"""

_STUCK_POOL = _STUCK_CHILDREN.replace("parse._run(jobs[-1:], 1)", "parse._run(jobs[:-1], 2)")


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            state = handle.read().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")  # a zombie is dead, only not yet reaped


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads /proc")
@pytest.mark.parametrize(("script", "count"), [(_STUCK_POOL, 2), (_STUCK_CHILDREN, 1)], ids=["pool", "isolated"])
def test_workers_die_with_a_killed_parent(tmp_path: Path, script: str, count: int) -> None:
    parent = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path
    )
    assert parent.stdout is not None
    try:
        workers: list[int] = []
        while len(workers) < count:
            line = parent.stdout.readline()
            assert line, f"the parent ended before its workers reported ({workers})"
            workers += [int(word) for word in line.split()]
        assert parent.pid not in workers and all(_alive(pid) for pid in workers)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=60)
        deadline = time.monotonic() + 20  # a liveness bound, not a speed claim
        while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.1)
        survivors = [pid for pid in workers if _alive(pid)]
        assert survivors == []
    finally:
        parent.kill()
        for pid in locals().get("workers", []):
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


_POOL_CRASH = """
from flydeps.static import parse
parse.needs_isolation = lambda source: False  # the pre-check misses it: the pool must survive
parse.POOL_MIN_BYTES = 0
jobs = [(f"m{i}.py", b"x = 1\\n", None) for i in range(3)]
jobs.append(("chain.py", b"x = a" + b".a" * 300_000 + b"\\n", None))
for summary in parse._run(jobs, 2):
    print([problem.message for problem in summary.problems])
"""


def test_a_crash_in_a_pool_worker_is_a_problem_of_its_file(tmp_path: Path) -> None:
    """A worker killed by the real 3.10 parser crash breaks the pool; the batch is redone
    one child per file and only the crashing file reports a problem."""
    python = _python310()
    if python is None:
        pytest.skip("needs CPython 3.10 with flydeps (.venv310)")
    done = subprocess.run([python, "-c", _POOL_CRASH], capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[:3] == ["[]"] * 3 and len(lines) == 4
    assert "crashed (SIGSEGV)" in lines[3]
