"""Argument signatures: the raw-tensor fast path equals FlyDSL's adaptor, errors name the fix."""

from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest

pytest.importorskip("flydsl")

import flydsl.expr as fx  # noqa: E402
import torch  # noqa: E402
from flydsl.compiler.jit_argument import JitArgumentRegistry, TorchTensorJitArg, resolve_signature  # noqa: E402
from flydsl.compiler.protocol import cache_signature  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from flydsl_runtime.trace.argsig import ArgSigner, ArgumentSignatureError, SigToken, signatures, tensor_signature, token

# Every dtype FlyDSL maps to an MLIR element type, plus ones it only rejects at trace time:
# the signature must agree with the adaptor for those too.
DTYPES = [
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.complex64,
] + [
    getattr(torch, n)
    for n in ("float8_e5m2", "float8_e4m3fn", "float8_e5m2fnuz", "float8_e4m3fnuz")
    if hasattr(torch, n)
]


@st.composite
def tensors(draw: st.DrawFn) -> torch.Tensor:
    """Contiguous, permuted, strided, expanded, offset and size-1-dim tensors of every dtype."""
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.lists(st.integers(1, 5), min_size=1, max_size=4))
    base = torch.zeros(shape, dtype=torch.float32).to(dtype)
    ops = draw(st.lists(st.sampled_from(["permute", "step", "expand", "offset", "unsqueeze"]), max_size=3))
    t = base
    for op in ops:
        if op == "permute" and t.dim() > 1:
            perm = draw(st.permutations(range(t.dim())))
            t = t.permute(*perm)
        elif op == "step":
            dim = draw(st.integers(0, t.dim() - 1))
            t = t.narrow(dim, 0, t.shape[dim])[(slice(None),) * dim + (slice(None, None, 2),)]
        elif op == "expand":
            t = t.unsqueeze(0).expand(draw(st.integers(1, 3)), *t.shape)
        elif op == "offset" and t.numel() > 1:
            t = t.reshape(-1)[1:]
        elif op == "unsqueeze":
            t = t.unsqueeze(draw(st.integers(0, t.dim())))
    return t


def _adaptor(t: torch.Tensor) -> object:
    try:
        return TorchTensorJitArg(t).__cache_signature__()
    except RuntimeError as exc:
        return ("raises", type(exc), str(exc))


def _fast(t: torch.Tensor) -> object:
    try:
        return tensor_signature(t)
    except RuntimeError as exc:
        return ("raises", type(exc), str(exc))


@settings(max_examples=400, deadline=None)
@given(tensors())
def test_tensor_fast_path_equals_adaptor_signature(t: torch.Tensor) -> None:
    assert _fast(t) == _adaptor(t)


@settings(max_examples=200, deadline=None)
@given(tensors(), tensors())
def test_fast_path_distinguishes_exactly_what_adaptor_distinguishes(a: torch.Tensor, b: torch.Tensor) -> None:
    assert (_fast(a) == _fast(b)) == (_adaptor(a) == _adaptor(b))


def test_tensor_without_unit_stride_raises_flydsl_error() -> None:
    t = torch.zeros(4, 4)[:, ::2]
    with pytest.raises(RuntimeError, match="no axis with stride == 1"):
        tensor_signature(t)


def test_parameter_subclass_takes_fast_path_with_adaptor_signature() -> None:
    p = torch.nn.Parameter(torch.zeros(3, 4))
    signer = ArgSigner("f", resolve_signature(lambda a: None))
    assert signer((p,)) == (TorchTensorJitArg(p).__cache_signature__(),)


def _launcher(a: fx.Tensor, n: fx.Int32, k: fx.Constexpr[int], s: fx.Stream = None, x: float = 1.0) -> None:
    """Shaped like a real launcher: tensor, runtime scalar, constexpr, stream, float."""


def test_signatures_match_flydsl_protocol_for_every_parameter_kind() -> None:
    signer = ArgSigner("launch", resolve_signature(_launcher))
    t = torch.zeros(8, 2)
    got = signer((t, 5, 7, None, 2.0))
    assert got == (
        TorchTensorJitArg(t).__cache_signature__(),
        cache_signature(fx.Int32(5)),
        (int, 7),
        cache_signature(fx.Stream(None)),
        cache_signature(fx.Float32(2.0)),
    )


