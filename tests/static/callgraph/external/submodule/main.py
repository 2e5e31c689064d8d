from os import path


def exists(p):
    return path.exists(p)


exists(".")
