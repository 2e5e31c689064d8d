"""CLI fuzz (issue 11, "Done when"): every subcommand, run as a real process, on random
bytes, deep nesting, special files, odd paths and names, and bad ``FLYDEPS_*`` values.

Each run must end with exit status 0, 1 or 2 (not a signal: no segfault or abort), within
:data:`TIMEOUT` (no hang), with no traceback (nor the CLI's "internal error" line, which
stands for one) on stderr, and every stderr line must name one of the files of the case
(or the variable): one line per problem file, never a message without its subject.

The subcommands are read from ``flydeps --help``, so a new one is fuzzed too (called as
``flydeps NEW -- PATH...`` unless :func:`_invocation` knows better).
"""

from __future__ import annotations

import os
import random
import re
import shutil
import stat
import subprocess
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

TIMEOUT = 60  # seconds per run; the slowest healthy run here takes a few seconds
VALID = (
    b"import functools\nimport flydsl.compiler as flyc\nimport flydsl.expr as fx\n\nSCALE = 0.5\n\n\n"
    b"def helper(x, y=3):\n    return fx.exp2(x * SCALE) + y\n\n\n@functools.lru_cache(maxsize=8)\n"
    b"def f(n):\n    @flyc.kernel\n    def k(a: fx.Tensor):\n        return helper(a) + n\n\n"
    b"    @flyc.jit\n    def launch(a):\n        k(a).launch(grid=(1, 1, 1))\n\n    return launch\n"
)
# Informational stderr lines that name no file (migrate's summary).
SUMMARY = re.compile(r"\d+ files? (would change|changed)")


@dataclass(frozen=True)
class Run:
    args: tuple[bytes, ...]
    status: int
    out: bytes
    err: str


def _subcommands() -> list[str]:
    """Subcommand names from ``flydeps --help`` (``{graph,hash,diff,migrate}``)."""
    done = subprocess.run([sys.executable, "-m", "flydeps", "--help"], capture_output=True, text=True, timeout=TIMEOUT)
    found = re.search(r"\{([a-z,-]+)\}", done.stdout)
    assert done.returncode == 0 and found, done.stdout + done.stderr
    return found.group(1).split(",")


# ``aot build`` takes one SPEC naming code to import and run, not paths to analyse: its bad
# input (odd, missing or unloadable SPECs) is tested in tests/runtime/test_aotbuild.py.
# ``completion`` (a shell name) and ``cache`` (cache names and sizes) read no source files;
# their bad arguments are tested in test_cli.py and test_cache_cli.py.
NOT_ON_FILES = ("aot", "completion", "cache")
SUBCOMMANDS = [c for c in _subcommands() if c not in NOT_ON_FILES]


def _invocation(command: str, paths: Sequence[bytes]) -> list[bytes]:
    """Arguments of ``command`` on ``paths`` (paths after ``--``: a name may start with -)."""
    cmd = command.encode()
    if command == "hash":
        return [cmd, b"--", paths[0] + b"::f"]
    if command == "diff":
        return [cmd, b"HEAD", b"--", *paths]
    return [cmd, b"--", *paths]


def _flydeps(args: Sequence[bytes], cwd: Path, env: dict[str, str] | None = None) -> Run:
    full = [os.fsencode(sys.executable), b"-m", b"flydeps", *args]
    environ = {**os.environ, **(env or {})}
    proc = subprocess.Popen(
        full, cwd=cwd, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        pytest.fail(f"hang: flydeps {b' '.join(args)!r} still running after {TIMEOUT} s (cwd {cwd})")
    return Run(tuple(args), proc.returncode, out, err.decode("utf-8", "replace"))


def _run_all(calls: Sequence[tuple[Sequence[bytes], Path, dict[str, str] | None]]) -> list[Run]:
    with ThreadPoolExecutor(max_workers=2) as pool:
        return list(pool.map(lambda call: _flydeps(*call), calls))


def _check(run: Run, subjects: Sequence[str]) -> None:
    """Exit 0/1/2, no traceback, and each stderr line names one of ``subjects``."""
    what = f"flydeps {b' '.join(run.args)!r} -> {run.status}\n{run.err[-3000:]}"
    assert run.status in (0, 1, 2), f"killed or crashed: {what}"
    assert "Traceback" not in run.err and "internal error" not in run.err, what
    assert "Exception ignored" not in run.err, what
    lines = run.err.splitlines()
    if run.status:
        assert lines, f"failed without saying why: {what}"
    for line in lines:
        named = line.startswith("pkg: ") or any(s in line for s in subjects)  # pkg: the directory itself
        assert named or SUMMARY.fullmatch(line), f"line names nothing: {line!r}\n{what}"


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=fuzz", "-c", "user.email=fuzz@example.invalid", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        timeout=TIMEOUT,
    )


