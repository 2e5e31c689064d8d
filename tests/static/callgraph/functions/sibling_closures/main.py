def outer():
    def a():
        pass

    def b():
        a()

    b()


outer()
