class Inner:
    def go(self):
        pass


class Outer:
    def __init__(self):
        self.inner = Inner()

    def run(self):
        self.inner.go()


Outer().run()
