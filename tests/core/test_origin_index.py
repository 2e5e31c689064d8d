"""The distribution index behind library leaves (``torch==2.13.0``) answers as
``importlib.metadata`` does, without its cost.

Oracle: ``importlib.metadata.packages_distributions()`` and ``importlib.metadata.version()``
on the environment running the tests. Python 3.10's ``packages_distributions`` reads only
``top_level.txt`` (3.11 infers the rest from installed ``.py`` files, 3.12+ from every
installed file: a top-level compiled module such as isort's ``<hash>__mypyc`` too, and a
``__pycache__`` directory as a package): the index applies the running version's rule from
3.11 on (3.11's on 3.10), so it must contain everything the running version's answer has,
``__pycache__`` aside.
"""

from __future__ import annotations

import importlib.metadata
import json
import marshal
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from blake3 import blake3

from flydeps.code import origin as _origin
from flydeps.store import memofile as _memofile


def test_index_agrees_with_importlib_metadata() -> None:
    ours = {top: sorted(dists) for top, dists in _origin._distributions().items()}
    theirs = {top: sorted(dists) for top, dists in importlib.metadata.packages_distributions().items()}
    theirs.pop("__pycache__", None)
    assert theirs, "the test environment has installed distributions"
    missing = {top: dists for top, dists in theirs.items() if ours.get(top) != dists}
    assert missing == {}
    if (3, 11) <= sys.version_info[:2]:
        assert ours == theirs


def test_versions_agree_with_importlib_metadata() -> None:
    versions = _origin._index()[1]
    assert {"blake3", "libcst", "platformdirs"} <= {name.lower() for name in versions}
    for name, version in versions.items():
        assert importlib.metadata.version(name) == version, name


def test_leaf_detail_names_the_distribution() -> None:
    detail = _origin.external_detail("blake3")
    assert detail == f"blake3=={importlib.metadata.version('blake3')}"
    assert _origin.external_detail("json") == _origin.PYTHON_DETAIL
    assert _origin.external_detail("no_such_top_level_package_xyz") == "no_such_top_level_package_xyz"


def test_malformed_metadata_is_read_as_importlib_reads_it(tmp_path: Path) -> None:
    """Bad input: a distribution whose METADATA has no Name is skipped (importlib's index
    would list it under None); odd RECORD rows (quoted commas, blank lines, a bare
    ``.py``) neither crash nor invent packages."""
    good = tmp_path / "good_pkg-1.0.dist-info"
    good.mkdir()
    (good / "METADATA").write_text("Metadata-Version: 2.1\nName: Good-Pkg\nVersion: 1.0\n\nName: not-a-header\n")
    (good / "RECORD").write_text(
        textwrap.dedent(
            """\
            good_pkg/__init__.py,sha256=x,1
            "good_pkg/odd,name.py",sha256=y,2

            top_module.py,,
            .py,,
            good_pkg-1.0.dist-info/METADATA,,
            """
        )
    )
    nameless = tmp_path / "nameless-0.1.dist-info"
    nameless.mkdir()
    (nameless / "METADATA").write_text("Metadata-Version: 2.1\nVersion: 0.1\n")
    found = {d._path.name: d for d in importlib.metadata.distributions(path=[str(tmp_path)])}  # type: ignore[attr-defined]
    assert _origin._name_and_version(found[good.name]) == ("Good-Pkg", "1.0")
    assert _origin._name_and_version(found[nameless.name]) == ("", "0.1")
    assert _origin._top_level_inferred(found[good.name]) == {"good_pkg", "top_module"}


@pytest.mark.parametrize("top", ["blake3", "libcst"])
def test_index_is_what_a_fresh_process_reads(top: str) -> None:
    """The index a process reads back from disk is the one a scan of the installed files gives."""
    _clear()
    try:
        assert _origin._distributions()[top]
        assert _origin._index() == _origin._scan()
    finally:
        _clear()


def _memo_bytes(kind: str, payload: bytes) -> bytes:
    """A memo file as :mod:`flydeps.store.memofile` writes it (header, digest, payload)."""
    return _memofile.header(kind, "-") + blake3(payload).digest() + payload


def _clear() -> None:
    _origin._forget()


