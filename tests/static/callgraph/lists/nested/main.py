def f():
    pass


def g():
    pass


m = [[f], [g]]
m[1][0]()
