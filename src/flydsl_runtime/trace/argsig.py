"""Argument cache signatures: what each launcher argument specializes in the compiled code.

Contract
--------
Input: a launcher's ``inspect.Signature`` (``self`` already split off, as FlyDSL does) and,
per call, the arguments as one positional tuple in parameter order.
Output: a tuple with one hashable signature per parameter, equal for two calls exactly when
FlyDSL 0.5 would specialize them the same way:

* ``Constexpr[...]`` / ``Type[...]`` parameters: the value itself is baked into the IR, so
  the signature is the value keyed *exactly*: its exact type plus, for a float, its IEEE-754
  bits (``-0.0`` and ``0.0`` are two entries, a ``NaN`` hits itself), recursively through
  tuples; capture-free lambdas by FlyDSL's ``Constexpr.value_signature`` with the floats
  among their constants and defaults re-keyed by bits; any other hashable value (a dtype
  class, a function, an enum member, an int subclass) by ``(type, value)``. ``==`` alone
  would conflate ``True``/``1``/``1.0``, ``0.0``/``-0.0`` and equal members of different
  int subclasses, which trace to different IR. Functions passed this way are also reported
  by :meth:`ArgSigner.callables` so the launcher can guard their code.
* Raw ``torch.Tensor`` (and subclasses FlyDSL wraps with ``TorchTensorJitArg``): a fast path
  from ``dtype`` and ``stride()`` alone, equal to ``TorchTensorJitArg(t).__cache_signature__()``
  without building the adaptor (property-tested in ``tests/runtime/test_argsig.py``).
* Everything else goes through FlyDSL's ``cache_signature`` protocol, exactly like its own
  argument resolution: a ``JitArgument`` instance signs itself, a parameter annotated with a
  ``JitArgument`` type (``fx.Stream``) is wrapped by that type, other values by the
  constructor in ``JitArgumentRegistry``. A type with no ``__cache_signature__`` raises
  :class:`ArgumentSignatureError` (a ``TypeError``) naming the parameter, the type and the fix.

Two outputs per call. ``signer(args)`` gives the signatures themselves (what FlyDSL's
``__cache_signature__`` gives; explanations and tests read them). ``signer.key(args)`` gives
the launcher's *key form*: the same tuple with every signature that does not depend on the
argument's value (a raw tensor's, a stream's, a scalar runtime type's) replaced by its
:class:`SigToken`, one interned object per distinct signature. A token hashes and compares
by identity, so the launcher's key hashes in time independent of the signatures' nesting;
``signatures(signer.key(args)) == signer(args)`` always, and two key forms are equal only
if the signatures are (a token never equals anything but itself, and tokens are never
dropped while a key holds them).

Dispatch is resolved once per tuple of argument types into one generated function (the
technique FlyDSL uses for its argument fills), so a warm call does one dict lookup and one
call; nothing here allocates FlyDSL adaptors, DLPack capsules or IR.
"""

from __future__ import annotations

import functools
import inspect
import struct
import types
from collections.abc import Callable, Hashable
from typing import Any

from flydsl.compiler.jit_argument import JitArgumentRegistry, TorchTensorJitArg, is_type_param_annotation
from flydsl.compiler.protocol import cache_signature
from flydsl.expr.numeric import Numeric
from flydsl.expr.typing import Constexpr, Stream

from flydeps.store import codegen as _codegen

__all__ = ["ArgSigner", "ArgumentSignatureError", "SigToken", "signatures", "tensor_signature", "token"]


# Signature methods whose result is ``(type(self),)`` whatever the value (read from FlyDSL
# 0.5's sources; tests/runtime/test_argsig.py fails if FlyDSL changes them). A scalar or a
# stream then signs without constructing its JitArgument.
_VALUE_FREE_SIGNATURES = (Numeric.__cache_signature__, Stream.__cache_signature__)

_TENSOR_MEMO_LIMIT = 4096
_TYPE_PLAN_LIMIT = 256
_TOKEN_LIMIT = 1 << 16


