# Kernel-shaped: kernels register themselves under a name, then are looked up.
REGISTRY = {}


def register(name):
    def deco(fn):
        REGISTRY[name] = fn
        return fn

    return deco


@register("relu")
def relu(x):
    return max(x, 0)


REGISTRY["relu"](-1)
