def h():
    pass


def make():
    return lambda: h()


make()()