class ArgumentSignatureError(TypeError):
    """An argument's type cannot say what it specializes, so it cannot be keyed safely."""

    def __init__(self, launcher: str, param: str, value_type: type, why: str) -> None:
        self.launcher, self.param, self.value_type = launcher, param, value_type
        tname = f"{value_type.__module__}.{value_type.__qualname__}"
        super().__init__(
            f"{launcher}(): argument {param!r} of type {tname} {why}. Every runtime argument of a "
            "launcher needs a cache signature: pass a JitArgument that implements "
            "__cache_signature__, register a constructor with "
            "flyc.JitArgumentRegistry.register(...), or annotate the parameter as fx.Constexpr."
        )


def _tensor_signature_slow(tensor: Any) -> Hashable:
    """FlyDSL's own signature, used when the fast path does not apply (and for its errors)."""
    return TorchTensorJitArg(tensor).__cache_signature__()


class SigToken:
    """The interned stand-in of one signature in a launcher key: equal only to itself."""

    __slots__ = ("sig", "__weakref__")

    def __init__(self, sig: Hashable) -> None:
        self.sig = sig

    def __repr__(self) -> str:
        return f"SigToken({self.sig!r})"


# signature -> its token. Bounded by the distinct value-free signatures a process meets
# (dtype x rank x unit-stride axis for tensors, one per type otherwise); when it does fill,
# it is cleared, and a signature met again gets a new token: a spurious miss, never a
# false hit (an old token stays alive, and distinct, in every key that holds it).
_tokens: dict[Hashable, SigToken] = {}


def token(sig: Hashable) -> SigToken:
    """The interned token of a value-free signature."""
    tok = _tokens.get(sig)
    if tok is None:
        if len(_tokens) >= _TOKEN_LIMIT:
            _tokens.clear()
        tok = _tokens[sig] = SigToken(sig)
    return tok


def signatures(key: tuple) -> tuple:
    """The signatures of a key form (``signer.key(args)``): each token replaced by its signature."""
    return tuple(e.sig if type(e) is SigToken else e for e in key)


_tensor_memo: dict[tuple[Any, tuple[int, ...]], SigToken] = {}  # (dtype, stride()) -> token


def tensor_signature(tensor: Any) -> Hashable:
    """``TorchTensorJitArg(tensor).__cache_signature__()`` from tensor metadata only.

    FlyDSL wraps a raw tensor layout-dynamic: every shape entry and every stride except the
    first unit stride become ``-1``, and the alignment is the element size. So the signature
    is a function of ``(dtype, stride())``, memoised on that pair. A tensor without a unit
    stride takes FlyDSL's path, which raises FlyDSL's own error.
    """
    return tensor_token(tensor).sig


def tensor_token(tensor: Any) -> SigToken:
    """The token of :func:`tensor_signature`: what a launcher key holds for a raw tensor."""
    key = (tensor.dtype, tensor.stride())
    tok = _tensor_memo.get(key)
    return tok if tok is not None else _tensor_token_uncached(tensor, key)


def _tensor_token_uncached(tensor: Any, key: tuple[Any, tuple[int, ...]]) -> SigToken:
    dtype, strides = key
    if 1 not in strides:
        return token(_tensor_signature_slow(tensor))  # FlyDSL's adaptor: raises its own error
    unit, rank = strides.index(1), len(strides)
    stride_sig = tuple(1 if i == unit else -1 for i in range(rank))
    tok = token((TorchTensorJitArg, dtype, tensor.element_size(), False, (-1,) * rank, stride_sig))
    if len(_tensor_memo) >= _TENSOR_MEMO_LIMIT:
        _tensor_memo.clear()
    _tensor_memo[key] = tok
    return tok


# A resolved slot: how one argument of one concrete type is signed.
#   ("const", sig)  the signature does not depend on the value
#   ("tensor", None)  the raw-tensor fast path
#   ("scalar", t)  a Constexpr bool/int/str (exact type): (t, value)
#   ("float", None)  a Constexpr float: (float, its 8 IEEE-754 bytes)
#   ("call", fn)  anything else: fn(value)
Slot = tuple[str, Any]
_SCALARS = (bool, int, float, str)


