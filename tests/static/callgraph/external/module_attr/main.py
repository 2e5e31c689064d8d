import os


def where(name):
    return os.path.join(os.getcwd(), name)


where("a")
