"""Imported inside a trace by a helper (tests/runtime/test_trace_inputs.py), never at the package's import."""

FACTOR = 3.0
