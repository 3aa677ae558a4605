"""History charts: jobs processed and failed per minute, and the lag, over the last hours, from Redis.

Any console process draws the same charts: the points come from the per-minute
streams (``lowkiq.console.minute_totals``), not from what this process happened to see.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis
from flask import request

from ..console import Console, minute_totals
from ..console.listing import BadInput
from ..console.terms import Minute
from . import chart, formatting
from .state import settings, state

log = logging.getLogger("lowkiq.webui")

# The windows offered, in hours; the first is the default.
WINDOWS = (1, 6, 24, 48)
# A rate over more than this many sampling steps means nobody recorded the minutes in between: the lines break
# there instead of drawing a ramp across, and the span is marked as without data.
GAP_STEPS = 2
# The x axis spans at least this long, however little history there is.
MIN_SPAN = 120.0


@dataclass(frozen=True)
class Gap:
    """A span without samples, in percent of the plot's width, and its unix times."""

    left: float
    width: float
    start: float
    end: float


@dataclass(frozen=True)
class HistoryChart:
    hours: int
    minutes: list[Minute]
    start: float  # the x axis, unix times: the window, or the part of it that history covers
    end: float
    narrowed: bool  # the history covers less than the window asked for
    processed_path: str  # SVG path data in chart.WIDTH x chart.HEIGHT, broken at gaps
    failed_path: str
    lag_path: str
    gaps: list[Gap]
    time_ticks: list[chart.Tick]
    count_ticks: list[chart.Tick]
    lag_ticks: list[chart.Tick]
    # For the hover read-out: [from, to, processed per minute, failed per minute, lag, 1 when a gap else 0]
    points: list[list[float]]
    peak: float  # jobs per minute, at most
    peak_lag: float
    processed: float  # jobs in the window
    failed: float
    width: int = chart.WIDTH
    height: int = chart.HEIGHT


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
        minute_totals.record(c, [m for m in measured if getattr(m, "measured", True)])
    except redis.ResponseError as exc:
        st.history_allowed = False
        log.warning("the console cannot record the queues' history (%s); the servers record it", exc)


def window() -> int:
    """The hours asked for with ``?hours=``; BadInput for another value."""
    text = request.args.get("hours", str(WINDOWS[0]))
    if text not in {str(h) for h in WINDOWS}:
        raise BadInput(f"hours must be one of {', '.join(map(str, WINDOWS))}, got {text[:20]!r}")
    return int(text)


def read(c: Console, queues: Sequence[str], hours: int, now: float) -> dict[str, list[Minute]]:
    """Each queue's per-minute rates over the window (one round trip; sampled beyond an hour)."""
    return minute_totals.read(c, queues, hours, now)


def sampling_step(hours: int) -> int:
    """Minutes between the samples ``read`` returns for a window (lowkiq.store.minute_totals.read's spacing)."""
    minutes = hours * 60
    return 1 if minutes + 1 <= minute_totals.MAX_POINTS else -(-minutes // minute_totals.MAX_POINTS)


def build(minutes: list[Minute], hours: int, now: float) -> HistoryChart | None:
    window_start = now - hours * 3600
    shown = [m for m in minutes if m.minute >= window_start]
    if not shown:
        return None
    threshold = GAP_STEPS * sampling_step(hours)
    # The x axis spans the history present: 48 hours asked for with ten minutes recorded draw those ten minutes.
    start = max(window_start, shown[0].minute - shown[0].span * 60)
    end = now
    start = min(start, end - MIN_SPAN)
    per_second = chart.WIDTH / (end - start)
    drawn = [m for m in shown if m.span <= threshold]
    peak = max((max(m.processed, m.failed) for m in drawn or shown), default=0.0)
    peak_lag = max((m.lag for m in drawn or shown), default=0.0)
    count_top, lag_top = chart.nice_ceiling(peak), chart.nice_ceiling(peak_lag)

    def x(at: float) -> float:
        return min(max((at - start) * per_second, 0.0), float(chart.WIDTH))

    lines: dict[str, list[tuple[float, float] | None]] = {"processed": [], "failed": [], "lag": []}
    tops = {"processed": count_top, "failed": count_top, "lag": lag_top}
    gaps: list[tuple[float, float]] = []
    points: list[list[float]] = []
    for m in shown:
        begin = max(m.minute - m.span * 60, start)
        values = {"processed": m.processed, "failed": m.failed, "lag": m.lag}
        gap = m.span > threshold
        points.append([round(begin, 3), m.minute, round(m.processed, 2), round(m.failed, 2), round(m.lag, 3),
                       1 if gap else 0])
        if gap:
            gaps.append((begin, m.minute))
            for line in lines.values():
                line.append(None)
            continue
        for name, line in lines.items():
            y = chart.y_of(values[name], tops[name])
            if not line or line[-1] is None:  # a line starts: its first rate holds over its whole span
                line.append((x(begin), y))
            line.append((x(m.minute), y))
    if end - shown[-1].minute > (threshold + 1) * 60:  # nothing recorded lately: say so up to now
        gaps.append((shown[-1].minute, end))

    def percent(at: float) -> float:
        return round((at - start) / (end - start) * 100, 3)

    return HistoryChart(
        hours=hours,
        minutes=shown,
        start=start,
        end=end,
        narrowed=start > window_start + 60,
        processed_path=chart.path(lines["processed"]),
        failed_path=chart.path(lines["failed"]),
        lag_path=chart.path(lines["lag"]),
        gaps=[Gap(percent(a), round(percent(b) - percent(a), 3), a, b) for a, b in gaps],
        time_ticks=chart.time_ticks(start, end),
        count_ticks=[chart.Tick(p, _count(count_top * p / 100)) for p in (0, 50, 100)],
        lag_ticks=[chart.Tick(p, formatting.duration(lag_top * p / 100)) for p in (0, 50, 100)],
        points=points,
        peak=peak,
        peak_lag=peak_lag,
        processed=sum(m.processed * m.span for m in shown),  # rates per minute over their spans: jobs
        failed=sum(m.failed * m.span for m in shown),
    )


def _count(value: float) -> str:
    return f"{value:,.0f}" if value == int(value) else f"{value:,.1f}"
