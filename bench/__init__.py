"""lowkiq's benchmark suite: ``python -m bench.run`` (full) or ``python -m bench.run --smoke``.

``python -m bench.run`` puts the repository root first on ``sys.path``, where
``lowkiq/`` is the source tree without ``lowkiq.webui`` (setup.cfg maps it in
only at install time). The benchmarks measure the installed package, so the
root moves to the end of the path: ``bench`` itself stays importable.
"""

from __future__ import annotations

import os
import sys

_root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_front = [p for p in sys.path if os.path.abspath(p or ".") == _root]
if _front:
    sys.path[:] = [p for p in sys.path if p not in _front] + [_root]
    for _name in [m for m in sys.modules if m == "lowkiq" or m.startswith("lowkiq.")]:
        del sys.modules[_name]

ROOT = _root
