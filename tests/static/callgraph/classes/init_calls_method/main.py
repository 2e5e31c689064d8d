class A:
    def __init__(self):
        self.setup()

    def setup(self):
        pass


A()