def test_value_free_signatures_hold_for_flydsl_scalars_and_streams() -> None:
    """The shortcut for Numeric/Stream relies on their signature ignoring the value."""
    for ctor, values in ((fx.Int32, (0, 1, -7)), (fx.Float32, (0.0, 2.5)), (fx.Boolean, (True, False))):
        assert {cache_signature(ctor(v)) for v in values} == {(ctor,)}
    assert cache_signature(fx.Stream(None)) == cache_signature(fx.Stream(1234)) == (fx.Stream,)


def test_jit_argument_values_sign_as_flydsl_does_stream_objects_included() -> None:
    """A defaulted ``fx.Stream(None)`` object (what callers who omit the stream pass) and a
    subclass overriding ``__cache_signature__`` both sign exactly as FlyDSL's protocol does."""

    class TaggedStream(fx.Stream):
        def __cache_signature__(self):  # a value-dependent signature: never a constant
            return (type(self), self.value)

    signer = ArgSigner("launch", resolve_signature(_launcher))
    t = torch.zeros(8)
    for stream in (fx.Stream(None), fx.Stream(7), TaggedStream(None), TaggedStream(3)):
        assert signer((t, 1, 7, stream, 1.0))[3] == cache_signature(stream)
    assert signer((t, 1, 7, TaggedStream(1), 1.0)) != signer((t, 1, 7, TaggedStream(2), 1.0))


def test_constexpr_values_key_by_value_and_type() -> None:
    signer = ArgSigner("launch", resolve_signature(_launcher))
    t = torch.zeros(8)
    assert signer((t, 1, 7, None, 1.0)) != signer((t, 1, 8, None, 1.0))
    assert signer((t, 1, 1, None, 1.0)) != signer((t, 1, True, None, 1.0))
    assert signer((t, 1, 7, None, 1.0)) == signer((t, 99, 7, None, 3.0))  # runtime values do not key


def test_constexpr_callables_are_reported_for_guarding() -> None:
    def epilogue(x: object) -> object:
        return x

    def launch(a: fx.Tensor, fn: fx.Constexpr[Callable]) -> None: ...

    signer = ArgSigner("launch", resolve_signature(launch))
    args = (torch.zeros(4), epilogue)
    assert signer.callables(args) == (epilogue,)
    assert signer(args)[1] == ("value", type(epilogue), epilogue)


def test_unknown_argument_type_names_parameter_type_and_fix() -> None:
    class Opaque:
        pass

    signer = ArgSigner("launch", resolve_signature(_launcher))
    with pytest.raises(ArgumentSignatureError) as info:
        signer((Opaque(), 1, 1, None, 1.0))
    err = info.value
    assert isinstance(err, TypeError)
    assert isinstance(err, ArgumentSignatureError)  # narrows for the typed fields below
    assert (err.launcher, err.param, err.value_type) == ("launch", "a", Opaque)
    assert "JitArgumentRegistry.register" in str(err) and "'a'" in str(err)


def test_jit_argument_without_cache_signature_is_rejected() -> None:
    class NoSig:
        def __get_ir_types__(self) -> list:
            return []

        def __c_abi_spec__(self) -> list:
            return []

    signer = ArgSigner("launch", resolve_signature(lambda a: None))
    with pytest.raises(ArgumentSignatureError, match="without __cache_signature__"):
        signer((NoSig(),))


def test_unhashable_constexpr_value_names_parameter() -> None:
    signer = ArgSigner("launch", resolve_signature(_launcher))
    with pytest.raises(ArgumentSignatureError, match="'k'"):
        signer((torch.zeros(4), 1, [1, 2], None, 1.0))


def test_registered_constructor_without_signature_is_rejected() -> None:
    class Handle:
        pass

    def ctor(value: object) -> object:
        return value

    JitArgumentRegistry.registry[Handle] = (ctor, fx.Int32)
    try:
        signer = ArgSigner("launch", resolve_signature(lambda h: None))
        with pytest.raises(ArgumentSignatureError, match="has no __cache_signature__"):
            signer((Handle(),))
    finally:
        del JitArgumentRegistry.registry[Handle]


