class A:
    def m(self):
        pass


class B(A):
    def m(self):
        super().m()


class C(A):
    def m(self):
        super().m()


class D(B, C):
    def m(self):
        super().m()


D().m()