def _self_signing(value: Any) -> Hashable:
    return value.__cache_signature__()


def _constructed_by(ctor: Callable[[Any], Any]) -> Slot:
    sig_method = getattr(ctor, "__cache_signature__", None)
    if isinstance(ctor, type) and sig_method in _VALUE_FREE_SIGNATURES:
        return ("const", (ctor,))
    return ("call", lambda value: cache_signature(ctor(value)))


def _is_jit_argument_type(tp: type) -> bool:
    return hasattr(tp, "__get_ir_types__") and hasattr(tp, "__c_abi_spec__")


def _jit_argument_slot(tp: type) -> Slot | str:
    method = getattr(tp, "__cache_signature__", None)
    if method in _VALUE_FREE_SIGNATURES:
        # ``(type(self),)`` whatever the value, and a slot is per concrete type: a constant.
        # The common case: a launcher's defaulted ``stream=fx.Stream(None)`` left out by callers.
        return ("const", (tp,))
    if method is not None:
        return ("call", _self_signing)
    return "is a JitArgument without __cache_signature__"


def _runtime_slot(tp: type) -> Slot | str:
    """How a runtime value of type ``tp`` is signed, or why it cannot be."""
    if _is_jit_argument_type(tp):
        return _jit_argument_slot(tp)
    if tp in (tuple, list, types.SimpleNamespace):
        return ("call", cache_signature)
    ctor, _dsl_type = JitArgumentRegistry.get(tp)
    if ctor is None:
        return "is neither a JitArgument nor registered in flyc.JitArgumentRegistry"
    if ctor is TorchTensorJitArg:
        return ("tensor", None)
    if not hasattr(ctor, "__cache_signature__"):
        name = getattr(ctor, "__qualname__", ctor)
        return f"is registered with constructor {name!r}, which has no __cache_signature__"
    return _constructed_by(ctor)


def _annotated_slot(ann: type, tp: type) -> Slot | str:
    # FlyDSL keeps a value that already is a JitArgument; only others are wrapped by the annotation.
    return _jit_argument_slot(tp) if _is_jit_argument_type(tp) else _constructed_by(ann)


_float_bits = struct.Struct("<d").pack


def _exact_floats(sig: Any) -> Any:
    """FlyDSL's value signature with every float re-keyed by its bits (``-0.0 == 0.0``)."""
    if type(sig) is float:
        return ("float-bits", _float_bits(sig))
    if type(sig) is tuple:
        return tuple(map(_exact_floats, sig))
    return sig


def _constexpr_signature(value: Any) -> Hashable:
    """A compile-time value keyed so that two values share a key only if they trace alike."""
    tp = type(value)
    if tp is float:
        return (float, _float_bits(value))
    if tp is tuple:
        return (tuple, tuple(map(_constexpr_signature, value)))
    if tp in _SCALARS:
        return (tp, value)
    try:
        return _exact_floats(Constexpr.value_signature(value))  # capture-free lambdas
    except TypeError:
        hash(value)  # a dtype class, a function, an enum member: what the trace used
        return ("value", tp, value)


def _constexpr_slot(tp: type) -> Slot:
    if tp is float:
        return ("float", None)
    return ("scalar", tp) if tp in _SCALARS else ("call", _constexpr_signature)


