class Builder:
    def __init__(self):
        self.parts = []

    def add(self, p):
        self.parts += [p]
        return self

    def build(self):
        return len(self.parts)


Builder().add(1).add(2).build()