def _count_scans(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that gets an item for each scan of the installed distributions from now on."""
    scans: list[int] = []
    real_scan = _origin._scan_paths

    def counted_scan() -> tuple[dict, dict, dict]:
        scans.append(1)
        return real_scan()  # type: ignore[return-value]

    monkeypatch.setattr(_origin, "_scan_paths", counted_scan)
    return scans


def _count_listings(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """A list that gets each ``sys.path`` directory listed for distributions from now on."""
    listed: list[str] = []
    real = _origin._meta_names

    def counted(entry: str) -> list[str]:
        listed.append(entry)
        return real(entry)

    monkeypatch.setattr(_origin, "_meta_names", counted)
    return listed


def _fresh_index() -> tuple[dict, dict]:
    _clear()
    return _origin._index()


def test_disk_memo_follows_installs_rewrites_and_bad_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bad input and changes: a distribution installed, rewritten in place or removed is
    seen by the next process; a corrupt or foreign memo file is ignored and rewritten; a
    cache directory that cannot be written costs only the scan."""
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / "cache"))
    site_dir = tmp_path / "site"
    site_dir.mkdir()
    monkeypatch.syspath_prepend(str(site_dir))
    try:
        before = _fresh_index()
        assert "memo_probe" not in before[0]
        info = site_dir / "memo_probe-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: memo-probe\nVersion: 1.0\n")
        (info / "top_level.txt").write_text("memo_probe\n")
        installed = _fresh_index()
        assert installed[0]["memo_probe"] == ["memo-probe"] and installed[1]["memo-probe"] == "1.0"
        assert installed == _fresh_index()  # read back from the memo
        assert _origin.external_detail("memo_probe") == "memo-probe==1.0"
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: memo-probe\nVersion: 1.10\n")  # in place
        _clear()
        assert _origin._index()[1]["memo-probe"] == "1.0"  # the memo: the site directory did not change
        assert _origin._version("memo-probe") == "1.10"  # used: its metadata is checked, then scanned again
        assert _origin._index()[1]["memo-probe"] == "1.10"  # and the memo rewritten
        assert _fresh_index()[1]["memo-probe"] == "1.10"
        (info / "top_level.txt").write_text("memo_probe\nmemo_probe_extra\n")  # in place again
        _clear()
        assert _origin.external_detail("memo_probe") == "memo-probe==1.10"
        assert _origin._providers("memo_probe_extra") == ["memo-probe"]
        (site_dir / "unrelated.py").write_text("")  # the directory's time moves, its distributions do not
        with monkeypatch.context() as patch:
            scans = _count_scans(patch)
            listed = _count_listings(patch)
            assert _fresh_index()[1]["memo-probe"] == "1.10" and scans == []  # no scan
            assert str(site_dir) in listed  # listed once: same distributions...
            listed.clear()
            assert _fresh_index()[1]["memo-probe"] == "1.10" and scans == []
            assert str(site_dir) not in listed  # ...and remembered with its new time: one stat
        late = site_dir / "late_probe-2.0.dist-info"  # an install after that is seen all the same
        late.mkdir()
        (late / "METADATA").write_text("Metadata-Version: 2.1\nName: late-probe\nVersion: 2.0\n")
        (late / "top_level.txt").write_text("late_probe\n")
        assert _fresh_index()[0]["late_probe"] == ["late-probe"]
        shutil.rmtree(late)
        assert "late_probe" not in _fresh_index()[0]
        memo = Path(_origin._memo_file(_origin._places()))
        good = memo.read_bytes()
        kind = _origin._MEMO_KIND
        foreign: tuple[Any, ...] = ({"places": "someone else", "packages": {}, "versions": {}}, [], {"places": 1})
        for junk in (
            b"{not a memo",
            good[:-9],  # truncated
            good[:-1] + bytes([good[-1] ^ 1]),  # one bit flipped: its digest does not match
            *(  # well formed, but not an index of these places
                _memo_bytes(kind, marshal.dumps(value)) for value in foreign
            ),
        ):
            memo.write_bytes(junk)
            assert _fresh_index() == _origin._scan()
            assert memo.read_bytes() != junk  # and written anew
        shutil.rmtree(info)
        assert "memo_probe" not in _fresh_index()[0]
        monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(memo))  # a file: nothing can be written under it
        assert _fresh_index() == _origin._scan()
    finally:
        _clear()


