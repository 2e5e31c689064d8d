def f():
    g()


def g():
    pass


f()
