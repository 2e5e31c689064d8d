def f():
    pass


def g():
    pass


fs = [f, g]
fs[1]()
