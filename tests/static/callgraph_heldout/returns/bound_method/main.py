class K:
    def fast(self):
        pass

    def pick(self):
        return self.fast


K().pick()()
