def inner():
    raise RuntimeError("x")


def middle():
    inner()


def outer():
    try:
        middle()
    except RuntimeError as exc:
        raise TypeError("y") from exc


try:
    outer()
except TypeError:
    pass
