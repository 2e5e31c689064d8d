"""Layouts of register tiles."""

import flydsl.expr as fx


def tile_layout(block, vector_width):
    return fx.make_layout((block // vector_width, vector_width), (vector_width, 1))
