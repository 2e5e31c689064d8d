def setup():
    return 1


def ready():
    return STATE


STATE = setup()
