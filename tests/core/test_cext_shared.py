"""What the C extensions' shared boilerplate (src/flydeps/_cext) must keep byte for byte.

Module names, capsule names and the capsule hand-over between _watchext/_dictver and
_fastcache are written once in src/flydeps/_cext/{cext,capi}.h; these tests pin what every
extension shows of them on this interpreter, and the argument-count error the shared helper
raises. Each test is skipped when its extension is not built here.
"""

from __future__ import annotations

import importlib
import sys
from types import ModuleType

import pytest


def _built(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError:
        pytest.skip(f"{name} is not built for this interpreter (python setup.py build_ext --inplace)")


@pytest.mark.parametrize(
    "name",
    [
        "flydeps.builds._fastcache",
        "flydeps.code._scanext",
        "flydeps.store._statext",
        "flydeps.watch._watchext",
        "flydeps.watch._dictver",
        "flydsl_runtime.persist._capi",
        "flydsl_runtime.launch._warmcall",
    ],
)
def test_module_name_is_its_dotted_path(name: str) -> None:
    if name.startswith("flydsl_runtime"):
        pytest.importorskip("flydsl")
    if name == "flydeps.watch._watchext" and sys.version_info < (3, 12):
        pytest.skip("watcher C-API needs CPython >= 3.12")
    if name == "flydeps.watch._dictver" and sys.version_info >= (3, 12):
        pytest.skip("PEP 509 tags are read on CPython 3.10/3.11 only")
    assert _built(name).__name__ == name


def test_capsule_is_exported_under_its_full_name() -> None:
    name = "flydeps.watch._watchext" if sys.version_info >= (3, 12) else "flydeps.watch._dictver"
    capsule = _built(name)._C_API
    assert repr(capsule).startswith(f'<capsule object "{name}._C_API" at ')


def test_fastcache_found_the_capsule_of_this_interpreter() -> None:
    fastcache = _built("flydeps.builds._fastcache")
    if sys.version_info >= (3, 12):
        _built("flydeps.watch._watchext")
        assert (fastcache.WATCH_API, fastcache.TAGS_API) == (1, 0)
    else:
        _built("flydeps.watch._dictver")
        assert (fastcache.WATCH_API, fastcache.TAGS_API) == (0, 1)


def test_argument_count_error_names_the_signature() -> None:
    fastcache = _built("flydeps.builds._fastcache")
    cache = fastcache.FastCache(None, False, lambda *a: None, [0], object())
    with pytest.raises(TypeError, match=r"^store\(key, entry\) takes 2 to 2 arguments \(1 given\)$"):
        cache.store("k")
    with pytest.raises(TypeError, match=r"^get\(key, default=None\) takes 1 to 2 arguments \(3 given\)$"):
        cache.get(1, 2, 3)
