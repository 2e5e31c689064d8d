def dec(fn):
    def wrapper():
        return fn()

    return wrapper


@dec
def g():
    pass


g()
