def inner():
    yield 1


def outer():
    yield from inner()


total = sum(outer())
