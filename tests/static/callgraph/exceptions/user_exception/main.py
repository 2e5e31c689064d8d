class TileError(Exception):
    def __init__(self, msg):
        self.msg = msg

    def report(self):
        return len(self.msg)


def check(n):
    if n > 4:
        raise TileError("too big")


try:
    check(8)
except TileError as e:
    e.report()
