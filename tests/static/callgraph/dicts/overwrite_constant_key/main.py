# A dispatch table whose entry is replaced before anything calls it (kernel-code shape:
# an activation table patched with a faster variant), and one replaced after a call.
def relu():
    pass


def fast_relu():
    pass


def gelu():
    pass


def tanh():
    pass


ACT = {"relu": relu, "gelu": gelu}
ACT["relu"] = fast_relu


def apply():
    ACT["relu"]()


def build():
    table = {"act": gelu}
    table["act"]()
    table["act"] = tanh
    table["act"]()


apply()
build()
