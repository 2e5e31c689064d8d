def target():
    pass


def func(a=target):
    a()


func()
