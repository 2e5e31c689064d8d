# Held-out (written after tuning): a module-level kernel registry; the "matmul" entry is
# called (directly and through a helper), then replaced by a tuned variant and called again.
def matmul_naive(a, b):
    return sum(x * y for x, y in zip(a, b))


def matmul_tiled(a, b):
    return sum([a[0] * b[0], a[1] * b[1]])


def softmax_ref(xs):
    return [x / sum(xs) for x in xs]


KERNELS = {}
KERNELS["matmul"] = matmul_naive
KERNELS["softmax"] = softmax_ref


def run_matmul(a, b):
    return KERNELS["matmul"](a, b)


a, b = [1.0, 2.0], [3.0, 4.0]
print(run_matmul(a, b))
print(KERNELS["matmul"](a, b))
KERNELS["matmul"] = matmul_tiled
print(run_matmul(a, b))
print(KERNELS["softmax"]([1.0, 3.0]))
