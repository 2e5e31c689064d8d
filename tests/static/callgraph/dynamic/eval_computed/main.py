def f():
    pass


def source():
    return "f" + "()"


eval(source())
