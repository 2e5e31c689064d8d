class Obj:
    pass


def fallback():
    pass


getattr(Obj(), "missing", fallback)()
