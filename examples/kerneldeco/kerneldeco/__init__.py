"""kerneldeco: a library-style decorator, as kernel libraries write them.

``traced(fn)`` returns a ``functools.wraps`` wrapper (``__wrapped__`` is ``fn``) that calls
``fn`` through its closure and counts the calls in ``CALLS``. ``traced_with(tag)`` is the
same with a decorator argument kept in the wrapper's closure. Installed non-editable into
the test environments, so its code lives in site-packages and is a library leaf for
flydeps while the decorated user functions are the user's own code.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["CALLS", "traced", "traced_with"]
__version__ = "0.1.0"

F = TypeVar("F", bound=Callable[..., Any])
CALLS: dict[str, int] = {}


def traced(fn: F) -> F:
    """Wrap ``fn``; each call is counted under its qualified name in ``CALLS``."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        name = getattr(fn, "__qualname__", "?")
        CALLS[name] = CALLS.get(name, 0) + 1
        return fn(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def traced_with(tag: str) -> Callable[[F], F]:
    """``@traced_with("tag")``: like :func:`traced`, counted under ``"tag:qualname"``."""

    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            name = f"{tag}:{getattr(fn, '__qualname__', '?')}"
            CALLS[name] = CALLS.get(name, 0) + 1
            return fn(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate
