# Kernel-shaped: a builder calls the helper it defines.
def outer():
    def inner():
        pass

    inner()


outer()
