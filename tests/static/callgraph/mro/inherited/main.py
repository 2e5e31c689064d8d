class A:
    def m(self):
        pass


class B(A):
    pass


B().m()
