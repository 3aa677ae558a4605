"""Imported by Python at start-up when this folder is on PYTHONPATH: a host whose clock is off.

APP_CLOCK_SKEW seconds are added to ``time.time`` before anything else runs (lowkiq included), and
the true clock stays reachable as ``time.true_time`` for the test app's records.
"""

import os
import time

_skew = float(os.environ.get("APP_CLOCK_SKEW", "0"))
_true_time = time.time
time.true_time = _true_time  # type: ignore[attr-defined]
if _skew:
    def _skewed() -> float:
        return _true_time() + _skew

    time.time = _skewed
