"""A small kernel repository in the shape of a real FlyDSL project (the flydeps example).

``flydeps graph examples/kernels`` shows what each compile factory, kernel and launcher
depends on, without importing any of this code.
"""
