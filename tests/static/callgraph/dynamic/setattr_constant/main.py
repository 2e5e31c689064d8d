class Box:
    pass


def f():
    pass


box = Box()
setattr(box, "act", f)
box.act()