def test_a_cache_dir_this_process_cannot_write_leaves_the_memo_to_the_user_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``FLYDEPS_CACHE_DIR`` that cannot be written (a shipped directory on a read-only
    volume): its memo is read when it matches, else the index is scanned once and
    remembered under the user cache directory, where the next process reads it."""
    from flydeps import settings

    shipped, home = tmp_path / "shipped", tmp_path / "home"
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(shipped))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home))
    real_can_write = settings.can_write
    monkeypatch.setattr(settings, "can_write", lambda d: not str(d).startswith(str(shipped)) and real_can_write(d))
    scans = _count_scans(monkeypatch)
    try:
        first = _fresh_index()
        assert len(scans) == 1 and not shipped.exists()
        assert [p.parent.parent for p in home.rglob("index-*.marshal")] == [home / "flydeps"]
        assert _fresh_index() == first and len(scans) == 1  # read back from the user cache
        monkeypatch.setattr(settings, "can_write", real_can_write)  # the build machine wrote one
        _fresh_index()
        assert len(scans) == 2 and list(shipped.rglob("index-*.marshal"))
        (home / "flydeps").rename(tmp_path / "gone")
        monkeypatch.setattr(settings, "can_write", lambda d: not str(d).startswith(str(shipped)) and real_can_write(d))
        assert _fresh_index() == first and len(scans) == 2  # the shipped memo matches this machine
    finally:
        _clear()


def test_library_dirs_are_remembered_with_what_places_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The library directories a process reads back from the memo are the ones ``sysconfig``
    and ``site`` give; what moves them (the home the user site follows, ``PYTHONUSERBASE``,
    the prefixes) is part of the memo's state, so a changed one is computed again."""
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / "cache"))
    try:
        _clear()
        computed = _origin._library_dirs()  # scanned and written
        assert computed == _origin._find_library_dirs()
        _clear()
        assert _origin._library_dirs() == computed  # read back
        state = _origin._places()
        userbase = os.environ.get("PYTHONUSERBASE")
        monkeypatch.setenv("PYTHONUSERBASE", str(tmp_path / "userbase"))
        assert _origin._places() != state
        if userbase is None:
            monkeypatch.delenv("PYTHONUSERBASE")
        else:
            monkeypatch.setenv("PYTHONUSERBASE", userbase)
        assert _origin._places() == state
        exec_prefix = sys.exec_prefix
        monkeypatch.setattr(sys, "exec_prefix", str(tmp_path / "elsewhere"))
        assert _origin._places() != state
        monkeypatch.setattr(sys, "exec_prefix", exec_prefix)
        assert _origin._places() == state
        memo = Path(_origin._memo_file(state))
        written = marshal.loads(_memofile.read(str(memo), _origin._MEMO_KIND) or b"")
        written["library_dirs"] = ["/nowhere/"]  # another version's file: its own, not these
        del written["packages"]
        memo.write_bytes(_memo_bytes(_origin._MEMO_KIND, marshal.dumps(written)))
        _clear()
        assert _origin._library_dirs() == _origin._find_library_dirs()
    finally:
        _clear()


# In the venv: the leaf's detail and digest, a user function's fingerprint (a file outside
# site-packages calling the library), and the value the library computes (the oracle).
_REPORT = """\
import json, sys
sys.path.insert(0, sys.argv[1])
import user_kernel
from flydeps.code import origin as _origin
from flydeps import fingerprint
print(json.dumps({
    "library": _origin.is_external_module("fdk_helperlib.helpers"),
    "detail": _origin.external_detail("fdk_helperlib"),
    "leaf": _origin.external_digest("fdk_helperlib.helpers.scale")[0],
    "digest": fingerprint(user_kernel.build).digest,
    "value": user_kernel.build(3),
}))
"""

_SCALE = "def scale(x):\n    return x * {factor}\n\n\ndef main():\n    print(scale(3))\n"


