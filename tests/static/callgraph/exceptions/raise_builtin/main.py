def f():
    raise ValueError("bad")


try:
    f()
except ValueError:
    pass
