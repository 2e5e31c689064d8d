def g():
    pass


def f():
    return g


f()()
