"""Argument binding for the warm path: a call's arguments as one positional tuple, without ``inspect``.

Contract
--------
:class:`ArgBinder` is built once per launcher signature (FlyDSL's ``JitFunction._sig``, ``self``
already split off) and the function whose defaults it resolves. ``binder.bind(args, kwargs)`` returns
the arguments in parameter order with omitted parameters filled by their defaults: exactly
``sig.bind(*args, **kwargs)`` followed by ``apply_defaults()``, as a tuple. It handles positional,
keyword and defaulted arguments itself (the common FlyDSL call omits a defaulted
``stream=fx.Stream(None)``); whatever it does not handle (a missing or duplicated argument, an
unknown keyword, ``*args``/``**kwargs`` parameters, positional-only parameters passed by keyword)
goes to ``inspect.Signature.bind``, so errors and exotic signatures behave exactly as before.

Defaults are resolved once, from the function's ``__defaults__``/``__kwdefaults__``. The
launcher's guard already watches those attributes; on its slow path the launcher asks
:meth:`ArgBinder.stale` (two identity checks) and builds a new binder when they were replaced.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from types import FunctionType
from typing import Any

__all__ = ["ArgBinder"]

_MISSING: Any = object()
_SIMPLE = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)


class ArgBinder:
    """``binder.bind(args, kwargs) -> tuple``: see the module docstring."""

    __slots__ = ("_name", "_sig", "_func", "_defaults", "_kwdefaults", "bind", "nparams", "tails")

    def __init__(self, name: str, sig: inspect.Signature, func: Callable[..., Any] | None = None) -> None:
        self._name, self._sig, self._func = name, sig, func
        self._defaults = getattr(func, "__defaults__", None) if type(func) is FunctionType else None
        self._kwdefaults = getattr(func, "__kwdefaults__", None) if type(func) is FunctionType else None
        params = tuple(sig.parameters.values())
        self.nparams = len(params)
        self.bind: Callable[[tuple, dict], tuple]
        # number of positional arguments n -> the defaults completing a keyword-free call of
        # n arguments (``args + tails[n]`` is ``bind(args, {})``); absent when that call is
        # an error or the signature is not plain
        self.tails: Mapping[int, tuple] = {}  # a dict for speed; never written after __init__
        if all(p.kind in _SIMPLE for p in params):
            self.tails = _tails(params)
            self.bind = _fast_binder(params, self.tails, self._slow)
        else:
            self.bind = self._slow

    def stale(self) -> bool:
        """True when the function's defaults were replaced since this binder was built."""
        func = self._func
        if type(func) is not FunctionType:
            return False
        return func.__defaults__ is not self._defaults or func.__kwdefaults__ is not self._kwdefaults

    def _slow(self, args: tuple, kwargs: dict) -> tuple:
        try:
            bound = self._sig.bind(*args, **kwargs)
        except TypeError as exc:
            raise TypeError(f"{self._name}(): {exc}") from None
        bound.apply_defaults()
        return tuple(bound.arguments.values())


def _defaults(params: tuple[inspect.Parameter, ...]) -> tuple[Any, ...]:
    return tuple(_MISSING if p.default is inspect.Parameter.empty else p.default for p in params)


def _tails(params: tuple[inspect.Parameter, ...]) -> dict[int, tuple]:
    """``n -> defaults[n:]`` for each count of positional arguments after which every
    parameter has a default (identity tests only: a default's ``__eq__`` never runs)."""
    defaults = _defaults(params)
    npos = sum(1 for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return {n: defaults[n:] for n in range(npos + 1) if not any(d is _MISSING for d in defaults[n:])}


def _fast_binder(
    params: tuple[inspect.Parameter, ...], tails: Mapping[int, tuple], slow: Callable[[tuple, dict], tuple]
) -> Callable[[tuple, dict], tuple]:
    """The binder for signatures of plain (positional-or-keyword / keyword-only) parameters.

    ``tails`` (:func:`_tails`) completes keyword-free calls. Keyword calls fill a list by
    parameter index; anything irregular falls back to ``slow`` (``inspect``)."""
    defaults = _defaults(params)
    npos = sum(1 for p in params if p.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD)
    index = {p.name: i for i, p in enumerate(params)}
    tails_t = tuple(tails.get(n) for n in range(npos + 1))
    # Parameters after the n-th positional one that have no default: a keyword must fill each.
    required = tuple(tuple(i for i in range(n, len(params)) if defaults[i] is _MISSING) for n in range(npos + 1))

    def bind(args: tuple, kwargs: dict) -> tuple:
        n = len(args)
        if not kwargs:
            if n <= npos:
                tail = tails_t[n]
                if tail is not None:
                    return args + tail if tail else args
            return slow(args, kwargs)
        if n > npos:
            return slow(args, kwargs)
        values = [*args, *defaults[n:]]
        for key, value in kwargs.items():
            i = index.get(key, -1)
            if i < n:  # unknown keyword (-1), or a parameter already given positionally
                return slow(args, kwargs)
            values[i] = value
        for i in required[n]:
            if values[i] is _MISSING:
                return slow(args, kwargs)
        return tuple(values)

    return bind
