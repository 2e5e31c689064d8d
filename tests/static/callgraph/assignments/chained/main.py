def f():
    pass


a = f
b = a
b()
