def helper():
    return 1


def make():
    def inc():
        return helper() + 1

    return inc


fs = {"inc": make()}
fs["inc"]()
