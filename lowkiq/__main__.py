"""``python -m lowkiq``: the ``lowkiq`` command, where its console script is not on PATH."""

import sys

from .cli import main

sys.exit(main())
