def dec(f):
    return f


@dec
def g():
    pass


g()
