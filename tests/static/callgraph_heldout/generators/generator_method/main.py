class Loader:
    def load(self, i):
        return i

    def batches(self):
        for i in range(2):
            yield self.load(i)


for b in Loader().batches():
    pass
