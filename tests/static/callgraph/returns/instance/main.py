class A:
    def __init__(self):
        self.v = 1

    def m(self):
        return self.v


def make():
    return A()


make().m()
