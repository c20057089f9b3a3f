"""``python -m coded_shuffle``: the same as the ``coded-shuffle`` command."""

import sys

from .cli import main

sys.exit(main())
