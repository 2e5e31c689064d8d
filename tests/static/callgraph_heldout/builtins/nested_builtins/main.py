def uniq(xs):
    if hasattr(xs, "sort"):
        return sorted(set(xs))
    return xs


uniq([2, 1, 2])
