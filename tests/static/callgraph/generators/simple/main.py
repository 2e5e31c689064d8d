def helper():
    return 1


def gen():
    yield helper()


for x in gen():
    pass
