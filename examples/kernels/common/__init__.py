"""Helpers shared by every kernel family: memory access, reductions, layouts."""

from .mem import load_tile, store_tile
from .reduce import *  # noqa: F403  (re-exports row_max, row_sum through __all__)

__all__ = ["load_tile", "store_tile", "row_max", "row_sum"]  # noqa: F405  (from .reduce)
