class LogMixin:
    def log(self):
        pass


class Base:
    def run(self):
        self.log()


class K(LogMixin, Base):
    pass


K().run()
