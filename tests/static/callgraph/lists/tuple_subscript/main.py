def f():
    pass


def g():
    pass


t = (f, g)
t[0]()
