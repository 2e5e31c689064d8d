def f():
    pass


def inner(cb):
    cb()


def outer(**kw):
    inner(**kw)


outer(cb=f)
