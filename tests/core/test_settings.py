"""Every ``FLYDEPS_*`` variable goes through :mod:`flydeps.settings` (issue 11, item 8).

The parsers are checked on every accepted word and on bad values; then each variable is
set to a bad value where flydeps really reads it (at import in a fresh interpreter, or
lazily in process) and must raise ``SettingError`` naming it. The switches are checked by
their effect: ``FLYDEPS_FASTCACHE=no`` gives the Python hit path, ``FLYDEPS_AUDIT_HOOK=false``
adds no audit hook (seen by a hook of the test's own: CPython announces every
``sys.addaudithook``). Docs and sources are checked against ``SETTINGS``.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from flydeps import settings
from flydeps.builds import logswitch as _logswitch
from flydeps.settings import SETTINGS, SettingError
from flydeps.static import extract, parse, symbols

ROOT = Path(__file__).resolve().parents[2]
TRUE_WORDS = ("1", "true", "yes", "on", "TRUE", " Yes ", "On")
FALSE_WORDS = ("0", "false", "no", "off", "FALSE", " No", "oFF ")
# A bad value for each kind of variable (text variables take any string).
BAD = {
    "flag": ("maybe", "2", "enable", "y"),
    "integer": ("abc", "0", "-1", "1.5", "1e3"),
    "choice": ("garbage", "on"),
    "names": ("a b", "pkg-name", "1abc"),
}


def _bad_cases() -> list[tuple[str, str]]:
    cases = [(name, bad) for name, s in SETTINGS.items() if s.kind in BAD for bad in BAD[s.kind]]
    cases += [("FLYDEPS_LOG", "recompile"), ("FLYDEPS_LOG", "rebuilds,verbose")]
    return cases


def _python(code: str, env: dict[str, str], executable: str = sys.executable) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("FLYDEPS_")}
    full.update(env, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(
        [executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full, timeout=120
    )


# -- the parsers -------------------------------------------------------------------------
@pytest.mark.parametrize("word", TRUE_WORDS)
def test_flag_true_words(monkeypatch, word) -> None:
    monkeypatch.setenv("FLYDEPS_STRICT_AST", word)
    assert settings.flag("FLYDEPS_STRICT_AST", False) is True


@pytest.mark.parametrize("word", FALSE_WORDS)
def test_flag_false_words(monkeypatch, word) -> None:
    monkeypatch.setenv("FLYDEPS_FASTCACHE", word)
    assert settings.flag("FLYDEPS_FASTCACHE", True) is False


@pytest.mark.parametrize("value", [None, "", "   "])
def test_unset_or_empty_gives_the_default(monkeypatch, value) -> None:
    for name in SETTINGS:
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    assert settings.flag("FLYDEPS_VERIFY", False) is False and settings.flag("FLYDEPS_AUDIT_HOOK", True) is True
    assert settings.integer("FLYDEPS_MAX_FILE_BYTES", 7) == 7
    assert settings.choice("FLYDEPS_WATCH", "auto", ("auto", "off")) == "auto"
    assert settings.names("FLYDEPS_USER_PACKAGES") == () and settings.text("FLYDEPS_CACHE_DIR") is None
    settings.validate()


def test_integer_names_choice_text_parse(monkeypatch) -> None:
    monkeypatch.setenv("FLYDEPS_MAX_FILE_BYTES", " 4096 ")
    assert settings.integer("FLYDEPS_MAX_FILE_BYTES", 1) == 4096
    monkeypatch.setenv("FLYDEPS_SNAPSHOT_LIMIT", "0")
    assert settings.integer("FLYDEPS_SNAPSHOT_LIMIT", 256, minimum=0) == 0
    monkeypatch.setenv("FLYDEPS_WATCH", "CTypes")
    assert settings.choice("FLYDEPS_WATCH", "auto", ("auto", "ctypes")) == "ctypes"
    monkeypatch.setenv("FLYDEPS_USER_PACKAGES", " aiter, mykernels;other ,")
    assert settings.names("FLYDEPS_USER_PACKAGES") == ("aiter", "mykernels", "other")
    monkeypatch.setenv("FLYDEPS_LOG", "Rebuilds, recompiles")
    assert settings.names("FLYDEPS_LOG", choices=_logswitch.LOG_WORDS) == ("rebuilds", "recompiles")
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", " /tmp/x y ")
    assert settings.text("FLYDEPS_CACHE_DIR") == "/tmp/x y"


def test_below_minimum_is_an_error_not_clamped(monkeypatch) -> None:
    monkeypatch.setenv("FLYDEPS_MAX_FILE_BYTES", "9")
    with pytest.raises(SettingError, match=r"FLYDEPS_MAX_FILE_BYTES='9' is not a size: set an integer >= 10"):
        settings.integer("FLYDEPS_MAX_FILE_BYTES", 100, minimum=10)


@pytest.mark.parametrize(("name", "bad"), _bad_cases())
def test_every_bad_value_raises_naming_variable_value_and_choices(monkeypatch, name, bad) -> None:
    monkeypatch.setenv(name, bad)
    with pytest.raises(SettingError) as info:
        settings.read(name)
    message = str(info.value)
    assert message.startswith(f"{name}={bad.strip()!r} ") and "set " in message and "\n" not in message
    assert info.value.variable == name and isinstance(info.value, ValueError)
    with pytest.raises(SettingError, match=name):
        settings.validate()


def test_the_brief_message_for_a_size() -> None:
    err = SettingError("FLYDEPS_MAX_FILE_BYTES", "abc", "is not a size: set a positive integer number of bytes")
    assert str(err) == "FLYDEPS_MAX_FILE_BYTES='abc' is not a size: set a positive integer number of bytes"


def test_an_undocumented_name_is_a_programming_error() -> None:
    with pytest.raises(KeyError, match="FLYDEPS_NOPE is not a documented flydeps setting"):
        settings.flag("FLYDEPS_NOPE", False)


# -- where the variables are really read: lazily, in process -------------------------------
@pytest.mark.parametrize("bad", BAD["integer"])
def test_max_file_bytes_is_read_lazily_and_validated(monkeypatch, bad) -> None:
    monkeypatch.setenv("FLYDEPS_MAX_FILE_BYTES", bad)
    with pytest.raises(SettingError, match="FLYDEPS_MAX_FILE_BYTES"):
        parse.summarize([("big.py", b"x = 1\n")], parse.SummaryCache(None))
    monkeypatch.setenv("FLYDEPS_MAX_FILE_BYTES", "5")
    (summary,) = parse.summarize([("big.py", b"x = 1\n")], parse.SummaryCache(None))
    assert [p.message for p in summary.problems if "FLYDEPS_MAX_FILE_BYTES" in p.message]
    monkeypatch.setenv("FLYDEPS_MAX_FILE_BYTES", "6")
    (summary,) = parse.summarize([("fits.py", b"x = 1\n")], parse.SummaryCache(None))
    assert not summary.problems


def test_strict_ast_assume_installed_cache_dir_log_are_validated_where_read(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("FLYDEPS_STRICT_AST", "no")
    assert extract._strict() is False
    monkeypatch.setenv("FLYDEPS_STRICT_AST", "please")
    with pytest.raises(SettingError, match="FLYDEPS_STRICT_AST='please'"):
        extract._strict()
    monkeypatch.setenv("FLYDEPS_ASSUME_INSTALLED", "flydsl; torch")
    assert symbols.assumed_installed() == frozenset({"flydsl", "torch"})
    monkeypatch.setenv("FLYDEPS_ASSUME_INSTALLED", "flydsl torch")
    with pytest.raises(SettingError, match="FLYDEPS_ASSUME_INSTALLED='flydsl torch' names 'flydsl torch'"):
        symbols.assumed_installed()
    monkeypatch.setenv("FLYDEPS_CACHE_DIR", str(tmp_path))
    assert parse.cache_dir().parent == tmp_path
    monkeypatch.setenv("FLYDEPS_LOG", "RECOMPILES")
    assert _logswitch.wants_reasons()
    monkeypatch.setenv("FLYDEPS_LOG", "everything")
    with pytest.raises(SettingError, match="FLYDEPS_LOG='everything'"):
        _logswitch.wants_reasons()


@pytest.mark.parametrize("word", FALSE_WORDS + TRUE_WORDS)
def test_fastcache_switch_words_pick_the_hit_path(monkeypatch, word) -> None:
    from flydeps import cached_factory
    from flydeps.builds import factory

    monkeypatch.setenv("FLYDEPS_FASTCACHE", word)
    built = cached_factory(lambda n: n)
    python_path = type(built).__name__ == "function"
    assert python_path is (word in FALSE_WORDS or not factory.FASTCACHE)
    assert built(3) == 3 and built(3) == 3 and built.cache_info().hits == 1
    monkeypatch.setenv("FLYDEPS_FASTCACHE", "sometimes")
    with pytest.raises(SettingError, match="FLYDEPS_FASTCACHE='sometimes'"):
        cached_factory(lambda n: n)


# -- where the variables are really read: at import, in a fresh interpreter ---------------
_IMPORT_TIME = [
    ("FLYDEPS_SNAPSHOT_LIMIT", "-1"),
    ("FLYDEPS_SNAPSHOT_LIMIT", "0"),
    ("FLYDEPS_SNAPSHOT_LIMIT", "lots"),
    ("FLYDEPS_WATCH", "garbage"),
    ("FLYDEPS_AUDIT_HOOK", "maybe"),
    ("FLYDEPS_USER_PACKAGES", "my pkg"),
]


@pytest.mark.parametrize(("name", "bad"), _IMPORT_TIME)
def test_import_time_variables_raise_setting_error_on_use(name, bad) -> None:
    """``import flydeps`` still works (so the CLI can report it); using the API raises."""
    result = _python(
        """
        import flydeps
        try:
            from flydeps import cached_factory
        except flydeps.SettingError as exc:
            print("SettingError:", exc)
        else:
            print("accepted")
        """,
        {name: bad},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"SettingError: {name}={bad!r} "), result.stdout + result.stderr


def test_snapshot_limit_is_applied() -> None:
    result = _python("import flydeps.values.snapshot as v; print(v.SNAPSHOT_LIMIT)", {"FLYDEPS_SNAPSHOT_LIMIT": " 17 "})
    assert result.stdout.strip() == "17", result.stderr


def test_fastcache_no_disables_the_c_hit_path_in_a_fresh_process() -> None:
    code = """
        import flydeps, flydeps.builds.factory as f
        build = flydeps.cached_factory(lambda n: [n])
        assert build(1) is build(1)
        print(type(build).__name__, f.FASTCACHE)
        """
    off, on = _python(code, {"FLYDEPS_FASTCACHE": "no"}), _python(code, {"FLYDEPS_FASTCACHE": "yes"})
    assert off.stdout.split()[0] == "function", off.stderr
    if on.stdout.split()[1] == "True":  # the C extension is built here: "yes" keeps it
        assert on.stdout.split()[0] == "FastCache", on.stderr


_AUDIT_PROBE = """
    import sys
    added = []
    sys.addaudithook(lambda event, args: added.append(event) if event == "sys.addaudithook" else None)
    import flydeps

    def helper(n):
        return n + 1

    @flydeps.cached_factory
    def build(n):
        return helper(n)

    build(1), build(1)
    flydeps.fingerprint(build).guard().check()
    print("hooks added:", len(added))
    """


@pytest.mark.parametrize("word", ["false", "no", "off", "0", "OFF"])
def test_audit_hook_false_really_installs_no_hook(word) -> None:
    default, off = _python(_AUDIT_PROBE, {}), _python(_AUDIT_PROBE, {"FLYDEPS_AUDIT_HOOK": word})
    assert default.stdout.strip() == "hooks added: 1", default.stderr  # the probe sees flydeps' hook
    assert off.stdout.strip() == "hooks added: 0", off.stderr


# -- the command line -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "bad"),
    [("FLYDEPS_MAX_FILE_BYTES", "abc"), ("FLYDEPS_MAX_FILE_BYTES", "-5"), ("FLYDEPS_WATCH", "garbage")],
)
@pytest.mark.parametrize("args", [["--help"], ["graph", "examples/kernels"]])
def test_cli_bad_setting_exits_2_with_one_line(name, bad, args) -> None:
    full = {k: v for k, v in os.environ.items() if not k.startswith("FLYDEPS_")}
    full.update({name: bad, "PYTHONPATH": str(ROOT / "src")})
    result = subprocess.run(
        [sys.executable, "-m", "flydeps", *args], capture_output=True, text=True, env=full, cwd=ROOT, timeout=120
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"flydeps: {name}={bad!r} is not "), line


# -- docs and sources against SETTINGS ----------------------------------------------------
def _sources() -> list[Path]:
    return sorted(p for p in (ROOT / "src").rglob("*.py") if "__pycache__" not in p.parts)


def test_docs_configuration_table_is_generated_from_settings() -> None:
    guarantees = (ROOT / "docs" / "guarantees.md").read_text(encoding="utf-8")
    assert "## Configuration" in guarantees
    assert settings.docs_table() in guarantees, "regenerate with: python -c 'from flydeps.settings import docs_table"
    for name in SETTINGS:
        assert f"| `{name}` |" in guarantees


def test_docs_mention_no_variable_that_settings_does_not_know() -> None:
    docs = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    mentioned = {m for doc in docs for m in re.findall(r"\bFLYDEPS_[A-Z0-9_]+\b", doc.read_text(encoding="utf-8"))}
    assert mentioned - set(SETTINGS) == set()


def test_sources_read_only_documented_variables_and_only_through_settings() -> None:
    literal = re.compile(r"""b?["'](FLYDEPS_[A-Z0-9_]+)["']""")
    direct = re.compile(r"""(environb?\b\s*[.\[]|getenv\(|_env_get\()[^\n]*b?["']FLYDEPS_""")
    typed = re.compile(r"""settings\.(flag|integer|choice|names|text|fraction)\(\s*["'](FLYDEPS_[A-Z0-9_]+)["']""")
    internal = re.compile(r"""(?<![.\w])(flag|integer|choice|names|text)\(\s*["'](FLYDEPS_[A-Z0-9_]+)["']""")
    read_somewhere: set[str] = set()
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        rel = path.relative_to(ROOT).as_posix()
        for name in literal.findall(text):
            assert name in SETTINGS, f"{rel} uses {name}, which flydeps.settings.SETTINGS does not document"
            if rel != "src/flydeps/settings.py":
                read_somewhere.add(name)
        if rel == "src/flydeps/settings.py":  # settings' own typed reads (cache_root)
            read_somewhere.update(name for _, name in internal.findall(text))
        for line in [ln for ln in text.splitlines() if direct.search(ln)]:
            # The one raw read allowed: jit's presence test of FLYDEPS_VERIFY (memoized with the
            # rest of a warm call's environment), parsed by settings.fraction on the hit path.
            assert rel == "src/flydsl_runtime/launch/jit.py", f"{rel}: {line.strip()}"
            assert line.strip() == '_env_get(b"FLYDEPS_VERIFY") is not None,', f"{rel}: {line.strip()}"
            assert 'share = settings.fraction("FLYDEPS_VERIFY", 0.0)' in text
        for kind, name in typed.findall(text):
            assert SETTINGS[name].kind == kind, f"{rel} reads {name} as {kind}, SETTINGS says {SETTINGS[name].kind}"
    for c_file in (ROOT / "src").rglob("*.c"):
        assert not re.search(r"getenv\s*\(\s*\"FLYDEPS_", c_file.read_text(encoding="utf-8"))
    assert read_somewhere == set(SETTINGS), f"documented but never read: {set(SETTINGS) - read_somewhere}"


def test_setting_error_survives_pickling() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(SettingError("FLYDEPS_WATCH", "x", "is not a known value: set one of auto|off")))
    assert (err.variable, err.value, str(err)) == (
        "FLYDEPS_WATCH",
        "x",
        "FLYDEPS_WATCH='x' is not a known value: set one of auto|off",
    )


