def f():
    pass


def call(**kw):
    kw["fn"]()


call(fn=f)
