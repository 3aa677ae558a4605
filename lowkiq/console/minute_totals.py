"""Every queue's per-minute totals (processed, failed, lag) as the console charts them, from the streams the
servers and consoles sample into Redis once a minute (``lowkiq.store.minute_totals``)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from ..store import minute_totals as stored
from ..store.minute_totals import Minute

if TYPE_CHECKING:
    from ..store.metrics import QueueMetrics
    from . import Console

# Points a read returns per queue at most: a longer window is sampled.
MAX_POINTS = stored.MAX_POINTS


def record(c: Console, measured: Iterable[QueueMetrics]) -> None:
    """This minute's totals, unless some process recorded them already (redis.ResponseError where the
    console's Redis user may not write)."""
    stored.write(c.client, measured)


def read(c: Console, queues: Sequence[str], hours: int, now: float) -> dict[str, list[Minute]]:
    """Each queue's per-minute rates over the window (one round trip; sampled beyond an hour)."""
    points = stored.read(c.client, queues, hours * 60, now)
    return {queue: stored.per_minute(p) for queue, p in points.items()}


def combine(series: Iterable[Sequence[Minute]]) -> list[Minute]:
    """Several queues' minutes as one: counts summed, the largest lag."""
    return stored.combine(series)