def test_the_user_cache_root_is_platformdirs_answer_and_follows_the_environment(monkeypatch, tmp_path) -> None:
    """``settings.user_cache_root`` remembers platformdirs' answer only while ``os.environ``
    is unchanged: the oracle is platformdirs, asked after each change."""
    import platformdirs

    for value in (str(tmp_path / "a"), str(tmp_path / "b"), None, str(tmp_path / "a")):
        if value is None:
            monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
        else:
            monkeypatch.setenv("XDG_CACHE_HOME", value)
        assert settings.user_cache_root() == platformdirs.user_cache_dir("flydeps")
        assert settings.user_cache_root() == platformdirs.user_cache_dir("flydeps")  # remembered, same
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    assert (
        settings.user_cache_root()
        == platformdirs.user_cache_dir("flydeps")
        == str(tmp_path / "home" / ".cache" / "flydeps")
    )


# -- [tool.flydeps] in pyproject.toml (issue 38) -----------------------------------------
def _project(tmp_path: Path, monkeypatch, table: str) -> Path:
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'k'\n\n" + textwrap.dedent(table))
    work = tmp_path / "kernels" / "norm"
    work.mkdir(parents=True)
    monkeypatch.chdir(work)  # found from a subdirectory, as ruff and pytest find theirs
    for name in SETTINGS:
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "pyproject.toml"


