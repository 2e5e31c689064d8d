# Kernel-shaped: one object builds and drives another.
class B:
    def __init__(self, n):
        self.n = n

    def g(self):
        return self.n


class A:
    def run(self):
        b = B(2)
        return b.g()


A().run()