def test_warm_path_signs_as_the_general_path_whatever_the_order_of_types() -> None:
    """``signer.key`` (the launcher's warm path: the last types' plan in key form, checking
    the types itself) spells out to what ``signer(...)`` answers, as argument types change
    call to call; two key forms are equal exactly when the signatures are."""
    signer = ArgSigner("launch", resolve_signature(_launcher))
    general = ArgSigner("launch", resolve_signature(_launcher))
    t, u = torch.zeros(8, 2), torch.zeros(4, dtype=torch.float16)
    p = torch.nn.Parameter(torch.zeros(8))
    calls = [
        (t, 5, 7, None, 2.0),
        (t, 5, 7, None, 2.0),
        (u, 5, 7, fx.Stream(None), 2.0),
        (t, 5, True, None, 2.0),  # same types but a bool constexpr: another plan
        (p, 5, 7, None, 2.0),
        (t, 5, 7, None, 2.0),
        (u.t() if u.dim() > 1 else u, 6, 7, fx.Stream(3), -0.0),
        (t, 5, (1, 2.5), None, 2.0),
    ]
    keys = []
    for args in calls:
        key = signer.key(args)
        assert signatures(key) == general(args), args
        hash(key)
        keys.append(key)
    assert signatures(signer.key(calls[0])) == signer(calls[0])
    for (k1, a1), (k2, a2) in itertools.product(zip(keys, calls), repeat=2):
        assert (k1 == k2) == (general(a1) == general(a2)), (a1, a2)
    # value-free signatures are tokens: the key hashes and compares by identity
    assert all(type(part) is SigToken for part in keys[0][:1] + keys[0][1:2] + keys[0][3:4])


def test_warm_path_errors_are_the_general_path_errors() -> None:
    """Bad input through the warm path: the same exceptions, naming the same parameter."""
    signer = ArgSigner("launch", resolve_signature(_launcher))
    signer.key((torch.zeros(4), 1, 1, None, 1.0))  # warm for (Tensor, int, int, NoneType, float)
    with pytest.raises(ArgumentSignatureError, match="'k'"):
        signer.key((torch.zeros(4), 1, [1, 2], None, 1.0))
    with pytest.raises(ArgumentSignatureError, match="'a'"):
        signer.key((object(), 1, 1, None, 1.0))
    with pytest.raises(TypeError, match="takes 5 arguments, 4 given"):
        signer.key((torch.zeros(4), 1, 1, None))
    strided = torch.zeros(4, 4).t()[0]  # no unit stride: FlyDSL's adaptor refuses it
    with pytest.raises(RuntimeError, match="no axis with stride == 1") as warm:
        signer.key((strided, 1, 1, None, 1.0))
    with pytest.raises(RuntimeError) as general:
        ArgSigner("launch", resolve_signature(_launcher))((strided, 1, 1, None, 1.0))
    assert str(warm.value) == str(general.value)
    assert signatures(signer.key((torch.zeros(4), 1, 1, None, 1.0))) == signer((torch.zeros(4), 1, 1, None, 1.0))


def test_tokens_are_interned_and_a_refilled_table_never_conflates(monkeypatch: pytest.MonkeyPatch) -> None:
    """One token per signature; when the table is full and cleared, a signature met again
    gets a new token that equals neither the old one nor any other signature's."""
    from flydsl_runtime.trace import argsig

    sig = (TorchTensorJitArg, torch.float32, 4, False, (-1,), (1,))
    assert token(sig) is token(sig)
    assert signatures((token(sig), (int, 7))) == (sig, (int, 7))
    old = token(sig)
    monkeypatch.setattr(argsig, "_TOKEN_LIMIT", len(argsig._tokens))
    other = token(("another signature",))  # the table was full: cleared first
    renewed = token(sig)
    assert renewed is not old and renewed != old and hash(renewed) != hash(old)
    assert renewed != other and renewed.sig == old.sig
    assert tensor_signature(torch.zeros(3)) == sig
