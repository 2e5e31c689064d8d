def f():
    pass


def setup():
    global op
    op = f


setup()
op()
