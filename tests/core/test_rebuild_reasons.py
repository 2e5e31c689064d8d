"""Rebuild reasons and the docs' promises (issue 11, items 9 and 10).

* ``FLYDEPS_LOG=recompiles``/``rebuilds`` shows ``cached_factory`` rebuild reasons on stderr
  with no logging setup (a fresh interpreter: nothing configured but the variable).
* A ``__code__`` swap is reported as the helper's code changing, not as a name that "now
  resolves to <lambda>"; a real rebinding still is.
* The drift error names a global ``module:NAME``, as the rebuild log does.
* ``discover(None)`` raises ``DiscoveryError``; every declared dependency is imported.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import flydeps
from flydeps import DiscoveryError, GlobalDriftError, cached_factory
from flydeps.builds import logswitch as _logswitch
from flydeps.builds import protocol as build

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
    import flydeps

    SCALE = 2

    def helper(n):
        return n + 1

    @flydeps.cached_factory
    def make(n):
        return helper(n) * SCALE

    make(1)
    SCALE = 3
    make(1)
    helper.__code__ = (lambda n: n + 2).__code__
    make(1)
    print("done")
    """


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if not k.startswith("FLYDEPS_")}
    full.update(env, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT)], capture_output=True, text=True, env=full, timeout=120
    )


@pytest.mark.parametrize("word", ["rebuilds", "recompiles", " Rebuilds "])
def test_flydeps_log_shows_cached_factory_rebuild_reasons_on_stderr(word) -> None:
    result = _run({"FLYDEPS_LOG": word})
    assert result.stdout == "done\n", result.stderr
    assert result.stderr.splitlines() == [
        "flydeps: rebuilt make: global __main__:SCALE changed: 2 -> 3",
        "flydeps: rebuilt make: helper __main__:helper changed",
    ]


def test_without_flydeps_log_rebuilds_are_silent() -> None:
    result = _run({})
    assert result.stdout == "done\n" and result.stderr == ""


def test_bad_flydeps_log_is_a_setting_error() -> None:
    result = _run({"FLYDEPS_LOG": "all"})
    assert "flydeps.settings.SettingError: FLYDEPS_LOG='all' names 'all'" in result.stderr


SCALE = 2


def _helper(n: int) -> int:
    return n + 1


def _other(n: int) -> int:
    return n + 5


def _reader() -> int:
    return _helper(1) * SCALE


def _double() -> int:
    return SCALE * 2


def _triple() -> int:
    return SCALE * 3


def test_flydeps_log_switch_follows_the_variable_at_run_time(monkeypatch, capsys) -> None:
    logger = logging.getLogger("flydeps")
    level, handlers = logger.level, list(logger.handlers)
    make = cached_factory(_reader)
    make()
    monkeypatch.setenv("FLYDEPS_LOG", "rebuilds")
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 5)
    try:
        make()
        assert f"flydeps: rebuilt _reader: global {__name__}:SCALE changed: 2 -> 5" in capsys.readouterr().err
        monkeypatch.delenv("FLYDEPS_LOG")
        monkeypatch.setattr(sys.modules[__name__], "SCALE", 6)
        make()
        assert capsys.readouterr().err == ""
        assert logger.handlers == handlers  # the switch removed its handler
    finally:
        monkeypatch.delenv("FLYDEPS_LOG", raising=False)
        _logswitch.reasons_to_stderr(logger)
        logger.setLevel(level)


def test_code_swap_is_reported_as_a_code_change(monkeypatch, caplog) -> None:
    old = flydeps.fingerprint(_reader)
    make = cached_factory(_reader)
    assert make() == 4
    monkeypatch.setattr(_helper, "__code__", (lambda n: n + 2).__code__)
    new = old.refresh()
    assert new.digest != old.digest
    assert new.explain(old) == (f"helper {__name__}:_helper changed",)
    assert build.judge(old, new).reasons() == f"helper {__name__}:_helper changed"
    with caplog.at_level(logging.INFO, logger="flydeps"):
        assert make() == 6
    assert f"rebuilt _reader: helper {__name__}:_helper changed" in caplog.text
    assert "now resolves to" not in caplog.text


def test_a_real_rebinding_is_still_reported_as_one(monkeypatch) -> None:
    old = flydeps.fingerprint(_reader)
    monkeypatch.setattr(sys.modules[__name__], "_helper", _other)
    reasons = flydeps.fingerprint(_reader).explain(old)
    assert f"_helper (read by {__name__}:_reader) now resolves to {__name__}:_other (was {__name__}:_helper)" in reasons


