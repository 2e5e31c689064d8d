"""Whether FlyDSL embeds source locations in the IR it builds (issue 7.6).

Contract: :func:`positions_in_ir` answers with FlyDSL's own resolution of
``FLYDSL_DEBUG_ENABLE_DEBUG_INFO`` (``flydsl.utils.env.debug.enable_debug_info``: same
variable, same parsing, read live), never a re-reading of the variable. When it is true
the IR carries file names, lines and columns, so the launcher's fingerprint must be
computed with ``flydeps.fingerprint_roots(roots, positions=True)``: moving a helper,
adding a comment line above it or renaming its file then changes the key.
"""

from __future__ import annotations

from flydsl.utils import env as _flydsl_env

__all__ = ["positions_in_ir"]


def positions_in_ir() -> bool:
    """True when a trace made now records source locations (FlyDSL debug info is on)."""
    return bool(_flydsl_env.debug.enable_debug_info)
