def h():
    pass


def g():
    return h


def f(x):
    x()


f(g())
