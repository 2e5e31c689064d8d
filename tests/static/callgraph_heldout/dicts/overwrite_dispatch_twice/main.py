# Held-out (written after tuning): an activation table keyed by name, its "gelu" entry
# replaced twice at module level; a launcher method reads it later: only the last value runs.
def relu(x):
    return max(x, 0.0)


def gelu_exact(x):
    return 0.5 * x * (1.0 + x / (1.0 + x * x))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + x / (2.0 + x * x))


def gelu_fast(x):
    return 0.5 * x * (1.0 + x / (1.0 + abs(x)))


ACTIVATIONS = {"relu": relu, "gelu": gelu_exact}
ACTIVATIONS["gelu"] = gelu_tanh
ACTIVATIONS["gelu"] = gelu_fast


class Launcher:
    def forward(self, x):
        return ACTIVATIONS["gelu"](x) + ACTIVATIONS["relu"](x)


print(Launcher().forward(1.5))
