from . import c


def g():
    c.leaf()
