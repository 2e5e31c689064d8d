def _private():
    pass


def work():
    _private()
