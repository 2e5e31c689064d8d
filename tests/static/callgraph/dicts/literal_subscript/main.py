def f():
    pass


def g():
    pass


d = {"a": f, "b": g}
d["a"]()
