def f():
    pass


def table():
    return {"f": f}


table()["f"]()
