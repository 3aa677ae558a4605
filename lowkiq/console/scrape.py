"""What one Prometheus scrape of the console reads: every worker's numbers and the live servers, as a
dashboard refresh reads them (within the console's shard budget), and the shards the servers hold."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..store import ownership
from ..store.membership import Member
from ..store.metrics import QueueMetrics
from .busy import over_time_limit

if TYPE_CHECKING:
    from . import Console, WorkerView


@dataclass(frozen=True)
class Reading:
    """One scrape's worth of what Redis holds."""

    rows: list[tuple[WorkerView, QueueMetrics]]
    members: list[Member]
    broken: int
    now: float
    seconds: float  # how long reading Redis took
    # worker name -> performs past its time_limit, for workers with one (console.busy.over_time_limit)
    over_time_limit: dict[str, int]


def read(c: Console) -> Reading:
    started = time.monotonic()
    now = c.clock()
    rows, members = c.metrics_and_members(now, groups=True)  # a second round trip only when a shard holds groups
    broken = len(c.broken())
    over = over_time_limit(c, rows)  # a second round trip only when a worker with a time_limit is busy
    return Reading(rows, members, broken, now, time.monotonic() - started, over)


def shards_served(reading: Reading, views: list[WorkerView]) -> dict[str, int]:
    """queue name -> shards whose lease a live server held at its last heartbeat, for ``views``' queues."""
    covered = ownership.coverage(reading.members, {v.info.queue_name: v.info.shards_count for v in views})
    return {queue: coverage.served for queue, coverage in covered.items()}
