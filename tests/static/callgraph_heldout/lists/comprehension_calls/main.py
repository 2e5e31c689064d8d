def f():
    return 1


def g():
    return 2


ops = [f, g]
results = [op() for op in ops]
