"""The distribution index behind library leaves (``torch==2.13.0``) answers as
``importlib.metadata`` does, without its cost.

Oracle: ``importlib.metadata.packages_distributions()`` and ``importlib.metadata.version()``
on the environment running the tests. Python 3.10's ``packages_distributions`` reads only
``top_level.txt`` (3.11 infers the rest from installed files, 3.12+ also lists a
``__pycache__`` directory as a package): the index applies 3.11's rule on every version,
so it must contain everything the running version's answer has, ``__pycache__`` aside.
"""

from __future__ import annotations

import importlib.metadata
import sys
import textwrap
from pathlib import Path

import pytest

from flydeps import _origin


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
    """The index is built once per process from the installed files (nothing cached on disk)."""
    _origin._index.cache_clear()
    _origin._distributions.cache_clear()
    try:
        assert _origin._distributions()[top]
    finally:
        _origin._index.cache_clear()
        _origin._distributions.cache_clear()
