def f():
    pass


def g():
    pass


d = {"f": f, "g": g}
for k in d:
    d[k]()
