"""Guards: every kind of rebinding is seen; nothing unrelated trips them."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable

import pytest

import flydeps
from flydeps import ChangeKind

MOD = """
SCALE = 2
TABLE = [1, 2, 3]
BIG = list(range(100000))
def helper(x, k=1, *, j=2):
    return x * SCALE + k + j
def unrelated():
    return 0
class Base:
    def step(self, x):
        return x
    def run(self, x):
        return self.step(x) + helper(x) + TABLE[0] + len(BIG)
class Sub(Base):
    pass
def make(n):
    def kernel(x):
        return helper(x) + n
    return kernel
"""


@pytest.fixture
def mod(pkg):
    pkg.write("m", MOD)
    return pkg.load("m")


def guard_of(obj, owner=None):
    fp = flydeps.fingerprint(obj, owner=owner)
    return fp, fp.guard()


def test_fresh_guard_holds(mod) -> None:
    _, guard = guard_of(mod.Sub.run, owner=mod.Sub)
    assert guard.check() and guard.check()
    assert guard.changes() == ()


def test_global_rebinding(mod) -> None:
    _, guard = guard_of(mod.make(3))
    mod.helper = lambda x: x
    assert not guard.check()
    (change,) = [c for c in guard.changes() if c.name == "helper"]
    assert change.kind is ChangeKind.CODE and not change.is_data


def test_code_defaults_and_kwdefaults_swaps(mod) -> None:
    for attr, value in (("__code__", mod.unrelated.__code__), ("__defaults__", (5,)), ("__kwdefaults__", {"j": 9})):
        _, guard = guard_of(mod.helper)
        old = getattr(mod.helper, attr)
        setattr(mod.helper, attr, value)
        try:
            assert not guard.check(), attr
            assert any(c.name == attr for c in guard.changes())
        finally:
            setattr(mod.helper, attr, old)
        assert guard.check(), f"restoring {attr} restores the guard"


def test_closure_cell_change(mod) -> None:
    kernel = mod.make(3)
    _, guard = guard_of(kernel)
    kernel.__closure__[0].cell_contents = 4  # n (cells are sorted by name: helper is global)
    assert not guard.check()


def test_class_attribute_rebinding_along_the_mro(mod) -> None:
    _, guard = guard_of(mod.Base.run, owner=mod.Sub)
    mod.Sub.step = lambda self, x: -x  # shadows Base.step for Sub only
    assert not guard.check()
    del mod.Sub.step
    assert guard.check()
    _, base_guard = guard_of(mod.Base.run, owner=mod.Base)
    mod.Sub.step = lambda self, x: -x
    assert base_guard.check(), "a Sub override does not concern Base"
    del mod.Sub.step


def test_small_container_mutated_in_place(mod) -> None:
    _, guard = guard_of(mod.Base.run, owner=mod.Base)
    mod.TABLE.append(4)
    assert not guard.check()
    assert any(c.kind is ChangeKind.VALUE and c.is_data for c in guard.changes())
    mod.TABLE.pop()


def test_oversized_container_only_rebinding_with_one_warning(mod, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="flydeps"):
        _, guard = guard_of(mod.Base.run, owner=mod.Base)
        guard_of(mod.Base.run, owner=mod.Base)
    warnings = [r for r in caplog.records if "BIG" in r.getMessage()]
    assert len(warnings) == 1 and "in-place" in warnings[0].getMessage()
    mod.BIG.append(1)  # not detected: summarized by size only
    assert guard.check()
    mod.BIG = []
    assert not guard.check()


def test_reload_rebinds_everything(pkg, mod) -> None:
    kernel = mod.make(3)
    fp, guard = guard_of(kernel)
    pkg.edit("m", "def unrelated():", "def unrelated():  # touched")
    assert not guard.check(), "reload binds helper to a new function object"
    assert flydeps.fingerprint(kernel).digest == fp.digest, "...with the same code"


def test_unrelated_changes_do_not_trip(mod) -> None:
    _, guard = guard_of(mod.make(3))
    mod.unrelated = lambda: 1
    mod.NEW_GLOBAL = 1
    assert guard.check()


def test_deleted_global(mod) -> None:
    _, guard = guard_of(mod.make(3))
    del mod.helper
    assert not guard.check()
    assert any(c.kind is ChangeKind.BINDING and c.new == "<missing>" for c in guard.changes())


def test_name_appearing_in_module_shadows_builtin(mod, pkg) -> None:
    pkg.write("b", "def kernel(x):\n    return len(x)\n")
    b = pkg.load("b")
    _, guard = guard_of(b.kernel)
    b.len = lambda x: 0
    assert not guard.check()


def test_annotated_functions_add_no_per_call_checks(pkg) -> None:
    pkg.write("a", "class Tensor: pass\ndef kernel(x: Tensor, n: int = 4) -> None:\n    return None\n")
    a = pkg.load("a")
    guard = flydeps.fingerprint(a.kernel).guard()
    assert repr(guard).endswith("0 mutable values>")


GROUPED = """
NAME_A = "alpha"
NAME_B = "beta"
NAME_C = "gamma"
NAME_D = "delta"
N_A = 1
N_B = 10 ** 20
N_C = 2.5
N_D = 7
def reader():
    return (NAME_A, NAME_B, NAME_C, NAME_D, N_A, N_B, N_C, N_D)
