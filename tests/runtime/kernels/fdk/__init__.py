"""Kernels in the shape of real FlyDSL ones, copied per test so tests can edit and reload them."""
