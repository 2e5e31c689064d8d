class A:
    def m(self):
        pass


class B(A):
    def m(self):
        pass


B().m()
