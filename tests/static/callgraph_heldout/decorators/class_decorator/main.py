def register(cls):
    return cls


@register
class K:
    def m(self):
        pass


K().m()
