"""The warm-path argument binder equals ``inspect.Signature.bind`` + ``apply_defaults``.

The oracle is ``inspect`` itself: for generated signatures and generated calls, the binder
must return the same values in the same order, or raise the same ``TypeError``.
"""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flydsl_runtime.trace.binder import ArgBinder

P = inspect.Parameter


def _reference(sig: inspect.Signature, args: tuple, kwargs: dict) -> tuple | str:
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as exc:
        return f"TypeError: {exc}"
    bound.apply_defaults()
    return tuple(bound.arguments.values())


def _ours(binder: ArgBinder, args: tuple, kwargs: dict) -> tuple | str:
    try:
        return binder.bind(args, dict(kwargs))
    except TypeError as exc:
        return f"TypeError: {str(exc).removeprefix('launch(): ')}"


@st.composite
def signatures(draw: st.DrawFn) -> inspect.Signature:
    n_pos = draw(st.integers(0, 5))
    n_kwonly = draw(st.integers(0, 2))
    first_default = draw(st.integers(0, n_pos))
    params = []
    for i in range(n_pos):
        default = object() if i >= first_default else P.empty
        params.append(P(f"p{i}", P.POSITIONAL_OR_KEYWORD, default=default))
    for i in range(n_kwonly):
        default = draw(st.sampled_from([P.empty, None, 0]))
        params.append(P(f"k{i}", P.KEYWORD_ONLY, default=default))
    if draw(st.booleans()):
        params.append(P("rest", P.VAR_KEYWORD))
    return inspect.Signature(params)


@settings(max_examples=400, deadline=None)
@given(
    signatures(), st.integers(0, 7), st.lists(st.sampled_from(["p0", "p1", "p3", "p4", "k0", "k1", "zz"]), unique=True)
)
def test_equals_inspect(sig: inspect.Signature, n_args: int, keywords: list[str]) -> None:
    args = tuple(object() for _ in range(n_args))
    kwargs = {k: object() for k in keywords}
    binder = ArgBinder("launch", sig)
    expected, got = _reference(sig, args, kwargs), _ours(binder, args, kwargs)
    if isinstance(expected, str):
        assert got == expected
    else:
        assert isinstance(got, tuple) and len(got) == len(expected)
        # Values by identity; the containers inspect builds for **kwargs by content.
        assert all(a is b or (type(a) is dict and a == b) for a, b in zip(got, expected)), (expected, got)


class _Loud:
    """A value whose ``==`` must never run: the binder compares by identity only."""

    def __eq__(self, other: object) -> bool:
        raise AssertionError("the binder ran __eq__ of an argument")

    __hash__ = object.__hash__


def test_omitted_default_stream_and_keywords() -> None:
    stream_default = object()

    def launch(q, k, out, n, stream=stream_default):
        pass

    binder = ArgBinder("launch", inspect.signature(launch), launch)
    q, k, out = _Loud(), _Loud(), _Loud()
    assert binder.bind((q, k, out, 4), {}) == (q, k, out, 4, stream_default)
    assert binder.bind((q, k), {"out": out, "n": 4}) == (q, k, out, 4, stream_default)
    got = binder.bind((q,), {"n": 1, "k": k, "out": out, "stream": None})
    assert got[:3] == (q, k, out) and got[3:] == (1, None)


def test_errors_name_the_launcher() -> None:
    def launch(a, b=1):
        pass

    binder = ArgBinder("pkg.launch", inspect.signature(launch), launch)
    with pytest.raises(TypeError, match=r"^pkg\.launch\(\): missing a required argument: 'a'"):
        binder.bind((), {})
    with pytest.raises(TypeError, match=r"pkg\.launch\(\): got an unexpected keyword argument 'c'"):
        binder.bind((1,), {"c": 2})
    with pytest.raises(TypeError, match=r"multiple values for argument 'a'"):
        binder.bind((1,), {"a": 2})
    with pytest.raises(TypeError, match="too many positional arguments"):
        binder.bind((1, 2, 3), {})


def test_stale_after_defaults_are_replaced() -> None:
    def launch(a, b=1, *, c=2):
        pass

    binder = ArgBinder("launch", inspect.signature(launch), launch)
    assert not binder.stale()
    launch.__defaults__ = (5,)
    assert binder.stale()
    fresh = ArgBinder("launch", inspect.signature(launch), launch)
    assert fresh.bind((0,), {}) == (0, 5, 2)
    launch.__kwdefaults__ = {"c": 3}
    assert fresh.stale()


# --- the binder inside a real launcher ------------------------------------------------------


@pytest.mark.usefixtures("compile_only")
def test_launcher_binds_omitted_defaults_and_follows_replaced_ones(fdk) -> None:
    """Oracle: FlyDSL's IR key from a fresh plain trace of the same call (its own binding)."""
    import torch
    from flydsl.compiler.jit_function import JitFunction

    from flydsl_runtime import Launcher

    mod = fdk.module("defaults")
    # A replaced default is a data change: follow it (the launchers' default policy raises).
    launch = Launcher(JitFunction(mod.scaled_copy.jit_function.func), on_drift="rebuild")
    a, c, n = torch.zeros(1024), torch.zeros(1024), 1024

    def fresh(*args: object, **kwargs: object) -> str:
        plain = JitFunction(launch.jit_function.func)
        plain._compile_or_execute(args, kwargs, execute=False)
        return plain._last_compiled[0]

    def served(*args: object, **kwargs: object) -> str:
        launch(*args, **kwargs)
        key = launch._key(launch._owners[None], None, launch._bind(args, kwargs))
        return launch._entries[key].ir_key

    omitted = served(a, c, n)
    assert omitted == fresh(a, c, n) == served(a, c, n, 2, None) == served(a, c, n=n, factor=2)
    assert launch.cache_info().misses == 1
    launch.jit_function.func.__defaults__ = (3, None)  # the omitted factor is now 3
    after = served(a, c, n)
    assert after == fresh(a, c, n) != omitted
    assert launch.cache_info().misses == 2
    with pytest.raises(TypeError, match=r"scaled_copy\(\): missing a required argument: 'n'"):
        launch(a, c)
