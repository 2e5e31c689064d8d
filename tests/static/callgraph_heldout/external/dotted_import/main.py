import os.path


def base(p):
    return os.path.basename(p)


base("a/b")
