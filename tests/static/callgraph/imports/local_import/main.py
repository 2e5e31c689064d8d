def f():
    import to_import

    return to_import.func()


f()
