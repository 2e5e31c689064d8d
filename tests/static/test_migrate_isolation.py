"""``flydeps migrate`` on input that crashes or stalls libcst (issue 11, item 5): the file
ends as ``path:line: message``, the others are migrated, the command never dies.

The command runs in a child interpreter: on the old code the same input segfaults it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

MAX_CHAIN = 500  # flydeps.migrate.isolate.MAX_CHAIN; imported inside the tests, so that the
# old code (no such module) fails each test rather than the collection
ROOT = Path(__file__).resolve().parents[2]
HEADER = "import flydsl.compiler as flyc\n"  # passes the pre-filter: the file must be parsed
GOOD = "import flydsl.compiler as flyc\n"


def _flydeps(
    *args: str, cwd: Path, script: str = "", timeout: float = 600, stack: int = 0
) -> subprocess.CompletedProcess[str]:
    """``flydeps migrate ARGS`` in a fresh interpreter, after ``script`` (a monkeypatch),
    with a ``stack``-byte stack limit (``ulimit -s``) when given."""
    code = f"import sys\n{script}\nfrom flydeps.cli import main\nsys.exit(main(sys.argv[1:]))\n"

    def limit_stack() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_STACK, (stack, resource.getrlimit(resource.RLIMIT_STACK)[1]))

    return subprocess.run(
        [sys.executable, "-c", code, "migrate", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        preexec_fn=limit_stack if stack else None,
    )


def _one_line(stderr: str, name: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith(f"{name}:")]
    assert len(lines) == 1, stderr
    return lines[0]


def test_pathological_files_end_as_one_line_and_the_rest_are_migrated(tmp_path: Path) -> None:
    """The issue's inputs: 6000 chained attributes (libcst segfaults), 10k unary minus
    (aborts after 5 GB), a 100k-term sum (> 120 s); the pre-check turns them away."""
    (tmp_path / "chain.py").write_text(HEADER + "x = a" + ".b" * 6000 + "\n")
    (tmp_path / "unary.py").write_text(HEADER + "x = " + "-" * 10_000 + "1\n")
    (tmp_path / "total.py").write_text(HEADER + "x = " + "+".join(["1"] * 100_000) + "\n")
    (tmp_path / "good.py").write_text(GOOD)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    done = _flydeps(".", "--write", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    for name in ("chain.py", "unary.py", "total.py"):
        line = _one_line(done.stderr, name)
        assert line.startswith(f"{name}:2: an expression chains over {MAX_CHAIN} operators (limit {MAX_CHAIN}): ")
        assert (tmp_path / name).read_bytes() == before[name]
    assert (tmp_path / "good.py").read_text() == "import flydsl_runtime.flyc as flyc\n"
    assert done.stderr.endswith("1 file changed\n")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="stack size as on Linux")
def test_a_real_libcst_segfault_is_that_files_diagnostic(tmp_path: Path) -> None:
    """Without the pre-check, libcst 1.9 overflows its stack on a long attribute chain: in a
    worker process, which is reported and replaced while the other files are migrated. With
    a 1 MiB stack (``ulimit -s 1024``) 1000 attributes do what 6000 do with the usual 8 MiB,
    in a second instead of two minutes."""
    (tmp_path / "chain.py").write_text(HEADER + "x = a" + ".b" * 1000 + "\n")
    for name in ("a.py", "z.py"):
        (tmp_path / name).write_text(GOOD)
    script = "import flydeps.migrate.tree as m\nm.precheck = lambda text: None"
    done = _flydeps(".", "--write", cwd=tmp_path, script=script, stack=1 << 20)
    assert done.returncode == 1, done.stderr
    line = _one_line(done.stderr, "chain.py")
    assert line.startswith("chain.py:1: libcst ") and " crashed (killed by SIG" in line
    assert line.endswith(
        "while migrating this file; nothing was changed, migrate it by hand (and please report the file)"
    )
    assert (tmp_path / "a.py").read_text() == (tmp_path / "z.py").read_text() == "import flydsl_runtime.flyc as flyc\n"


def test_a_parse_that_outlives_its_time_is_killed_and_reported(tmp_path: Path) -> None:
    """A 20,000-term sum takes libcst minutes (its time grows with the cube of the chain)."""
    (tmp_path / "slow.py").write_text(HEADER + "x = " + "+".join(["1"] * 20_000) + "\n")
    (tmp_path / "good.py").write_text(GOOD)
    script = "import flydeps.migrate.tree as m\nm.precheck = lambda text: None\nm._deadline = lambda job: 3.0"
    done = _flydeps(".", "--write", cwd=tmp_path, script=script, timeout=120)
    assert done.returncode == 1, done.stderr
    assert " did not finish in time (killed) while migrating" in _one_line(done.stderr, "slow.py")
    assert (tmp_path / "good.py").read_text() == "import flydsl_runtime.flyc as flyc\n"


def _segfault(item: int) -> int:
    if item == 1:
        import ctypes

        ctypes.string_at(0)  # a real SIGSEGV in native code
    if item == 2:
        os._exit(7)
    if item == 3:
        raise ValueError("bad item")
    return item * 10


def test_run_isolated_reports_each_death_on_its_item() -> None:
    from flydeps.migrate.isolate import Crashed, run_isolated

    results = dict(run_isolated(_segfault, [0, 1, 2, 3, 4, 5], workers=2, timeout=lambda item: 60.0))
    assert results == {
        0: 0,
        1: Crashed("crashed (killed by SIGSEGV)"),
        2: Crashed("crashed (exit status 7)"),
        3: Crashed("raised ValueError: bad item"),
        4: 40,
        5: 50,
    }


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")  # a zombie is dead


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_workers_die_with_a_killed_parent(tmp_path: Path) -> None:
    """SIGKILL the process running the pool: its workers must not outlive it."""
    script = textwrap.dedent(
        """
        import os, sys, time
        from flydeps.migrate.isolate import run_isolated

        def work(item):
            os.write(1, b"%d\\n" % os.getpid())  # one write: the two workers' lines never interleave
            time.sleep(300)

        for _ in run_isolated(work, [0, 1], workers=2, timeout=lambda item: 600.0):
            pass
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert parent.stdout is not None and parent.stderr is not None
    lines = [parent.stdout.readline() for _ in range(2)]
    if not all(lines):
        raise AssertionError(parent.stderr.read().decode())
    workers = [int(line) for line in lines]
    parent.send_signal(signal.SIGKILL)
    parent.wait()
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers)


