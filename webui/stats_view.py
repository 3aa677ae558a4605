"""The worker page's Stats tab and its API: wait and run times of one UTC day (``lowkiq.console.day_stats``).

The histograms are inline SVG (the console's CSP allows no inline style): one bar per fixed bucket, its
length the bucket's share of the day's busiest bucket, its count beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

from flask import Response, request

from ..console import day_stats
from ..console.day_stats import Measure
from .blueprint import bp
from .http import page, reply
from .state import console

# The SVG's drawing: a row per bucket, the label column, the bars' room.
ROW = 20
LABEL_WIDTH = 90
BAR_WIDTH = 420


@dataclass(frozen=True)
class Bar:
    label: str
    count: int
    width: float  # in the SVG's units, 0 for an empty bucket
    y: int
    share: float  # of the day's count, in percent


def bars(measure: Measure) -> list[Bar]:
    most = max(measure.buckets) or 1
    total = measure.count or 1
    return [Bar(label, n, BAR_WIDTH * n / most, i * ROW, 100 * n / total)
            for i, (label, n) in enumerate(zip(day_stats.bucket_labels(), measure.buckets, strict=True))]


def seconds_text(seconds: float) -> str:
    """A time for people, fine below a second: 0.4 ms, 52 ms, 1.3 s, 4 min."""
    if seconds < 0.001:
        return f"{seconds * 1000:.2f} ms"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms" if seconds >= 0.01 else f"{seconds * 1000:.1f} ms"
    if seconds < 60:
        return f"{seconds:.1f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


@bp.get("/workers/<worker>/stats")
def stats(worker: str) -> Response:
    c = console()
    view = c.worker(worker)
    day = request.args.get("day") or None
    measured = day_stats.read(c, view, day)
    return page("lowkiq/stats.html", view=view, tab="stats", stats=measured, today=day_stats.today(c),
                kinds=[("wait", "Wait", "from when a job was due to when its perform started", measured.wait),
                       ("run", "Run", "from its perform's start to its end (a batch's jobs each count the batch's "
                        "time)", measured.run)],
                bars=bars, seconds_text=seconds_text, row=ROW, label_width=LABEL_WIDTH, bar_width=BAR_WIDTH)


@bp.get("/api/v1/workers/<worker>/stats")
def api_stats_day(worker: str) -> Response:
    c = console()
    view = c.worker(worker)
    return reply(day_stats.read(c, view, request.args.get("day") or None).as_json())
