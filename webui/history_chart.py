"""History charts: jobs processed and failed per minute, and the lag, over the last hours, from Redis.

Any console process draws the same charts: the points come from the per-minute
streams (``lowkiq.store.history``), not from what this process happened to see.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis
from flask import request

from ..console.listing import BadInput
from ..store import history
from ..store.history import Minute
from .state import settings, state

log = logging.getLogger("lowkiq.webui")

WIDTH = 600
HEIGHT = 70
PADDING = 4
# The windows offered, in hours; the first is the default.
WINDOWS = (1, 6, 24, 48)


@dataclass(frozen=True)
class HistoryChart:
    hours: int
    minutes: list[Minute]
    processed_points: str
    failed_points: str
    lag_points: str
    peak: float  # jobs per minute at the top of the counts chart
    peak_lag: float  # seconds at the top of the lag chart
    processed: float  # jobs in the window
    failed: float
    width: int = WIDTH
    height: int = HEIGHT


def record(c: Any, measured: Sequence[Any], now: float) -> None:
    """This minute's totals, read by the dashboard anyway, unless some process recorded them already.

    Once a minute per console process; never in read-only mode (its Redis user may not write), and
    not again after Redis refused the write (an ACL without write access): the charts then show what
    the servers record.
    """
    st = state()
    minute = int(now // 60)
    if not st.history_allowed or minute == st.history_minute or settings().readonly:
        return
    st.history_minute = minute
    try:
        # Only what was read: a worker past the read's shard budget has zeros, not its numbers.
        history.write(c.client, [m for m in measured if getattr(m, "measured", True)])
    except redis.ResponseError as exc:
        st.history_allowed = False
        log.warning("the console cannot record the queues' history (%s); the servers record it", exc)


def window() -> int:
    """The hours asked for with ``?hours=``; BadInput for another value."""
    text = request.args.get("hours", str(WINDOWS[0]))
    if text not in {str(h) for h in WINDOWS}:
        raise BadInput(f"hours must be one of {', '.join(map(str, WINDOWS))}, got {text[:20]!r}")
    return int(text)


def read(client: Any, queues: Sequence[str], hours: int, now: float) -> dict[str, list[Minute]]:
    """Each queue's per-minute rates over the window (one round trip; sampled beyond an hour)."""
    points = history.read(client, queues, hours * 60, now)
    return {queue: history.per_minute(p) for queue, p in points.items()}


def build(minutes: list[Minute], hours: int, now: float) -> HistoryChart | None:
    start = now - hours * 3600
    shown = [m for m in minutes if m.minute >= start]
    if not shown:
        return None
    peak = max(max(m.processed, m.failed) for m in shown) or 1.0
    peak_lag = max(m.lag for m in shown) or 1.0

    def x(at: float) -> float:
        return min(max(PADDING + (at - start) / (now - start) * (WIDTH - 2 * PADDING), PADDING), WIDTH - PADDING)

    def points(value: Callable[[Minute], float], top: float) -> str:
        coords: list[str] = []
        for m in shown:
            y = HEIGHT - PADDING - value(m) / top * (HEIGHT - 2 * PADDING)
            if not coords:  # the first rate holds over its whole span: a flat segment, not the whole window
                coords.append(f"{x(m.minute - m.span * 60):.1f},{y:.1f}")
            coords.append(f"{x(m.minute):.1f},{y:.1f}")
        return " ".join(coords)

    return HistoryChart(
        hours=hours,
        minutes=shown,
        processed_points=points(lambda m: m.processed, peak),
        failed_points=points(lambda m: m.failed, peak),
        lag_points=points(lambda m: m.lag, peak_lag),
        peak=peak,
        peak_lag=peak_lag,
        processed=sum(m.processed * m.span for m in shown),  # rates per minute over their spans: jobs
        failed=sum(m.failed * m.span for m in shown),
    )
