def risky():
    raise KeyError("k")


def handle():
    pass


def cleanup():
    pass


def main():
    try:
        risky()
    except KeyError:
        handle()
    finally:
        cleanup()


main()
