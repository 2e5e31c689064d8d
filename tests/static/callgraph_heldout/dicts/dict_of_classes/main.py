class A:
    def __init__(self):
        self.x = 1

    def m(self):
        return self.x


REG = {"a": A}
REG["a"]().m()
