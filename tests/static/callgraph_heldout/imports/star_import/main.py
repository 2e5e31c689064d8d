from helpers import *  # noqa: F403

work()  # noqa: F405
