"""A worker's wait and run times of one UTC day (lowkiq.store.day_stats), for the Stats tab, the API and the CLI."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..store import day_stats
from ..store.day_stats import BUCKETS, KEEP_DAYS, DayStats, Measure, bucket_labels
from .listing import BadInput

if TYPE_CHECKING:
    from . import Console, WorkerView

__all__ = ["BUCKETS", "KEEP_DAYS", "DayStats", "Measure", "bucket_labels", "read", "today"]


def today(c: Console) -> str:
    return day_stats.day_of(c.clock())


def read(c: Console, view: WorkerView, day: str | None = None) -> DayStats:
    """The worker's stats of ``day`` (``YYYY-MM-DD``, UTC; today when None). BadInput names a bad day."""
    try:
        return day_stats.read(c.client, view.name, today(c) if day is None else day)
    except ValueError as exc:
        raise BadInput(str(exc)) from None
