def f():
    pass


x = lambda: f()
x()
