def f():
    pass


d = {}
d["x"] = f
d["x"]()
