"""The fairness attributes of a worker (docs/fairness.md), checked when its class is defined.

``priority``: threads take from the ready shards of the highest-priority workers first.
``debounce`` / ``debounce_max``: a burst of jobs for one id runs once, soon after it ends.
``group_concurrency`` / ``group_rate_limit``: limits per group of jobs (a tenant, an account).
"""

from __future__ import annotations

import math
from typing import Any


def _seconds(owner: str, attr: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{owner}.{attr} must be a number of seconds or None, got {type(value).__name__} {value!r}")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"{owner}.{attr} must be a positive, finite number of seconds, got {value!r}")
    return float(value)


def check(cls: type[Any]) -> None:
    """Raise TypeError or ValueError naming the first bad fairness attribute of worker class ``cls``."""
    owner = cls.__name__
    priority = cls.priority
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise TypeError(f"{owner}.priority must be an int, got {type(priority).__name__} {priority!r}")
    debounce, debounce_max = cls.debounce, cls.debounce_max
    if debounce is not None:
        debounce = _seconds(owner, "debounce", debounce)
    if debounce_max is not None:
        if debounce is None:
            raise ValueError(f"{owner}.debounce_max is set but debounce is not: set debounce too, or neither")
        if _seconds(owner, "debounce_max", debounce_max) < debounce:
            raise ValueError(f"{owner}.debounce_max ({debounce_max!r}) must be at least debounce ({debounce!r})")
    concurrency = cls.group_concurrency
    if concurrency is not None:
        if isinstance(concurrency, bool) or not isinstance(concurrency, int):
            raise TypeError(f"{owner}.group_concurrency must be a positive int or None, "
                            f"got {type(concurrency).__name__} {concurrency!r}")
        if concurrency < 1:
            raise ValueError(f"{owner}.group_concurrency must be a positive int or None, got {concurrency!r}")
    rate = cls.group_rate_limit
    if rate is not None:
        if not isinstance(rate, tuple) or len(rate) != 2:
            raise TypeError(f"{owner}.group_rate_limit must be a tuple (count, period_seconds) or None, got {rate!r}")
        count, period = rate
        if isinstance(count, bool) or not isinstance(count, int):
            raise TypeError(f"{owner}.group_rate_limit's count must be a positive int, "
                            f"got {type(count).__name__} {count!r}")
        if count < 1:
            raise ValueError(f"{owner}.group_rate_limit's count must be a positive int, got {count!r}")
        # Redis keeps the window in whole ms: a period below one ms would be no window at all.
        if _seconds(owner, "group_rate_limit's period", period) < 0.001:
            raise ValueError(f"{owner}.group_rate_limit's period must be at least 0.001 s, got {period!r}")
