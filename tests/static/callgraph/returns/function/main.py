def g():
    pass


def f():
    return g


x = f()
x()
