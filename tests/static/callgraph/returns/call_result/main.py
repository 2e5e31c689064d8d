def g():
    return 1


def f():
    return g()


f()
