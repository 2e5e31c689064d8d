"""flydeps.store.codegen: generated check source -> code object, compiled once per interpreter
build and remembered on disk. The oracle is CPython itself: ``compile``'s own audit event
says whether a process compiled, and the code object read back is compared with what
``compile`` returns."""

from __future__ import annotations

import json
import marshal
import os
import subprocess
import sys
from pathlib import Path

import pytest
from blake3 import blake3

from flydeps.store import codegen as _codegen
from flydeps.store import memofile as _memofile

SOURCE = "def check():\n    return c0.cell_contents is e0 and c1.cell_contents is e1\n"
NAME = "<flydeps guard>"

# A new process: each source compiled through _codegen.code, reporting whether CPython's
# `compile` audit event fired for it and what the function it defines returns.
CHILD = r"""
import json, logging, sys
logging.basicConfig(level=logging.WARNING)  # flydeps' warnings to stderr
compiled = []
sys.addaudithook(lambda event, args: compiled.append(args[1]) if event == "compile" and args[1] == "<t>" else None)
from flydeps.store import codegen as _codegen
out = []
for source in json.loads(sys.argv[1]):
    before = len(compiled)
    namespace = {}
    exec(_codegen.code(source, "<t>"), namespace)
    out.append({"compiled": len(compiled) > before, "result": namespace["f"]()})
print(json.dumps(out))
"""


def _child(cache: Path, sources: list[str], **env: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(sources)],
        env={**os.environ, "FLYDEPS_CACHE_DIR": str(cache), **env},
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def _key(source: str, filename: str) -> str:
    return blake3(f"{filename}\0{source}".encode()).hexdigest()


def _memo(cache: Path, source: str, filename: str = "<t>") -> Path:
    """The file that remembers ``source`` compiled as ``filename``, under ``cache``."""
    (directory,) = (cache / "codegen").iterdir()  # one interpreter build here
    return directory / f"{_key(source, filename)}.marshal"


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """This process's memo forgotten, the cache root a new directory."""
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(_codegen, "_known", {})
    return tmp_path / "cache"


def _same_code(a: object, b: object) -> None:
    for attr in ("co_code", "co_consts", "co_names", "co_varnames", "co_filename", "co_name", "co_flags"):
        assert getattr(a, attr) == getattr(b, attr), attr


def test_the_code_is_what_compile_gives_and_a_new_process_reads_it_back(fresh: Path) -> None:
    made = _codegen.code(SOURCE, NAME)
    _same_code(made, compile(SOURCE, NAME, "exec"))
    assert _codegen.code(SOURCE, NAME) is made  # remembered in the process
    assert _memo(fresh, SOURCE, NAME).is_file()
    sources = ["def f():\n    return 41 + 1\n", "def f():\n    return 'x' * 3\n"]
    first = _child(fresh, sources)
    assert first == [{"compiled": True, "result": 42}, {"compiled": True, "result": "xxx"}]
    again = _child(fresh, [*sources, "def f():\n    return 7\n"])
    assert again == [  # read from the file: CPython compiled only the source it had not seen
        {"compiled": False, "result": 42},
        {"compiled": False, "result": "xxx"},
        {"compiled": True, "result": 7},
    ]
    # Another file name is another code object (co_filename), never the remembered one.
    assert _codegen.code(SOURCE, "<other>").co_filename == "<other>"


@pytest.mark.parametrize(
    "damage", ["flipped byte", "truncated", "empty", "foreign", "another key's", "not code", "not a code list"]
)
def test_a_damaged_or_foreign_memo_is_ignored_and_replaced(fresh: Path, damage: str) -> None:
    """Bad input: the memo file altered after it was written. Nothing in it is used (a
    constant changed in a code object, or another source's code, would otherwise run as a
    guard); the source is compiled again and the file is written anew."""
    source = "def f():\n    return 41 + 1\n"
    assert _child(fresh, [source]) == [{"compiled": True, "result": 42}]
    memo = _memo(fresh, source)
    data = memo.read_bytes()
    first = _memofile.header(_codegen._KIND, _key(source, "<t>"))
    header = len(first) + _memofile._DIGEST
    if damage == "flipped byte":  # the constant 42 (CPython folds 41 + 1) becomes 43: still valid marshal
        found = [data.find(tag + (42).to_bytes(4, "little"), header) for tag in (b"i", b"\xe9")]
        i = max(found) + 1
        assert i > header, "the marshaled constant 42 is in the memo"
        memo.write_bytes(data[:i] + bytes([43]) + data[i + 1 :])
    elif damage == "truncated":
        memo.write_bytes(data[: len(data) - 7])
    elif damage == "empty":
        memo.write_bytes(b"")
    elif damage == "foreign":
        memo.write_bytes(b"\x00garbage" * 40)
    elif damage == "another key's":  # a whole, valid file of another source, copied over it
        other = "def f():\n    return 7\n"
        assert _child(fresh, [other]) == [{"compiled": True, "result": 7}]
        memo.write_bytes(_memo(fresh, other).read_bytes())
    else:  # well formed, its digest right, but holding something other than a code object
        payload = marshal.dumps(42 if damage == "not code" else [1, 2])
        memo.write_bytes(first + blake3(payload).digest() + payload)
    assert _child(fresh, [source]) == [{"compiled": True, "result": 42}]
    assert _child(fresh, [source]) == [{"compiled": False, "result": 42}]  # written anew, whole


