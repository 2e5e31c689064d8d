# Kernel-shaped: a pipeline stores its stages in a list and runs each.
class Pipeline:
    def __init__(self):
        self.stages = [self.load, self.store]

    def load(self):
        pass

    def store(self):
        pass

    def run(self):
        for stage in self.stages:
            stage()


Pipeline().run()
