def f():
    pass


def g():
    pass


for fn in [f, g]:
    fn()
