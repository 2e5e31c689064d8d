class Handler:
    def handle(self, err):
        self.log(err)

    def log(self, err):
        pass


def fail():
    raise IndexError(0)


h = Handler()
try:
    fail()
except IndexError as e:
    h.handle(e)