def test_every_setting_can_live_in_pyproject_and_the_environment_overrides_it(tmp_path, monkeypatch) -> None:
    _project(
        tmp_path,
        monkeypatch,
        """
        [tool.flydeps]
        snapshot_limit = 512
        assume_installed = ["flydsl", "torch"]
        strict_ast = true
        log = "rebuilds"
        """,
    )
    assert settings.read("FLYDEPS_SNAPSHOT_LIMIT") == 512
    assert settings.read("FLYDEPS_ASSUME_INSTALLED") == ("flydsl", "torch")
    assert settings.read("FLYDEPS_STRICT_AST") is True
    monkeypatch.setenv("FLYDEPS_SNAPSHOT_LIMIT", "64")
    monkeypatch.setenv("FLYDEPS_STRICT_AST", "off")
    assert settings.read("FLYDEPS_SNAPSHOT_LIMIT") == 64
    assert settings.read("FLYDEPS_STRICT_AST") is False


@pytest.mark.parametrize(
    "table,names",
    [
        ("[tool.flydeps]\nsnapshot_limt = 3\n", "snapshot_limt"),  # a typo: unknown key
        ("[tool.flydeps]\nsnapshot_limit = 'lots'\n", "snapshot_limit"),  # the integer parser's error
        ("[tool.flydeps]\nsnapshot_limit = {a = 1}\n", "snapshot_limit"),  # a table is no value
        ("[tool.flydeps]\nstrict_ast = 'maybe'\n", "strict_ast"),
        ("[tool.flydeps]\nsnapshot_limit = = 3\n", "pyproject.toml"),  # broken TOML in our table
    ],
)
def test_a_bad_project_setting_names_the_file_and_key(tmp_path, monkeypatch, table, names) -> None:
    path = _project(tmp_path, monkeypatch, table)
    with pytest.raises(SettingError) as raised:
        settings.validate()
    message = str(raised.value)
    assert str(path) in message and names in message


def test_the_cli_reports_a_bad_project_setting_in_one_line(tmp_path, monkeypatch, capsys) -> None:
    from flydeps.cli import main

    path = _project(tmp_path, monkeypatch, "[tool.flydeps]\nmax_file_bytes = 'huge'\n")
    assert main(["graph", "--no-cache"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{path} [tool.flydeps] max_file_bytes='huge'" in err[0]


def test_a_pyproject_without_our_table_or_broken_elsewhere_is_not_ours(tmp_path, monkeypatch) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.ruff\nline-length = 120\n")  # broken, not ours
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("FLYDEPS_SNAPSHOT_LIMIT", raising=False)
    assert settings.read("FLYDEPS_SNAPSHOT_LIMIT") == int(SETTINGS["FLYDEPS_SNAPSHOT_LIMIT"].default)
    settings.validate()
