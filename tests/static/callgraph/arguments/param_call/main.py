def func(a):
    a()


def target():
    pass


func(target)
