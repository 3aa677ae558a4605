"""``python -m lowkiq.demo``: the ``lowkiq-demo`` command."""

import sys

from . import main

sys.exit(main())
