import math as m
from math import sqrt


def norm(x, y):
    return sqrt(x * x + y * y)


m.floor(norm(3, 4))
