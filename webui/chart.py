"""Drawing time series as inline SVG: nice scales, axis ticks, and lines that break where data is missing.

Pure functions of their inputs. The lines live in a viewBox of WIDTH x HEIGHT that stretches to the
panel (strokes keep their width); axis labels are placed in percent of the plot, so text never
stretches with it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

WIDTH = 1000
HEIGHT = 100
# Spacing of time ticks, seconds: the first that leaves at most MAX_TICKS ticks is used.
TIME_STEPS = (15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400)
MAX_TICKS = 6


@dataclass(frozen=True)
class Tick:
    percent: float  # from the left (time) or from the bottom (values) of the plot
    label: str
    at: float | None = None  # unix time, for the time ticks


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``value`` (1 for nothing)."""
    if not value > 0 or not math.isfinite(value):
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    for factor in (1, 2, 2.5, 5, 10):
        if factor * power >= value * (1 - 1e-9):
            return float(factor * power)
    return float(10 * power)


def time_ticks(start: float, end: float) -> list[Tick]:
    """Round times between ``start`` and ``end``, at most MAX_TICKS, labelled in the server's zone."""
    span = end - start
    if span <= 0:
        return []
    step = next((s for s in TIME_STEPS if span / s <= MAX_TICKS), TIME_STEPS[-1])
    first = math.ceil(start / step) * step
    ticks = []
    at = first
    while at <= end:
        moment = datetime.fromtimestamp(at).astimezone()
        label = moment.strftime("%H:%M:%S" if step < 60 else "%H:%M")
        if step >= 86400 or (step >= 3600 and moment.hour == 0 and moment.minute == 0):
            label = moment.strftime("%b %d")
        ticks.append(Tick(round((at - start) / span * 100, 3), label, at))
        at += step
    return ticks


def path(points: Sequence[tuple[float, float] | None]) -> str:
    """SVG path data through ``points`` (viewBox coordinates); a None breaks the line there."""
    parts: list[str] = []
    pen_down = False
    for point in points:
        if point is None:
            pen_down = False
            continue
        x, y = point
        parts.append(f"{'L' if pen_down else 'M'}{x:.1f},{y:.1f}")
        pen_down = True
    return " ".join(parts)


def scale_x(start: float, end: float) -> float:
    """Viewbox units per second over ``start``..``end``."""
    return WIDTH / max(end - start, 1e-9)


def y_of(value: float, top: float) -> float:
    """The viewBox y of ``value`` on a scale from 0 (bottom) to ``top``."""
    return HEIGHT - min(max(value / top, 0.0), 1.0) * HEIGHT
