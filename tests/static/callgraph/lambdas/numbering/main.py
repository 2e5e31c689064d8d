def g():
    pass


def f():
    a = lambda: 1
    b = lambda: g()
    a()
    return b()


f()
