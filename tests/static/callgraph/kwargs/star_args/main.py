def f():
    pass


def g():
    pass


def call_all(*fns):
    for fn in fns:
        fn()


call_all(f, g)