"""


@pytest.fixture(params=["flat passes", "written out"])
def namespace_tier(request, monkeypatch) -> str:
    """Both forms of a guard's namespace checks: the flat C-level passes a guard starts
    with, and the written-out check that replaces them after ``_TIER_UP`` re-reads (here
    from the first)."""
    if request.param == "written out":
        monkeypatch.setattr(importlib.import_module("flydeps.keys.guard"), "_TIER_UP", 1)
    return request.param


def test_grouped_namespace_checks_compare_safely(pkg, namespace_tier) -> None:
    """A namespace's names are checked in groups: strings (whose ``==`` runs no user code)
    rebound to an equal copy still hold; numbers are compared by identity, so an equal
    but distinct int, ``True`` for ``1`` or ``1.0`` for ``1`` are each a change."""
    pkg.write("grouped", GROUPED)
    mod = pkg.load("grouped")
    fp, guard = guard_of(mod.reader)
    assert guard.check()
    mod.NAME_B = "".join(["be", "ta"])  # equal, another object
    assert guard.check()
    mod.NAME_B = "BETA"
    assert not guard.check()
    mod.NAME_B = "beta"
    assert guard.check()
    for name, value in (("N_A", True), ("N_A", 1.0), ("N_B", int("1" + "0" * 20)), ("N_C", 5 / 2)):
        old = getattr(mod, name)
        assert value == old
        setattr(mod, name, value)
        try:
            assert not guard.check(), (name, value)
        finally:
            setattr(mod, name, old)
        assert guard.check()
    assert fp.refresh().digest == fp.digest  # nothing changed in the end


SPREAD_HELPER = """
WORD = "one"
COUNT = 3
"""

SPREAD = """
from . import spread_helper as helper
from .spread_helper import WORD
LIMIT = 4
class Loud:
    def __eq__(self, other):
        raise AssertionError("the guard ran user __eq__")
    __hash__ = object.__hash__
LOUD = Loud()
def reader():
    return (WORD, LIMIT, LOUD, helper.COUNT, len)
"""


def test_namespace_checks_of_single_names_and_absent_names(pkg, namespace_tier) -> None:
    """The namespace checks, whatever their number, are a few C-level passes: a namespace
    with one name of a kind is checked as exactly as a group (an equal string holds, an
    equal number of another type does not, an object's ``__eq__`` never runs), a deleted
    name fails, and a name that was absent (``len``, read from builtins) fails once it is
    defined in the module."""
    pkg.write("spread_helper", SPREAD_HELPER)
    pkg.write("spread", SPREAD)
    mod = pkg.load("spread")
    helper = mod.helper
    fp, guard = guard_of(mod.reader)
    assert guard.check()
    mod.WORD = "".join(["o", "ne"])
    assert guard.check()
    mod.WORD = "two"
    assert not guard.check()
    mod.WORD = "one"
    assert guard.check()
    for owner, name, value in ((mod, "LIMIT", 4.0), (helper, "COUNT", 3.0), (mod, "LOUD", mod.Loud())):
        old = getattr(owner, name)
        setattr(owner, name, value)
        try:
            assert not guard.check(), name
        finally:
            setattr(owner, name, old)
        assert guard.check()
    del helper.COUNT
    assert not guard.check()
    helper.COUNT = 3
    assert guard.check()
    mod.len = len  # shadows the builtin the reader read: the binding was absent
    assert not guard.check()
    del mod.len
    assert guard.check()
    assert fp.refresh().digest == fp.digest


# -- the check is generated on first use ------------------------------------------------
# A new process's first call needs a fingerprint (its key), not a guard: the guard keeps
# what the walk expected and generates its check when it is first read. What it answers
# must not depend on when that is.


def _generations(monkeypatch) -> list[int]:
    from flydeps.keys import guard as guard_module

    made: list[int] = []
    real = guard_module._compile_check

    def counting(*args, **kwargs):
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(guard_module, "_compile_check", counting)
    return made


def test_guard_generates_its_check_on_first_use_only(mod, monkeypatch) -> None:
    made = _generations(monkeypatch)
    _, guard = guard_of(mod.Sub.run, owner=mod.Sub)
    assert made == []  # built, not generated
    check = guard.check
    assert made == [1] and check is guard.check  # the generated function itself: no trampoline
    assert check() and guard.check() and made == [1]
    assert guard.fast_parts() is guard.fast_parts() and made == [1]


@pytest.mark.parametrize(
    "change",
    [
        "mod.helper = lambda x: x",  # a global rebound
        "mod.TABLE.append(4)",  # a container read in place
        "mod.helper.__defaults__ = (5,)",  # a function attribute (audited)
        "mod.Base.step = lambda self, x: -x",  # a class attribute along the MRO
        "del mod.SCALE",  # a name gone
    ],
)
def test_a_change_before_the_check_is_generated_is_seen(mod, monkeypatch, change) -> None:
    made = _generations(monkeypatch)
    _, guard = guard_of(mod.Sub.run, owner=mod.Sub)
    exec(change, {"mod": mod})  # between the walk and the check's generation (watchers registered later)
    assert made == []
    assert not guard.check()
    assert guard.changes()


def test_a_change_before_the_fast_parts_are_read_is_seen(mod) -> None:
    _, guard = guard_of(mod.make(3))
    mod.helper = lambda x: x
    guard.fast_parts()  # generates the check too (a C caller reads these first)
    assert not guard.check()


def test_threads_reading_a_new_guard_generate_one_check(mod, monkeypatch) -> None:
    import threading

    made = _generations(monkeypatch)
    _, guard = guard_of(mod.Sub.run, owner=mod.Sub)
    start = threading.Barrier(8)
    seen: list[Callable[[], bool]] = []

    def read() -> None:
        start.wait()
        seen.append(guard.check)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert made == [1] and len({id(c) for c in seen}) == 1 and seen[0]()


def test_a_misspelt_guard_attribute_is_an_attribute_error(mod) -> None:
    _, guard = guard_of(mod.helper)
    with pytest.raises(AttributeError, match="chekc"):
        guard.chekc  # noqa: B018
    assert guard.check()
