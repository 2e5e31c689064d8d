"""cached_factory: lru_cache compatibility and the seed's stale-factory scenario."""

from __future__ import annotations

import functools
import logging
import threading
import time

import pytest

import flydeps
from flydeps import GlobalDriftError, cached_factory

# --------------------------------------------------------------------------- lru_cache parity


@pytest.mark.parametrize(
    "decorate",
    [
        pytest.param(lambda f: cached_factory(f), id="bare"),
        pytest.param(lambda f: cached_factory()(f), id="called"),
        pytest.param(lambda f: cached_factory(maxsize=None, typed=True)(f), id="kwargs"),
        pytest.param(lambda f: cached_factory(2)(f), id="positional"),
    ],
)
def test_call_forms_match_lru_cache(decorate) -> None:
    calls = []

    def square(x):
        calls.append(x)
        return x * x

    ours = decorate(square)
    assert ours(3) == 9 and ours(3) == 9
    assert calls == [3]
    info = ours.cache_info()
    assert (info.hits, info.misses, info.currsize) == (1, 1, 1)
    assert ours.__wrapped__ is square and ours.__name__ == "square"
    assert set(ours.cache_parameters()) == {"maxsize", "typed"}


def test_cache_info_is_functools_type_and_counts_like_it() -> None:
    def f(x, y=0):
        return x + y

    ref, ours = functools.lru_cache(maxsize=2)(f), cached_factory(maxsize=2)(f)
    for args, kwargs in [((1,), {}), ((1,), {}), ((2,), {}), ((3,), {}), ((1,), {}), ((1,), {"y": 0}), ((1.0,), {})]:
        assert ref(*args, **kwargs) == ours(*args, **kwargs)
    assert ours.cache_info() == ref.cache_info()
    assert type(ours.cache_info()) is type(ref.cache_info())
    ours.cache_clear()
    ref.cache_clear()
    assert ours.cache_info() == ref.cache_info()
    assert ours.cache_parameters() == ref.cache_parameters()


def test_typed_and_maxsize_zero_like_lru_cache() -> None:
    def f(x):
        return type(x).__name__

    for kwargs in ({"typed": True}, {"maxsize": 0}, {"maxsize": None}, {"maxsize": -3}):
        ref, ours = functools.lru_cache(**kwargs)(f), cached_factory(**kwargs)(f)
        for x in (1, 1.0, 1, True, 1.0):
            assert ref(x) == ours(x)
        assert ours.cache_info() == ref.cache_info(), kwargs


def test_unhashable_arguments_raise_the_same_type_error() -> None:
    ours = cached_factory(lambda x: x)
    with pytest.raises(TypeError) as ours_err:
        ours([1])
    with pytest.raises(TypeError) as ref_err:
        functools.lru_cache(lambda x: x)([1])  # type: ignore[arg-type]  # unhashable on purpose
    assert str(ours_err.value) == str(ref_err.value)


def test_bad_decorator_arguments() -> None:
    with pytest.raises(TypeError, match="Expected first argument to be an integer, a callable, or None"):
        cached_factory("big")  # type: ignore[call-overload]
    with pytest.raises(ValueError, match="on_drift='explode'.*rebuild, raise, warn"):
        cached_factory(on_drift="explode")  # type: ignore[call-overload]


def test_exceptions_are_not_cached() -> None:
    attempts = []

    @cached_factory
    def flaky(x):
        attempts.append(x)
        if len(attempts) == 1:
            raise RuntimeError("first build fails")
        return x

    with pytest.raises(RuntimeError):
        flaky(1)
    assert flaky(1) == 1 and attempts == [1, 1]


def test_works_on_methods() -> None:
    class K:
        @cached_factory
        def build(self, n):
            return (self, n)

    k = K()
    assert k.build(2) is k.build(2)
    assert K.build.cache_info().hits == 1


def test_concurrent_callers_build_once() -> None:
    builds = []
    gate = threading.Event()

    @cached_factory
    def slow(n, gate):  # an argument: the gate being set meanwhile is not a change of what it read
        builds.append(n)
        gate.wait(5)
        return object()

    results = []
    threads = [threading.Thread(target=lambda: results.append(slow(7, gate))) for _ in range(8)]
    for t in threads:
        t.start()
    time.sleep(0.2)
    gate.set()
    for t in threads:
        t.join(10)
    assert builds == [7]
    assert len({id(r) for r in results}) == 1


def test_recursive_factory_does_not_deadlock() -> None:
    @cached_factory
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    assert fib(30) == 832040


# --------------------------------------------------------------------------- the seed scenario

HELPERS = """
SCALE = 2

def _load_q_fragments(x):
    return x * SCALE

def unrelated(x):
    return x - 1
"""

FACTORY = """
from {pkg} import mem
from flydeps import cached_factory

BUILDS = []

@cached_factory(maxsize=256)
def compile_pa_decode_ps(block):
    BUILDS.append(block)

    def pa_decode_ps_kernel(x):
        return mem._load_q_fragments(x) + block

    def launch(x):
        return pa_decode_ps_kernel(x)

    return launch
"""


