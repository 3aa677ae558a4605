"""``python -m lowkiq.cli``: the ``lowkiq`` command (how --processes starts its children)."""

import sys

from . import main

sys.exit(main())
