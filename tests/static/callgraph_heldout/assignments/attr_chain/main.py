def f():
    pass


class Cfg:
    pass


cfg = Cfg()
cfg.fn = f
g = cfg.fn
g()
