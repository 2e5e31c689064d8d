# Kernel-shaped: the activation is a keyword-only parameter with a default.
def relu(x):
    return max(x, 0)


def gelu(x):
    return x


def apply(x, *, act=relu):
    return act(x)


apply(1)
apply(1, act=gelu)
