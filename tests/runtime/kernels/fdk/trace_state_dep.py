"""A module imported inside a helper of trace_state.py (edited and reloaded by the tests)."""

FACTOR = 2.0
