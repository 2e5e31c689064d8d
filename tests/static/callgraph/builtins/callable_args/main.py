# Callables handed to builtins: the library calls them for the scope that called it.
import functools


def double(x):
    return x * 2


def is_even(x):
    return x % 2 == 0


def by_size(x):
    return -x


def add(a, b):
    return a + b


def pipeline(xs):
    kept = list(filter(is_even, xs))
    return sorted(map(double, kept), key=by_size)


print(pipeline([1, 2, 3, 4]), functools.reduce(add, [1, 2, 3]), max([3, 1], key=by_size))
