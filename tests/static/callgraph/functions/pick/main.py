# Kernel-shaped: a selector returns the operation to run.
def relu():
    pass


def gelu():
    pass


def pick():
    return relu


op = pick()
op()
