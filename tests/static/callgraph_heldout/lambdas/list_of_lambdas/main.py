def f():
    pass


fs = [
    lambda: f(),
    lambda: 0,
]
fs[0]()
