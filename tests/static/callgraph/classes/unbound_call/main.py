class A:
    def m(self):
        return self.k()

    def k(self):
        pass


a = A()
A.m(a)
