# Kernel-shaped: the base class drives the build, subclasses supply the reduction.
class NormBase:
    def build(self):
        return self.reduce()

    def reduce(self):
        raise NotImplementedError


class RMSNorm(NormBase):
    def reduce(self):
        return 0


RMSNorm().build()
