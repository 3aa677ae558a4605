"""Busy jobs as operators see them: who performs each, for how long, and whether past its time limit.

A standalone console has no worker classes: a worker's ``time_limit`` comes from its registry entry
(``WorkerInfo``). How long a busy job has run is Redis's time now minus the ``taken_ms`` the take
step wrote in its shard's lease (the batch in processing is the one taken then), both Redis time, so
a console host with a skewed clock flags nothing wrongly.

A thread-isolated perform cannot be stopped from outside: past its limit it keeps its shard, and
these flags are how an operator learns of it. A process-isolated one is killed at ``time_limit +
time_limit_grace``; until then it is flagged too, and an operator may stop it (``stop``): its server
kills its child within a second and the batch fails with ``PerformStopped``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..errors import LowkiqError
from ..jobs import Job
from ..store import audit, codec, membership, ownership, stops
from ..store.ownership import ShardLease

if TYPE_CHECKING:
    from ..store.metrics import QueueMetrics
    from . import Console, WorkerView


# The audit log's name for a stopped perform.
STOP_ACTION = "busy/stop"
THREAD_PERFORMS = ("thread performs cannot be stopped safely: Python cannot end a thread from outside, and "
                   "letting another perform of the id start would run it twice at once; only a worker with "
                   "isolation = \"process\" can be stopped")


class StopRefused(LowkiqError):
    """A stop that cannot be asked. ``reason``: "thread" (a thread-isolated worker) or "no_server" (in
    processing, but no live server holds its shard), both ``status`` 409; "not_busy", 404."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.status = 404 if reason == "not_busy" else 409


def stoppable(view: WorkerView) -> bool:
    return view.info.isolation == "process"


def stop(c: Console, view: WorkerView, job_id: str, *, who: str, source: str) -> None:
    """Ask the server performing ``job_id`` to stop its perform (process isolation), audited: its child is
    killed within about a second and the batch fails with ``PerformStopped`` (retry rules apply).
    StopRefused when it cannot be asked; then nothing is written or recorded."""
    if not stoppable(view):
        raise StopRefused("thread", f"{view.name}'s {THREAD_PERFORMS}")
    keys = view.keys.shard(codec.shard_of(job_id, view.keys.shards_count))
    answer = stops.request(c.client, keys, job_id, f"{who} ({source})")
    if answer == stops.NOT_BUSY:
        raise StopRefused("not_busy", f"no busy job {job_id!r} in {view.name}: nothing to stop")
    if answer == stops.NO_SERVER:
        raise StopRefused("no_server", f"job {job_id!r} of {view.name} is in processing, but no live server holds its "
                               "shard: its batch goes back to the queue when another server takes the shard over")
    audit.record(c.client, who=who, source=source, action=STOP_ACTION, worker=view.name, count=1, ids=[job_id])


@dataclass(frozen=True)
class BusyJob:
    """A job in processing. ``running_for``: seconds since its batch was taken, None when its shard's
    lease does not say (released, or written by an older lowkiq); ``over_time_limit``: running for
    longer than its worker's ``time_limit``. ``in_run``: taken ahead with the id its shard performs now
    (docs/take-ahead.md), so not performing itself: waiting for its turn, or performed and waiting for the
    run's acknowledgement; its ``running_for`` is None then."""

    job: Job
    lease: ShardLease | None
    running_for: float | None
    over_time_limit: bool
    in_run: bool = False


def running_for(lease: ShardLease | None, now_ms: int) -> float | None:
    if lease is None or lease.taken_ms is None:
        return None
    return max(0.0, (now_ms - lease.taken_ms) / 1000)


def over(limit: float | None, running: float | None) -> bool:
    return limit is not None and running is not None and running > limit


def busy_jobs(c: Console, view: WorkerView, jobs: Sequence[Job]) -> tuple[list[ShardLease], list[BusyJob]]:
    """The worker's shard leases, and each of ``jobs`` with its shard's lease: one round trip."""
    now_ms, leases = ownership.shard_leases(c.client, view.keys, membership.live(c.client))
    limit = view.info.time_limit
    # A lease names the id its take-ahead run performs only while that id is busy (a renewal may land
    # after the run's end): else every busy id of its shard counts from the take, as a batch's do.
    busy_ids = {job.id for job in jobs}
    out = []
    for job in jobs:
        lease = leases[codec.shard_of(job.id, view.keys.shards_count)]
        if lease is not None and lease.performing in busy_ids and lease.performing != job.id:
            out.append(BusyJob(job, lease, None, False, in_run=True))
            continue
        running = running_for(lease, now_ms)
        out.append(BusyJob(job, lease, running, over(limit, running)))
    return leases, out


def over_time_limit(c: Console, rows: Sequence[tuple[WorkerView, QueueMetrics]]) -> dict[str, int]:
    """Worker name -> performs running past its ``time_limit`` now, for the measured workers that have a
    limit (the others are absent). A perform is a shard's batch: a batch of ten ids over its limit
    counts one.

    Only the shards the read of ``rows`` found busy are asked for their lease's ``taken_ms``: at most
    one HGET per busy shard, all in one round trip, and none when no worker with a limit is busy.
    """
    limited = [(view, m) for view, m in rows if m.measured and view.info.time_limit is not None]
    counts = {view.name: 0 for view, _ in limited}
    asked = [(view, index) for view, m in limited for index, shard in enumerate(m.shards) if shard.busy]
    if not asked:
        return counts
    pipe = c.client.pipeline(transaction=False)
    pipe.time()
    for view, index in asked:
        pipe.hget(view.keys.shard(index).lease_hash, "taken_ms")
    (seconds, micros), *taken = pipe.execute()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    for (view, _), taken_ms in zip(asked, taken):
        if taken_ms is not None and over(view.info.time_limit, max(0.0, (now_ms - int(taken_ms)) / 1000)):
            counts[view.name] += 1
    return counts
