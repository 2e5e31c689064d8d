def helper():
    pass


def func():
    helper()
