# Written as a held-out case (issue 37) and moved here once the analyser was changed for it
# (a constant-key read of the table is a plain lookup): a builder fills a local table of kernel
# stages, then replaces two entries (one by a lambda, one by another entry's value) before launching.
def load_fp32(buf):
    return [v * 1.0 for v in buf]


def load_vectorized(buf):
    return list(buf)


def store(buf):
    return sum(buf)


def build_kernel(buf):
    stages = {"load": load_fp32, "vload": load_vectorized, "epilogue": lambda v: v + 1.0, "store": store}
    stages["epilogue"] = lambda v: v * 0.5
    stages["load"] = stages["vload"]
    loaded = stages["load"](buf)
    out = [stages["epilogue"](v) for v in loaded]
    return stages["store"](out)


print(build_kernel([1.0, 2.0, 3.0]))
