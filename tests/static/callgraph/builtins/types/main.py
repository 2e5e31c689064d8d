def convert(x):
    if isinstance(x, int):
        return str(x)
    return int(x)


items = list((1, 2))
table = dict(a=1)
convert("3")
convert(3)
