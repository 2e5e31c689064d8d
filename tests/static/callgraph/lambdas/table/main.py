# Kernel-shaped: activations as a table of lambdas.
ACTS = {
    "relu": lambda v: max(v, 0),
    "id": lambda v: v,
}

ACTS["relu"](-1)