@pytest.fixture
def seed(pkg):
    pkg.write("mem", HELPERS)
    pkg.write("kernels", FACTORY.format(pkg=pkg.name))
    kernels = pkg.load("kernels")
    mem = pkg.load("mem")
    return pkg, kernels, mem


def test_seed_monkeypatch_rebuilds(seed, caplog) -> None:
    pkg, kernels, mem = seed
    launch = kernels.compile_pa_decode_ps(16)
    assert launch(1) == 18

    def sentinel(x):
        raise AssertionError("sentinel observed: retraced with the new helper")

    mem._load_q_fragments = sentinel
    with caplog.at_level(logging.INFO, logger="flydeps"):
        rebuilt = kernels.compile_pa_decode_ps(16)
    assert rebuilt is not launch
    with pytest.raises(AssertionError, match="sentinel observed"):
        rebuilt(1)
    assert kernels.BUILDS == [16, 16]
    (record,) = [r for r in caplog.records if r.getMessage().startswith("rebuilt compile_pa_decode_ps")]
    assert "sentinel" in record.getMessage()


def test_seed_edit_and_reload_rebuilds(seed) -> None:
    pkg, kernels, mem = seed
    launch = kernels.compile_pa_decode_ps(16)
    pkg.edit("mem", "return x * SCALE", "return x * SCALE * 10")
    rebuilt = kernels.compile_pa_decode_ps(16)
    assert rebuilt is not launch and rebuilt(1) == 36
    assert kernels.compile_pa_decode_ps(16) is rebuilt
    info = kernels.compile_pa_decode_ps.cache_info()
    assert (info.hits, info.misses, info.currsize) == (1, 2, 1)


@pytest.mark.parametrize(
    "old,new",
    [
        pytest.param(
            "def _load_q_fragments(x):", "# comment\ndef _load_q_fragments(x):\n    '''Docs.'''", id="comment+docstring"
        ),
        pytest.param(
            "def unrelated(x):\n    return x - 1", "def unrelated(x):\n    return x - 2", id="unrelated-function"
        ),
        pytest.param("SCALE = 2", "\n\nSCALE = 2  # moved", id="moved"),
    ],
)
def test_seed_irrelevant_edits_do_not_rebuild(seed, old, new) -> None:
    pkg, kernels, mem = seed
    launch = kernels.compile_pa_decode_ps(16)
    pkg.edit("mem", old, new)
    assert kernels.compile_pa_decode_ps(16) is launch
    assert kernels.BUILDS == [16]
    assert kernels.compile_pa_decode_ps.cache_info().hits == 1


def test_seed_code_swap_rebuilds(seed) -> None:
    pkg, kernels, mem = seed
    launch = kernels.compile_pa_decode_ps(16)
    mem._load_q_fragments.__code__ = (lambda x: -x).__code__
    rebuilt = kernels.compile_pa_decode_ps(16)
    assert rebuilt is not launch and rebuilt(1) == 15


def test_only_the_stale_entry_is_rebuilt(seed) -> None:
    pkg, kernels, mem = seed
    a, b = kernels.compile_pa_decode_ps(16), kernels.compile_pa_decode_ps(32)
    mem.unrelated = lambda x: x
    assert kernels.compile_pa_decode_ps(16) is a and kernels.compile_pa_decode_ps(32) is b


# --------------------------------------------------------------------------- data drift policies

DRIFT = """
from flydeps import cached_factory
BLOCK = 128
REGISTRY = []

@cached_factory(on_drift={policy!r})
def build(n):
    REGISTRY.append(n)          # a factory that appends to what it reads
    def kernel(x):
        return x * BLOCK + n + len(REGISTRY)
    return kernel
"""


@pytest.mark.parametrize("policy", ["rebuild", "raise", "warn"])
def test_drift_policies(pkg, policy, caplog) -> None:
    pkg.write("d", DRIFT.format(policy=policy))
    d = pkg.load("d")
    k = d.build(1)
    assert d.build(1) is k, "baselined after the build: its own append does not rebuild"
    d.BLOCK = 256
    if policy == "raise":
        with pytest.raises(GlobalDriftError) as err:
            d.build(1)
        assert (err.value.module, err.value.name, err.value.old, err.value.new) == (
            f"{pkg.name}.d",
            "BLOCK",
            "128",
            "256",
        )
        assert "cache_clear()" in str(err.value)
    elif policy == "warn":
        with caplog.at_level(logging.WARNING, logger="flydeps"):
            assert d.build(1) is k
        assert "BLOCK" in caplog.text and "128 -> 256" in caplog.text
    else:
        assert d.build(1) is not k


def test_in_place_mutation_of_small_global_is_drift(pkg) -> None:
    pkg.write("d", DRIFT.format(policy="rebuild"))
    d = pkg.load("d")
    k = d.build(1)
    d.REGISTRY.append("external write")
    assert d.build(1) is not k


def test_fingerprint_of_entry_reaches_helpers(seed) -> None:
    pkg, kernels, mem = seed
    launch = kernels.compile_pa_decode_ps(16)
    assert f"{pkg.name}.mem:_load_q_fragments" in flydeps.discover(launch).nodes
