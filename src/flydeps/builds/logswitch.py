"""The ``FLYDEPS_LOG`` switch: rebuild and recompile reasons on stderr with no logging setup.

Contract: consumers log why they rebuilt at INFO on their package logger (``flydeps`` for
:func:`flydeps.cached_factory`, ``flydsl_runtime`` for the launchers) and call
:func:`reasons_to_stderr` with that logger just before (rebuilds are rare, so the variable
is read each time and may be flipped at run time). While ``FLYDEPS_LOG`` names
``recompiles`` (or its alias ``rebuilds``), the logger carries one stderr handler prefixed
with the package name and lets INFO through; when the word is gone the handler is removed.
A bad value raises :class:`~flydeps.settings.SettingError`. Users who configure logging
themselves need none of this: the records are ordinary INFO records on those loggers.
"""

from __future__ import annotations

import logging
import sys
import threading

from .. import settings

__all__ = ["LOG_WORDS", "reasons_to_stderr", "wants_reasons"]

#: Accepted words of ``FLYDEPS_LOG``: both mean "log rebuild/recompile reasons".
LOG_WORDS = ("recompiles", "rebuilds")


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes to whatever ``sys.stderr`` is at the time of each record (as ``logging.lastResort``)."""

    def __init__(self) -> None:
        logging.Handler.__init__(self)

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr


_handlers: dict[str, logging.Handler] = {}
_lock = threading.Lock()


def wants_reasons() -> bool:
    """True when ``FLYDEPS_LOG`` asks for rebuild/recompile reasons on stderr."""
    return bool(settings.names("FLYDEPS_LOG", choices=LOG_WORDS))


def reasons_to_stderr(logger: logging.Logger) -> None:
    """Attach (or, when no longer asked for, detach) ``logger``'s stderr reason handler."""
    wanted = wants_reasons()
    if wanted is (logger.name in _handlers):
        return
    with _lock:
        handler = _handlers.get(logger.name)
        if wanted and handler is None:
            handler = _StderrHandler()
            handler.setFormatter(logging.Formatter(f"{logger.name}: %(message)s"))
            logger.addHandler(handler)
            if logger.getEffectiveLevel() > logging.INFO:
                # Left at INFO when the switch goes off: restoring it could undo a level
                # someone set meanwhile (pytest's caplog.at_level, the user's own setup).
                logger.setLevel(logging.INFO)
            _handlers[logger.name] = handler
        elif not wanted and handler is not None:
            logger.removeHandler(handler)
            del _handlers[logger.name]