def _compile_plan(
    slots: tuple[Slot, ...],
    *,
    tokens: bool = False,
    types_: tuple[type, ...] | None = None,
    slow: Callable[[tuple], tuple] | None = None,
) -> Callable[[tuple], tuple]:
    """One generated function per argument-type tuple: no per-argument dispatch or call.

    ``tokens``: the key form (value-free signatures as their :class:`SigToken`) instead of
    the signatures. With ``types_`` and ``slow``: the function first checks that the
    arguments have exactly those types (``type(a) is T``, no user code) and hands anything
    else, including an argument whose signature raises, to ``slow`` (the general path)."""
    ns: dict[str, Any] = {"_tm": _tensor_memo, "_tt": tensor_token, "_fb": _float_bits, "_slow": slow}
    terms = []
    for i, (kind, payload) in enumerate(slots):
        if kind == "const":
            ns[f"c{i}"] = token(payload) if tokens else payload
            terms.append(f"c{i}")
        elif kind == "tensor":
            tensor = f"(_tm.get((a{i}.dtype, a{i}.stride())) or _tt(a{i}))"
            terms.append(tensor if tokens else f"{tensor}.sig")
        elif kind == "scalar":
            ns[f"t{i}"] = payload
            terms.append(f"(t{i}, a{i})")
        elif kind == "float":
            terms.append(f"(float, _fb(a{i}))")
        else:
            ns[f"f{i}"] = payload
            terms.append(f"f{i}(a{i})")
    params = "".join(f"a{i}, " for i in range(len(slots)))
    result = f"({''.join(t + ', ' for t in terms)})"
    if types_ is None:
        src = f"def sign(args):\n    ({params}) = args\n    return {result}\n"
    else:
        ns.update({f"T{i}": tp for i, tp in enumerate(types_)})
        checks = " and ".join(f"type(a{i}) is T{i}" for i in range(len(slots))) or "True"
        src = (
            "def sign(args):\n"
            f"    if len(args) == {len(slots)}:\n"
            f"        ({params}) = args\n"
            f"        if {checks}:\n"
            "            try:\n"
            f"                return {result}\n"
            "            except TypeError:\n"
            "                pass\n"
            "    return _slow(args)\n"
        )
    exec(_codegen.code(src, "<flydsl_runtime-argsig>"), ns)
    return ns["sign"]


_WARM_KINDS = {"const": 0, "tensor": 1, "scalar": 2}


def _warm_spec(
    types_: tuple[type, ...], slots: tuple[Slot, ...]
) -> tuple[tuple[type, ...], tuple[int, ...], tuple[Any, ...]] | None:
    """The key-form plan of ``types_`` as data: ``(types, kinds, payloads)``, kind 0 a
    constant (payload: its token), 1 a raw tensor (payload: the ``(dtype, stride())`` memo
    of tokens), 2 a compile-time scalar keyed ``(type, value)`` (payload: the type). None
    when a slot is of another kind (those plans stay in Python)."""
    kinds, payloads = [], []
    for kind, payload in slots:
        code = _WARM_KINDS.get(kind)
        if code is None:
            return None
        kinds.append(code)
        payloads.append(token(payload) if kind == "const" else _tensor_memo if kind == "tensor" else payload)
    return (types_, tuple(kinds), tuple(payloads))