@pytest.mark.parametrize(
    ("source", "line"),
    [
        ("x = a" + ".b" * (MAX_CHAIN - 2) + "\n", None),
        ("x = a" + ".b" * MAX_CHAIN + "\n", 1),
        ("y = 1\nx = f" + "()" * MAX_CHAIN + "\n", 2),
        ("x = a" + "[0]" * MAX_CHAIN + "\n", 1),
        ("x = " + "not " * MAX_CHAIN + "y\n", 1),
        ("x = [" + ", ".join(["a + b"] * 5000) + "]\n", None),  # a long list of short expressions
        ("x = " + "(" * 201 + "1" + ")" * 201 + "\n", 1),
        ("s = '" + "+" * 5000 + "'  # " + "." * 5000 + "\n", None),  # strings and comments are not code
        ("y = 1\nx = (1 +\n", 2),  # the tokenizer fails: CPython's syntax error, no libcst
    ],
)
def test_precheck_bounds(source: str, line: int | None) -> None:
    from flydeps.migrate.isolate import MAX_CHAIN as limit
    from flydeps.migrate.isolate import precheck

    assert limit == MAX_CHAIN
    found = precheck(source)
    assert (found[0] if found else None) == line


def test_precheck_passes_every_source_of_the_project() -> None:
    """No false alarm on real code: this repository's sources, tests and examples."""
    from flydeps.migrate.isolate import precheck

    files = [p for d in ("src", "examples", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py")]
    assert len(files) > 100
    flagged = [str(p) for p in files if precheck(p.read_text(encoding="utf-8", errors="replace"))]
    assert flagged == []
