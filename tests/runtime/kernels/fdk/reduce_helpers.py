"""Helpers of the reduction, in their own module (the seed's kernels.pa_decode_fp8 shape)."""


def load(t, i):
    return t[i]


def combine(acc, x):
    return acc + x
