def s():
    pass