def _repo(base: Path, files: dict[bytes, bytes], changed: dict[bytes, bytes]) -> Path:
    """A git repository whose HEAD holds ``files`` and whose working tree then gets ``changed``."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    base.mkdir()
    _git(base, "init", "-q")
    pkg = os.fsencode(base / "pkg")
    os.mkdir(pkg)
    for name, data in files.items():
        with open(os.path.join(pkg, name), "wb") as handle:
            handle.write(data)
    _git(base, "add", "-A")
    _git(base, "commit", "-q", "-m", "fuzz case")
    for name, data in changed.items():
        with open(os.path.join(pkg, name), "wb") as handle:
            handle.write(data)
    return base


def _shown(name: bytes) -> str:
    """How a file name appears in a message (escaped: one line, any encoding)."""
    text = os.fsdecode(name)
    return "".join(
        c if c.isprintable() else (f"\\x{ord(c) - 0xDC00:02x}" if 0xDC80 <= ord(c) <= 0xDCFF else repr(c)[1:-1])
        for c in text
    )


# --- random bytes ---------------------------------------------------------------------

# Python-ish fragments (split on |), spliced into random files.
_TOKENS = (
    b"def |class |lambda |(|)|[|]|{|}|:|\n|    |\t|\r|\r\n|\\\n|'''|\"|f'{|}'|@functools.lru_cache\n|@flyc.kernel\n|"
    b"import flydsl.compiler as flyc\n|from . import |from .. import x\n|global |nonlocal |yield |await |async |"
    b"return |x|f|=|+|*|**|->|,|.|0|1e309|0x|\xef\xbb\xbf|\xff|\xc3\xa9|# coding: latin-1\n|# coding: bogus\n|"
    b"match x:\n|case _:\n|type X = int\n|del |if |else:"
).split(b"|")


def _mutate(rng: random.Random, data: bytes) -> bytes:
    out = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        at = rng.randrange(len(out) + 1)
        action = rng.randrange(3)
        if action == 0 and out:
            del out[at : at + rng.randint(1, 20)]
        elif action == 1:
            out[at:at] = rng.choice(_TOKENS)
        else:
            out[at:at] = rng.randbytes(rng.randint(1, 4))
    return bytes(out)


def _literal(rng: random.Random) -> bytes:
    """Valid Python whose global holds raw control characters (ESC, BEL, backspace, ...),
    shown in the tree as ``= text``: they must not reach the terminal as they are."""
    controls = bytes(c for c in range(1, 32) if c not in b"\n\r") + b"\x7f"
    text = bytes(rng.choice(controls + b"abc[;m") for _ in range(rng.randint(1, 40))).replace(b'"', b"")
    return b'X = "%s"\n\n\ndef f():\n    return X\n' % text


def _random_files(seed: int) -> tuple[dict[bytes, bytes], dict[bytes, bytes]]:
    rng = random.Random(seed)
    files: dict[bytes, bytes] = {b"__init__.py": b""}
    for i in range(12):
        size = rng.randint(0, 3000)  # half of them without NUL bytes, which end parsing at once
        alphabet = bytes(range(256)) if i % 2 else bytes(range(9, 14)) + bytes(range(32, 127)) + b"\xc3\xa9\xff"
        files[b"raw%02d.py" % i] = bytes(rng.choice(alphabet) for _ in range(size))
        files[b"mut%02d.py" % i] = _mutate(rng, VALID)
        files[b"tok%02d.py" % i] = b"".join(rng.choice(_TOKENS) for _ in range(rng.randint(1, 200)))
        files[b"lit%02d.py" % i] = _literal(rng)
    changed = {name: _mutate(rng, data or VALID) for name, data in list(files.items())[1::2]}
    return files, changed


@pytest.fixture(scope="module")
def random_case(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    files, changed = _random_files(seed=11)
    repo = _repo(tmp_path_factory.mktemp("random") / "repo", files, changed)
    return repo, [_shown(n) for n in files]


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_random_bytes(command: str, random_case: tuple[Path, list[str]]) -> None:
    repo, names = random_case
    calls = [(_invocation(command, [b"pkg"]), repo, None)]
    if command != "hash":  # hash on a few single files (one each: it takes one target)
        calls.append((_invocation(command, [b"pkg/raw00.py", b"pkg/mut01.py", b"pkg/tok02.py"]), repo, None))
    else:
        calls += [(_invocation(command, [b"pkg/" + n.encode()]), repo, None) for n in ("mut03.py", "tok04.py")]
    for run in _run_all(calls):
        _check(run, names)
        if command == "graph":
            _check_printable(run)


def _check_printable(run: Run) -> None:
    """Tree output (not a terminal: no colour) is printable text, line by line."""
    text = run.out.decode("utf-8")
    bad = [line for line in text.splitlines() if not line.isprintable()]
    assert not bad, f"control characters on stdout: {bad[:3]!r}"


# --- deep nesting and pathological sizes --------------------------------------------------

_HEADER = b"import flydsl.compiler as flyc\nimport functools\n"


def _deep_files() -> dict[bytes, bytes]:
    """The sizes of issue 11: 6000 chained attributes crashed libcst (segfault), 10,000
    unary minus aborted it, a 100,000-term sum took over 120 s; CPython's own limits
    (nested brackets, indentation levels) and a call chain deeper than the tree draws.
    Each file but the chain mentions flydsl, so that ``migrate`` does not skip it."""
    depth = 600  # deep enough to cut the tree; ``diff`` walks each changed root, so keep it modest
    chain = b"".join(b"def f%d():\n    return f%d()\n\n\n" % (i, i + 1) for i in range(depth))
    nested_defs = b"".join(b"    " * i + b"def f%d():\n" % i for i in range(99)) + b"    " * 99 + b"pass\n"
    return {
        b"__init__.py": b"",
        b"parens.py": _HEADER + b"X = " + b"(" * 5000 + b"1" + b")" * 5000 + b"\n",
        b"unary.py": _HEADER + b"X = " + b"-" * 10_000 + b"1\n",
        b"attrs.py": _HEADER + b"X = a" + b".b" * 6000 + b"\n",
        b"terms.py": _HEADER + b"X = " + b" + ".join([b"1"] * 100_000) + b"\n",
        b"nested.py": _HEADER + nested_defs,
        b"indent.py": _HEADER + b"".join(b" " * i + b"if x:\n" for i in range(120)) + b" " * 120 + b"pass\n",
        b"chain.py": chain + b"def f%d():\n    return 0\n" % depth,
        b"wide.py": _HEADER + b"X = '" + b"x" * 2_000_000 + b"'\n",
    }


@pytest.fixture(scope="module")
def deep_case(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    files = _deep_files()
    changed = {b"chain.py": files[b"chain.py"].replace(b"return 0", b"return 1")}
    repo = _repo(tmp_path_factory.mktemp("deep") / "repo", files, changed)
    return repo, [_shown(n) for n in files]


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_deep_nesting(command: str, deep_case: tuple[Path, list[str]]) -> None:
    repo, names = deep_case
    calls = [(_invocation(command, [b"pkg"]), repo, None)]
    if command == "hash":
        calls.append((_invocation(command, [b"pkg/chain.py"]), repo, None))
    for run in _run_all(calls):
        _check(run, names)
        if command == "graph":  # the 600-deep chain was indented in full: 2,400 columns, 750 kB
            widest = max(len(line) for line in run.out.decode().splitlines() if "chain.py" in line)
            assert widest < 300, f"a chain line {widest} characters wide"


# --- special files --------------------------------------------------------------------

_SPECIAL = [b"fifo.py", b"zero.py", b"dir.py", b"dangling.py", b"loop.py", b"unreadable.py"]


@pytest.fixture(scope="module")
def special_case(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[str]]]:
    repo = _repo(tmp_path_factory.mktemp("special") / "repo", {b"__init__.py": b"", b"good.py": VALID}, {})
    pkg = repo / "pkg"
    os.mkfifo(pkg / "fifo.py")
    (pkg / "zero.py").symlink_to("/dev/zero")
    (pkg / "dir.py").mkdir()
    (pkg / "dangling.py").symlink_to(pkg / "missing.py")
    (pkg / "loop.py").symlink_to(pkg / "loop.py")
    (pkg / "unreadable.py").write_bytes(VALID)
    (pkg / "unreadable.py").chmod(0)  # unreadable unless the tests run as root
    yield repo, [_shown(n) for n in [*_SPECIAL, b"good.py"]]
    (pkg / "unreadable.py").chmod(stat.S_IRUSR | stat.S_IWUSR)


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_special_files(command: str, special_case: tuple[Path, list[str]]) -> None:
    """A FIFO named ``*.py`` (hung graph and migrate), a symlink to /dev/zero (MemoryError),
    a directory named ``*.py``, broken and looping links, an unreadable file: named on
    the command line and met while walking the directory."""
    repo, names = special_case
    named = [b"pkg/" + n for n in _SPECIAL]
    calls = [(_invocation(command, [b"pkg"]), repo, None)]
    if command == "hash":
        calls += [(_invocation(command, [b"pkg/fifo.py"]), repo, None)]
        calls += [(_invocation(command, [b"pkg/zero.py"]), repo, None)]
    else:
        calls.append((_invocation(command, named), repo, None))
    for run in _run_all(calls):
        _check(run, names)


# --- odd paths and names ----------------------------------------------------------------

_ODD = [
    b"my file.py",
    b"new\nline.py",
    b"\xff\xfe.py",
    b"-x.py",
    b"tab\tname.py",
    b"esc\x1b[2J.py",  # a terminal escape sequence: printed escaped, never as it is
    b"L" * 250 + b".py",
]


@pytest.fixture(scope="module")
def odd_case(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    plain = b"def f():\n    return g()\n\n\ndef g():\n    return 1\n"  # migrate skips it unparsed
    files = {b"__init__.py": b"", b"bad\nsyntax.py": b"def (:\n", **dict.fromkeys(_ODD, plain)}
    files.update(dict.fromkeys([b"new\nline.py", b"\xff\xfe.py"], VALID))  # these go through libcst
    changed = {b"new\nline.py": VALID.replace(b"SCALE = 0.5", b"SCALE = 0.25")}
    repo = _repo(tmp_path_factory.mktemp("odd") / "repo", files, changed)
    return repo, [_shown(n) for n in files]


@pytest.mark.parametrize("command", SUBCOMMANDS)
def test_odd_paths_and_names(command: str, odd_case: tuple[Path, list[str]]) -> None:
    """Spaces, a newline, undecodable bytes, a leading dash (after ``--``), a tab, an escape
    sequence, a 254-byte name; a syntax error in a file whose name holds a newline still gives one line; a
    path too long for the OS is just missing."""
    repo, names = odd_case
    too_long = b"pkg/" + b"d/" * 2100 + b"x.py"
    calls = [(_invocation(command, [b"pkg"]), repo, None)]
    if command == "hash":
        calls += [
            (_invocation(command, [b"pkg/" + n]), repo, None) for n in (b"new\nline.py", b"-x.py", b"\xff\xfe.py")
        ]
    else:
        named = [b"pkg/" + n for n in _ODD] + [b"pkg/bad\nsyntax.py", too_long]
        calls.append((_invocation(command, named), repo, None))
    for run in _run_all(calls):
        _check(run, [*names, "d/d/d/d/x.py"])
        if command == "graph":
            _check_printable(run)
    leading_dash = _flydeps([b"graph", b"--", b"pkg/-x.py"], repo)
    assert leading_dash.status == 0 and b"-x:f" in leading_dash.out, leading_dash


# --- bad environment values -----------------------------------------------------------

# ``flydeps.settings.validate`` checks every variable before any command runs, so each
# bad value stops every subcommand with exit 2, whether that command reads it or not.
BAD_ENV = {
    "FLYDEPS_MAX_FILE_BYTES": "abc",
    "FLYDEPS_SNAPSHOT_LIMIT": "-1",
    "FLYDEPS_WATCH": "garbage",
    "FLYDEPS_FASTCACHE": "maybe",
}


@pytest.fixture(scope="module")
def env_case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _repo(tmp_path_factory.mktemp("env") / "repo", {b"__init__.py": b"", b"good.py": VALID}, {})


@pytest.mark.parametrize("variable", sorted(BAD_ENV))
def test_bad_environment_values(variable: str, env_case: Path) -> None:
    env = {variable: BAD_ENV[variable]}
    commands = ["--help", *SUBCOMMANDS]
    calls = [(_invocation(c, [b"pkg/good.py"]) if c != "--help" else [b"--help"], env_case, env) for c in commands]
    runs = dict(zip(commands, _run_all(calls), strict=True))
    for run in runs.values():
        _check(run, [variable, "good.py"])
        if run.status == 2:
            assert len(run.err.splitlines()) == 1 and BAD_ENV[variable] in run.err, run
    graph = runs["graph"]
    assert graph.status == 2 and graph.err.startswith(f"flydeps: {variable}="), graph
