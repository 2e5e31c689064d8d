def f():
    pass


def g():
    pass


def pair():
    return f, g


a, b = pair()
b()