def test_an_entry_is_read_whole_even_when_it_grew_after_its_size_was_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An entry is read to its end, up to the size bound, whatever size ``fstat`` gave
    before the read (the file sized the read; a writer that appended meanwhile must not
    turn the entry into a shorter one). The digest then decides, as for any entry."""
    path = tmp_path / "entry"
    payload = bytes(range(256)) * 64
    assert _memofile.write(path, "kind-1", payload)
    assert _memofile.read(path, "kind-1") == payload
    real_fstat = os.fstat

    def shrunk(fd: int) -> os.stat_result:  # the size as it was before a writer appended
        st = real_fstat(fd)
        fields = list(st)
        fields[6] = st.st_size // 3
        return os.stat_result(fields)

    monkeypatch.setattr(os, "fstat", shrunk)
    assert _memofile.read(path, "kind-1") == payload
    assert _memofile.read_file(path, "kind-1", "-") == path.read_bytes()[len(_memofile.header("kind-1", "-")) :]
    monkeypatch.setattr(_memofile, "MAX_ENTRY_BYTES", len(path.read_bytes()) - 1)
    assert _memofile.read(path, "kind-1") is None  # over the bound, however it was sized


def test_an_unwritable_cache_costs_a_compile_and_nothing_else(tmp_path: Path) -> None:
    """Bad input: the cache root (and the user cache directory) cannot be made, a file is
    in the way: every process compiles, nothing fails, nothing is written."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    env = {"XDG_CACHE_HOME": str(blocker)}
    for _ in range(2):
        assert _child(blocker / "cache", ["def f():\n    return 1\n"], **env) == [{"compiled": True, "result": 1}]
    assert blocker.read_text() == "not a directory"


def test_generated_checks_go_through_it(fresh: Path) -> None:
    """The guards, argument keys and environment checks are compiled through the memo: a new
    process making the same check compiles nothing."""
    check = (
        "import sys\n"
        "compiled = []\n"
        "def hook(event, args):\n"
        "    if event == 'compile' and str(args[1]).startswith('<flydeps'):\n"
        "        compiled.append(args[1])\n"
        "sys.addaudithook(hook)\n"
        "import os, flydeps\n"
        "from flydeps.observe.environ import recording\n"
        "def helper(x):\n    return x + 1\n"
        "def root(x):\n    return helper(x)\n"
        "fp = flydeps.fingerprint(root)\n"
        "assert fp.guard().check()\n"
        "with recording() as rec:\n    os.environ.get('HOME')\n"
        "assert rec.reads().holds()\n"
        "print(sorted(set(compiled)))\n"
    )
    env = {**os.environ, "FLYDEPS_CACHE_DIR": str(fresh)}
    runs = [
        subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, check=True)
        for _ in range(2)
    ]
    first, second = (run.stdout.strip().splitlines()[-1] for run in runs)
    assert "<flydeps guard>" in first and "<flydeps-env-reads>" in first
    assert second == "[]"


def test_code_is_read_only_from_a_private_directory(fresh: Path) -> None:
    """Bad input: the directory of shapes writable by others (anyone could plant a guard),
    or a shape that is a symlink. The code read back runs, so nothing is read from there:
    every process compiles, and the refused directory is named in one warning."""
    source = "def f():\n    return 41 + 1\n"
    assert _child(fresh, [source]) == [{"compiled": True, "result": 42}]
    memo = _memo(fresh, source)
    memo.parent.chmod(0o777)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps([source])],
        env={**os.environ, "FLYDEPS_CACHE_DIR": str(fresh)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [{"compiled": True, "result": 42}]
    assert f"not using the cache directory {memo.parent}" in done.stderr and "0777" in done.stderr
    memo.parent.chmod(0o700)
    planted = memo.with_name("planted")
    memo.rename(planted)
    memo.symlink_to(planted)
    assert _child(fresh, [source]) == [{"compiled": True, "result": 42}]  # the symlink is not followed
