def f():
    pass


def run(cb=None):
    cb()


run(cb=f)
