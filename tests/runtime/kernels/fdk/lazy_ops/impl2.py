"""What lazy_ops.FACTOR loads once the table points here."""

FACTOR = 4.0
