"""The dashboard's small chart: processed and failed jobs per second, drawn as inline SVG.

Rates come from the differences between samples of the monotonic counters, so
a sample missed (a paused page, another gunicorn worker answering) widens an
interval instead of distorting it.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from .state import Sample

WIDTH = 600
HEIGHT = 90
PADDING = 4


@dataclass(frozen=True)
class Chart:
    processed_points: str  # SVG polyline points, numbers only
    failed_points: str
    peak: float  # jobs/s at the top of the chart
    last_processed: float
    last_failed: float
    span: float  # seconds covered
    width: int = WIDTH
    height: int = HEIGHT


def rates(samples: list[Sample]) -> list[tuple[float, float, float]]:
    """(end time, processed/s, failed/s) per interval between samples."""
    out = []
    for a, b in itertools.pairwise(samples):
        dt = b.at - a.at
        if dt <= 0:
            continue
        # Counters only go down if someone flushed Redis: count that as zero.
        out.append((b.at, max(0, b.processed - a.processed) / dt, max(0, b.failed - a.failed) / dt))
    return out


def build(samples: list[Sample]) -> Chart | None:
    series = rates(samples)
    if not series:
        return None
    start, end = samples[0].at, samples[-1].at
    span = max(end - start, 1e-9)
    peak = max(max(p, f) for _, p, f in series) or 1.0

    def points(column: int) -> str:
        coords = []
        for row in series:
            x = PADDING + (row[0] - start) / span * (WIDTH - 2 * PADDING)
            y = HEIGHT - PADDING - row[column] / peak * (HEIGHT - 2 * PADDING)
            coords.append(f"{x:.1f},{y:.1f}")
        if len(coords) == 1:  # one interval: draw it as a flat segment
            coords.insert(0, f"{PADDING},{coords[0].split(',')[1]}")
        return " ".join(coords)

    return Chart(points(1), points(2), peak, series[-1][1], series[-1][2], end - start)
