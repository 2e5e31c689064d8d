"""``.ci/run`` says what it is doing: each stage starts with the time of day and ends with its
duration, and the run ends with its total (issue 38: ~10 silent minutes, then dots)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / ".ci" / "run"


def test_the_stage_function_announces_and_times_each_stage() -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    text = SCRIPT.read_text()
    function = re.search(r"^STAGE=.*?^}\n", text, re.M | re.S)
    assert function is not None, "the stage() function of .ci/run"
    done = subprocess.run(
        ["bash", "-c", function.group(0) + 'stage "first"; stage "second"; stage ""'],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert re.fullmatch(r"::: \[\d\d:\d\d:\d\d UTC\] first", lines[0]), lines
    assert re.fullmatch(r"::: done in \d+ s: first", lines[1]), lines
    assert re.fullmatch(r"::: \[\d\d:\d\d:\d\d UTC\] second", lines[2]), lines
    assert re.fullmatch(r"::: done in \d+ s: second", lines[3]), lines
    assert len(lines) == 4


def test_every_stage_of_the_script_goes_through_it() -> None:
    text = SCRIPT.read_text()
    stages = re.findall(r'^\s*stage "(.+)"$', text, re.M)
    for expected in ("system packages", "Python 3.11 environment", "lint", "mutation oracle", "full suite"):
        assert any(s.startswith(expected) for s in stages), (expected, stages)
    silent = [line for line in text.splitlines() if re.match(r'^\s*echo "::: \[', line)]
    assert not silent  # stage lines are printed by stage(), which also times them
    assert 'stage ""' in text and "CI finished in $SECONDS s" in text