def test_a_reinstall_of_the_same_version_with_other_files_changes_the_leaf(tmp_path: Path, site_library: Any) -> None:
    """A library of one's own installed into site-packages (not editable) is a leaf: it used
    to digest as ``name==version`` alone, so ``pip install .`` after an edit, at the same
    version, left every fingerprint reaching it unchanged (a persistent index served the old
    trace to every new process). The leaf now also stands for what its RECORD lists, in both
    front-ends (the static one through its results cache). Oracle: the value the library
    computes in a new process. A reinstall of the same files digests
    as before (no needless rebuild), and the detail shown stays ``name==version``."""
    user = tmp_path / "user"
    user.mkdir()
    (user / "user_kernel.py").write_text(
        "from fdk_helperlib import helpers\n\n\ndef build(n):\n    return helpers.scale(n) + 1\n"
    )
    report = tmp_path / "report.py"
    report.write_text(_REPORT)
    env = {**site_library.env, "FLYDEPS_CACHE_DIR": str(tmp_path / "cache")}

    def new_process() -> dict[str, Any]:
        command = [sys.executable, str(report), str(user)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        # The static front-end, from the files, through its results cache.
        static = [sys.executable, "-m", "flydeps", "hash", "user_kernel.py::build"]
        hashed = subprocess.run(static, capture_output=True, text=True, timeout=300, env=env, cwd=user)
        assert hashed.returncode == 0, hashed.stderr[-2000:]
        return {**json.loads(done.stdout), "static": hashed.stdout.strip()}

    site_library.install(_SCALE.format(factor=2))
    first = new_process()
    assert first["library"] is True  # a leaf, not walked
    assert first["detail"] == "fdk-helperlib==1.0"
    assert first["value"] == 7
    site_library.install(_SCALE.format(factor=2))  # the same files again: a new RECORD file, the same rows
    assert new_process() == first
    site_library.install(_SCALE.format(factor=3))  # same version, other code
    edited = new_process()
    assert edited["value"] == 10  # what the library now computes
    assert edited["detail"] == first["detail"]
    assert edited["leaf"] != first["leaf"]
    assert edited["digest"] != first["digest"]
    assert edited["static"] != first["static"]


def test_installed_files_digest_ignores_what_differs_between_installs() -> None:
    """Bad and odd input: RECORD rows of the metadata directory, of scripts outside the
    installation root (their first line names the interpreter), without a hash, and an
    editable install's path files (the source tree's absolute path) count for nothing, nor
    does their order; a changed hash or an added file does; no RECORD (an egg-info, a
    system package) is the empty digest."""
    rows = [
        "pkg/__init__.py,sha256=a,1",
        "pkg/core.py,sha256=b,2",
        '"pkg/odd,name.py",sha256=c,3',
        "pkg/__pycache__/core.cpython-311.pyc,,",
        "pkg-1.0.dist-info/INSTALLER,sha256=pip,4",
        "pkg-1.0.dist-info/RECORD,,",
        "../../bin/pkg-tool,sha256=shebang-here,179",
    ]
    base = _origin._installed("\n".join(rows) + "\n")
    moved = [*rows[:4], "pkg-1.0.dist-info/INSTALLER,sha256=uv,3", "pkg-1.0.dist-info/direct_url.json,sha256=d,9"]
    moved += ["__editable__.pkg-1.0.pth,sha256=path-here,40", "__editable___pkg_1_0_finder.py,sha256=paths,900"]
    assert _origin._installed("\n".join(reversed([*moved, "../../../bin/pkg-tool,sha256=elsewhere,180"]))) == base
    assert _origin._installed("\n".join([rows[0], "pkg/core.py,sha256=B,2", *rows[2:]])) != base
    assert _origin._installed("\n".join([*rows, "pkg/new.py,sha256=e,5"])) != base
    assert _origin._installed(None) == _origin._installed("") == ""


def test_installed_digests_are_remembered_across_scans(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A scan reads each RECORD once per machine: a later scan (another directory on
    ``sys.path``, a new process) takes the digest remembered for the file's size, time and
    inode; a rewritten RECORD is read again; a damaged memo file is ignored and rewritten."""
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path / "cache"))
    site_dir = tmp_path / "site"
    info = site_dir / "memo_installed-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: memo-installed\nVersion: 1.0\n")
    (info / "top_level.txt").write_text("memo_installed\n")
    (info / "RECORD").write_text("memo_installed/__init__.py,sha256=a,1\n")
    monkeypatch.syspath_prepend(str(site_dir))
    read: list[str] = []
    real = _origin._installed

    def counted(record: str | None) -> str:
        read.append(record or "")
        return real(record)

    monkeypatch.setattr(_origin, "_installed", counted)
    first = _origin._scan_paths()[3]
    assert first["memo-installed"] == real("memo_installed/__init__.py,sha256=a,1\n")
    assert read  # every RECORD, the first time on this machine
    read.clear()
    assert _origin._scan_paths()[3] == first and read == []  # remembered
    (info / "RECORD").write_text("memo_installed/__init__.py,sha256=b,1\n")  # reinstalled
    again = _origin._scan_paths()[3]
    assert read == ["memo_installed/__init__.py,sha256=b,1\n"]
    assert again["memo-installed"] != first["memo-installed"]
    memo = tmp_path / "cache" / "origin" / "installed.marshal"
    memo.write_bytes(memo.read_bytes()[:-5] + b"XXXXX")  # damaged: its digest no longer matches
    read.clear()
    assert _origin._scan_paths()[3] == again and len(read) > 1  # computed again, and written
    read.clear()
    assert _origin._scan_paths()[3] == again and read == []
