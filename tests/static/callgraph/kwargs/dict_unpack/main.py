def f():
    pass


def run(cb):
    cb()


opts = {"cb": f}
run(**opts)
