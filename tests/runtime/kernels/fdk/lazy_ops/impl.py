"""What lazy_ops.FACTOR loads."""

FACTOR = 2.0
