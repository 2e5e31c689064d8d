class A:
    def m(self):
        pass


a = A()
a.m()