class ArgSigner:
    """Signs the argument tuples of one launcher; built once per launcher signature."""

    __slots__ = (
        "_launcher",
        "_names",
        "_kinds",
        "_callable_slots",
        "_by_types",
        "_key_plans",
        "_checked",
        "key",
        "_warm",
    )

    def __init__(self, launcher: str, signature: inspect.Signature) -> None:
        self._launcher = launcher
        self._names = tuple(signature.parameters)
        kinds: list[Callable[[type], Slot | str]] = []
        callable_slots: list[int] = []
        for index, param in enumerate(signature.parameters.values()):
            ann = param.annotation
            if ann is not inspect.Parameter.empty and (
                Constexpr.is_constexpr_annotation(ann) or is_type_param_annotation(ann)
            ):
                kinds.append(_constexpr_slot)
                callable_slots.append(index)
            elif isinstance(ann, type) and _is_jit_argument_type(ann) and ann is not Constexpr:
                kinds.append(functools.partial(_annotated_slot, ann))
            else:
                kinds.append(_runtime_slot)
        self._kinds = tuple(kinds)
        self._callable_slots = tuple(callable_slots)
        self._by_types: dict[tuple[type, ...], Callable[[tuple], tuple]] = {}  # types -> signatures
        self._key_plans: dict[tuple[type, ...], Callable[[tuple], tuple]] = {}  # types -> key form
        # types -> (warm key-form plan, the same plan as data for the C warm path)
        self._checked: dict[tuple[type, ...], tuple[Callable[[tuple], tuple], Any]] = {}
        # The warm path: the last argument types' key-form plan, which checks the types
        # itself and hands anything else to _key (which then makes that plan the warm one).
        self.key: Callable[[tuple], tuple] = self._key
        # The warm plan as data, for flydsl_runtime.launch._warmcall (the C warm path): see _warm_spec.
        self._warm: tuple[tuple[type, ...], tuple[int, ...], tuple[Any, ...]] | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return self._names

    def __call__(self, args: tuple) -> tuple:
        """One signature per parameter; ``args`` holds every parameter positionally."""
        types_ = tuple(map(type, args))
        sign = self._by_types.get(types_)
        if sign is None:
            sign = self._plan_for(args, types_)
        try:
            return sign(args)
        except TypeError as exc:
            index = self._failing(types_, args)
            if index is None:
                raise
            raise self._error(index, args[index], f"has no usable cache signature ({exc})") from exc

    def _key(self, args: tuple) -> tuple:
        """The key form of ``args`` (general path): errors are ``__call__``'s."""
        types_ = tuple(map(type, args))
        plan = self._key_plans.get(types_)
        if plan is None:
            slots = self._checked_slots(args, types_)  # the named error for a type without one
            if len(self._key_plans) >= _TYPE_PLAN_LIMIT:
                self._key_plans.clear()
            plan = self._key_plans[types_] = _compile_plan(slots, tokens=True)
        warm = self._checked.get(types_)
        if warm is None:
            if len(self._checked) >= _TYPE_PLAN_LIMIT:
                self._checked.clear()
            slots = self._slots(types_)
            fast = _compile_plan(slots, tokens=True, types_=types_, slow=self._key)
            warm = self._checked[types_] = (fast, _warm_spec(types_, slots))
        self.key, self._warm = warm
        try:
            return plan(args)
        except TypeError:
            self(args)  # raises the named error
            raise

    def _checked_slots(self, args: tuple, types_: tuple[type, ...]) -> tuple[Slot, ...]:
        """The slot of each argument's type; the named error for one that has none."""
        if len(args) != len(self._kinds):
            raise TypeError(f"{self._launcher}() takes {len(self._kinds)} arguments, {len(args)} given")
        slots = []
        for index, (kind, tp) in enumerate(zip(self._kinds, types_)):
            slot = kind(tp)
            if isinstance(slot, str):
                raise self._error(index, args[index], slot)
            slots.append(slot)
        return tuple(slots)

    def _plan_for(self, args: tuple, types_: tuple[type, ...]) -> Callable[[tuple], tuple]:
        sign = _compile_plan(self._checked_slots(args, types_))
        if len(self._by_types) >= _TYPE_PLAN_LIMIT:
            self._by_types.clear()
        self._by_types[types_] = sign
        return sign

    def _slots(self, types_: tuple[type, ...]) -> tuple[Slot, ...]:
        slots = tuple(kind(tp) for kind, tp in zip(self._kinds, types_))
        assert not any(isinstance(slot, str) for slot in slots), "a plan exists for these types"
        return slots  # type: ignore[return-value]

    def _failing(self, types_: tuple[type, ...], args: tuple) -> int | None:
        for index, (kind, tp) in enumerate(zip(self._kinds, types_)):
            try:
                _compile_plan((kind(tp),))((args[index],))  # type: ignore[arg-type]
            except TypeError:
                return index
        return None

    def callables(self, args: tuple) -> tuple[Callable[..., Any], ...]:
        """Functions passed as compile-time values: their code is traced, so it is a dependency."""
        return tuple(
            args[i] for i in self._callable_slots if isinstance(args[i], (types.FunctionType, types.MethodType))
        )

    def _error(self, index: int, value: Any, why: str) -> ArgumentSignatureError:
        return ArgumentSignatureError(self._launcher, self._names[index], type(value), why)
