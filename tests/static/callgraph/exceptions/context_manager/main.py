class Guard:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, tb):
        self.log()
        return True

    def log(self):
        pass


def work():
    with Guard():
        raise ValueError("x")


work()
