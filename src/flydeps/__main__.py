"""``python -m flydeps``: the command line (see :mod:`flydeps.cli`)."""

import sys

from .cli import main

sys.exit(main())
