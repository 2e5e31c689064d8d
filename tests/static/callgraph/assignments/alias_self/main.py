class A:
    def f(self):
        pass

    def g(self):
        a = self
        a.f()


A().g()
