"""Global-memory tiles: the loads and stores every kernel uses."""

import flydsl.expr as fx

from .layout import tile_layout

VECTOR_WIDTH = 4


def load_tile(tensor, row, block):
    """Load one ``block``-wide row tile of ``tensor`` into registers."""
    view = fx.make_view(fx.get_iter(tensor), tile_layout(block, VECTOR_WIDTH))
    return _load_vectorized(view, row)


def _load_vectorized(view, row):
    return fx.memref_load_vec(view[row])


def store_tile(tensor, row, block, values):
    view = fx.make_view(fx.get_iter(tensor), tile_layout(block, VECTOR_WIDTH))
    fx.memref_store_vec(values, view[row])
