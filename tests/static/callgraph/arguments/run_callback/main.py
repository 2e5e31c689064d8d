# Kernel-shaped: a runner calls whatever activation it is handed.
def relu(x):
    return max(x, 0)


def run(cb, x):
    return cb(x)


def build():
    return run(relu, -1)


build()
