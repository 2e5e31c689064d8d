def g(x):
    return x


def run(cb):
    return cb(1)


run(lambda x: g(x))
