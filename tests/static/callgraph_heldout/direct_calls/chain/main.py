def a():
    return b()


def b():
    return c()


def c():
    pass


a()
