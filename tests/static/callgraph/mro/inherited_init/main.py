class Base:
    def __init__(self):
        self.ready = True


class Child(Base):
    def go(self):
        return self.ready


Child().go()
