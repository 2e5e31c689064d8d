class Job:
    def run(self):
        pass


def apply(obj):
    obj.run()


apply(Job())
