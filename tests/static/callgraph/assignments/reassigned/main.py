def f():
    pass


def g():
    pass


x = f
x = g
x()
