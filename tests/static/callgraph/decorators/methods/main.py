def trace(fn):
    return fn


class Ops:
    @staticmethod
    def zero():
        return 0

    @classmethod
    def make(cls):
        return cls()

    @trace
    def one(self):
        return self.zero() + 1


Ops.make().one()
