def square(x):
    return x * x


def squares(n):
    return [square(i) for i in range(n)]


total = sum(square(i) for i in squares(3))
