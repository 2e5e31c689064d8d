from .b import g


def entry():
    g()
