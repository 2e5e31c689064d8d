def call(x):
    x()


def a():
    pass


def b():
    pass


call(a)
call(b)
