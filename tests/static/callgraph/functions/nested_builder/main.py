# Kernel-shaped: a factory defines the kernel it returns; the caller launches it.
def helper(x):
    return x + 1


def build(n):
    def kernel(x):
        return helper(x) * n

    return kernel


k = build(2)
k(1)
