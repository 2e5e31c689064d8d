def helper():
    return 4


class Config:
    SIZE = helper()

    def size(self):
        return self.SIZE


Config().size()