def test_drift_error_names_the_global_as_the_log_does(monkeypatch, caplog) -> None:
    make = cached_factory(on_drift="raise")(_double)
    make()
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 9)
    with pytest.raises(GlobalDriftError) as info:
        make()
    assert str(info.value).startswith(f"global {__name__}:SCALE (read by _double) changed after it was baselined")
    rebuilt = cached_factory(_triple)
    rebuilt()
    monkeypatch.setattr(sys.modules[__name__], "SCALE", 10)
    with caplog.at_level(logging.INFO, logger="flydeps"):
        rebuilt()
    assert f"global {__name__}:SCALE changed: 9 -> 10" in caplog.text


def test_discover_none_raises_discovery_error() -> None:
    with pytest.raises(DiscoveryError, match="cannot discover None"):
        flydeps.discover(None)
    with pytest.raises(DiscoveryError):
        flydeps.fingerprint(None)
    assert flydeps.discover(0).roots  # other plain values are still discovered (as data)


# Import names of declared distributions whose import name differs from the distribution's.
_IMPORT_NAMES: dict[str, str] = {}


def _distribution(spec: str) -> str:
    return re.split(r"[<>=!~\[ ]", spec, maxsplit=1)[0].lower()


def test_every_declared_dependency_is_imported_and_every_documented_one_declared() -> None:
    tomllib = pytest.importorskip("tomllib")
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    names = {_distribution(spec) for spec in (*project["dependencies"], *extras["flydsl"])}
    # The flydsl extra is the environment real compiles run in (torch, numpy for the tests).
    files = [p for d in ("src", "tests", "benchmarks") for p in (ROOT / d).rglob("*.py")]
    code = "\n".join(p.read_text(encoding="utf-8") for p in files)
    for name in names:
        module = _IMPORT_NAMES.get(name, name.replace("-", "_"))
        used = rf"^\s*(import|from)\s+{module}\b|importorskip\(\"{module}\"\)"
        assert re.search(used, code, re.MULTILINE), f"{name} is declared in pyproject.toml, never imported"
    declared = names | {_distribution(spec) for spec in extras["dev"]}
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    table = design.split("## Dependencies and why", 1)[1].split("\n## ", 1)[0]
    for row in re.findall(r"^\| `([\w-]+)`", table, re.MULTILINE):
        assert row.lower() in declared, f"docs/design.md lists {row} as a dependency; pyproject.toml does not"


@pytest.mark.parametrize("order", ["a.acc(x) + b.use(x)", "b.use(x) + a.acc(x)"])
def test_a_partial_reload_is_a_change_of_the_helper_not_a_rebinding_to_a_number(
    tmp_path: Path, monkeypatch, order: str
) -> None:
    """Module ``a`` reloaded after an edit while ``b`` still holds ``from a import load``:
    two generations of ``load`` are alive and numbered in reach order (``a:load``,
    ``a:load#2``). ``new.explain(old)`` says ``helper a:load changed``, once, whichever
    generation got the number (issue 38: it said ``load (read by a:acc) now resolves to
    a:load#2``, or the change twice)."""
    import importlib
    import time

    name = f"partial_{abs(hash(order)) % 10**8}_{time.monotonic_ns()}"
    pkg = tmp_path / name
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("def load(x):\n    return x + 1\n\n\ndef acc(x):\n    return load(x) * 2\n")
    (pkg / "b.py").write_text(f"from {name}.a import load\n\n\ndef use(x):\n    return load(x) - 1\n")
    (pkg / "k.py").write_text(f"from {name} import a, b\n\n\ndef kernel(x):\n    return {order}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    k = importlib.import_module(f"{name}.k")
    a = importlib.import_module(f"{name}.a")
    old = flydeps.fingerprint(k.kernel)
    (pkg / "a.py").write_text("def load(x):\n    return x + 5\n\n\ndef acc(x):\n    return load(x) * 2\n")
    stamp = time.time() + 5
    os.utime(pkg / "a.py", (stamp, stamp))
    importlib.invalidate_caches()
    importlib.reload(a)
    new = flydeps.fingerprint(k.kernel)
    assert {n for n in new.graph.nodes if ":load" in n} == {f"{name}.a:load", f"{name}.a:load#2"}
    assert new.explain(old) == (f"helper {name}.a:load changed",)
    for mod in [m for m in sys.modules if m.startswith(name)]:
        del sys.modules[mod]
