"""Stalls the dashboard warns of: a worker with due jobs that completed no perform for a minute, and the busy
performs that may be why (a perform that runs long holds its shard, and a process whose threads are all in
such performs serves nothing else).

Completed performs are counted by the queues' per-minute totals (processed + failed, which the servers
sample every minute): a worker whose jobs have been due for over ``STALL_AFTER`` seconds and whose count is
the same as in a sample at least that old has completed none since. The suspects are the shards of every
worker whose batch was taken more than ``STALL_AFTER`` seconds ago, read from their leases: one round trip
for the samples, and one for the leases of the busy shards, only when some worker stalls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..store import membership, minute_totals, ownership

if TYPE_CHECKING:
    from ..store.membership import Member
    from ..store.metrics import QueueMetrics
    from . import Console, WorkerView

# Seconds of due work with no perform completed before a worker counts as stalled.
STALL_AFTER = 60.0


@dataclass(frozen=True)
class LongPerform:
    """A shard whose batch has been performed for a long time: its worker, shard, server and thread."""

    worker: str
    shard: int
    server: str | None
    thread: str | None
    running_for: float


@dataclass(frozen=True)
class Stall:
    view: WorkerView
    lag: float  # how long its oldest due job has waited
    quiet_for: float  # at least this long without a completed perform


def stalls(c: Console, rows: Sequence[tuple[WorkerView, QueueMetrics]], now: float) -> list[Stall]:
    """The measured workers whose due jobs wait while they completed no perform for STALL_AFTER seconds."""
    waiting = [(view, m) for view, m in rows if m.measured and m.lag > STALL_AFTER]
    if not waiting:
        return []
    samples = minute_totals.read(c.client, [view.info.queue_name for view, _ in waiting], 3, now)
    out = []
    for view, m in waiting:
        old = [p for p in samples.get(view.info.queue_name, []) if p.at <= now - STALL_AFTER]
        if old and old[-1].processed + old[-1].failed >= m.processed + m.failed:
            out.append(Stall(view, m.lag, now - old[-1].at))
    return out


def long_performs(c: Console, rows: Sequence[tuple[WorkerView, QueueMetrics]],
                  members: Sequence[Member] | None = None) -> list[LongPerform]:
    """Every busy shard whose batch was taken more than STALL_AFTER seconds ago, longest first."""
    live = list(members) if members is not None else membership.live(c.client)
    out = []
    for view, m in rows:
        if m.measured and any(shard.busy for shard in m.shards):
            out += performs_longer_than(c, view, m, live, STALL_AFTER)
    return sorted(out, key=lambda p: -p.running_for)


def performs_longer_than(c: Console, view: WorkerView, m: QueueMetrics, live: Sequence[Member],
                         seconds: float) -> list[LongPerform]:
    """The busy shards of one worker whose batch was taken more than ``seconds`` ago: one round trip."""
    now_ms, leases = ownership.shard_leases(c.client, view.keys, live)
    out = []
    for index, shard in enumerate(m.shards):
        lease = leases[index]
        if not shard.busy or lease.taken_ms is None:
            continue
        running = (now_ms - lease.taken_ms) / 1000
        if running > seconds:
            out.append(LongPerform(view.name, index, lease.server.name if lease.server else None, lease.thread,
                                   running))
    return out
