"""The dashboard's "needs attention" band: what is wrong now, each item naming where to act on it.

Read from what the dashboard has already measured (one round trip for every shard, with each worker's
biggest groups), plus a few bounded reads, each only when its condition may hold:

- stalls: due work and no perform completed for a minute (stalls.py), with the long performs that may be why;
- performs over their worker's time limit: the leases of the busy shards of workers that have a limit;
- ids a ``whole_id`` morgue holds: their payloads wait until an operator requeues or deletes them;
- schedules whose next tick is overdue (a missed tick) or whose last run failed (retrying or dead);
- groups whose oldest due id waits far longer than the other groups' (a tenant hogging, or starved);
- morgues that grew over the last minutes (the history stream's samples);
- ids waiting (``after``) on a dependency that is dead: only while some morgue holds jobs, from a sample of the
  waiting ids (WAITING_SAMPLE per shard, WAITING_SHARDS shards at most), three round trips.

An empty band is a calm system: the page shows nothing then.

Example::

    band = attention.read(console, rows, members, now)
    if band:
        for stall in band.stalled: ...
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import UnknownWorker
from ..store import codec, dependencies, minute_totals
from ..store.group_metrics import OTHER
from .schedules import ScheduleConsole
from .stalls import STALL_AFTER, LongPerform, Stall, long_performs, performs_longer_than, stalls

if TYPE_CHECKING:
    from ..store.membership import Member
    from ..store.metrics import QueueMetrics
    from . import Console, WorkerView

Rows = Sequence[tuple["WorkerView", "QueueMetrics"]]

# Seconds past its due time a schedule's tick may be before it counts as missed: servers look every second.
TICK_GRACE = 60.0
# A group is named when its oldest due id has waited at least this long ...
GROUP_LAG_FLOOR = 60.0
# ... and this many times the median wait of the worker's other groups.
GROUP_LAG_RATIO = 5.0
# Minutes of history a growing morgue is measured over.
MORGUE_MINUTES = 10
# Waiting ids sampled per shard, and shards sampled at most, in the look for ids held by a dead dependency.
WAITING_SAMPLE = 50
WAITING_SHARDS = 32
# Workers with a time limit whose leases one refresh reads at most, the busiest first: a round trip each.
OVER_LIMIT_WORKERS = 20
# Schedule outcomes that say its last run failed.
FAILED_OUTCOMES = frozenset({"retrying", "in the morgue"})


@dataclass(frozen=True)
class OverLimit:
    """A busy shard whose batch has run past its worker's time limit."""

    perform: LongPerform
    limit: float


@dataclass(frozen=True)
class Held:
    """A ``whole_id`` worker's dead ids: each holds the payloads enqueued for it since."""

    worker: str
    ids: int


@dataclass(frozen=True)
class ScheduleTrouble:
    """A schedule whose tick is overdue (``missed_since``: when it was due) or whose last run failed."""

    name: str
    worker: str
    job_id: str
    missed_since: float | None
    outcome: str


@dataclass(frozen=True)
class SlowGroup:
    """A group whose oldest due id waits far longer than the median of the worker's other groups."""

    worker: str
    group: str
    lag: float
    others: float  # the median wait of the other groups
    length: int


@dataclass(frozen=True)
class GrowingMorgue:
    worker: str
    dead: int
    grew: int  # dead jobs more than ``minutes`` ago
    minutes: float


@dataclass(frozen=True)
class HeldByDead:
    """An id whose waiting version waits (``after``) on a dead id: requeuing or deleting that one releases it."""

    worker: str
    id: str
    dependency_worker: str
    dependency: str


@dataclass(frozen=True)
class Attention:
    stalled: list[Stall] = field(default_factory=list)
    long_performs: list[LongPerform] = field(default_factory=list)
    over_limit: list[OverLimit] = field(default_factory=list)
    held: list[Held] = field(default_factory=list)
    schedules: list[ScheduleTrouble] = field(default_factory=list)
    slow_groups: list[SlowGroup] = field(default_factory=list)
    growing_morgues: list[GrowingMorgue] = field(default_factory=list)
    held_by_dead: list[HeldByDead] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.stalled or self.over_limit or self.held or self.schedules or self.slow_groups
                    or self.growing_morgues or self.held_by_dead)

    def as_json(self) -> dict[str, list[dict[str, Any]]]:
        """The band for api/v1/dashboard: each kind's items (an empty list when calm)."""
        return {
            "stalled": [{"worker": s.view.name, "lag": s.lag, "quiet_for": s.quiet_for} for s in self.stalled],
            "long_performs": [asdict(p) for p in self.long_performs],
            "over_limit": [{**asdict(o.perform), "limit": o.limit} for o in self.over_limit],
            "held": [asdict(h) for h in self.held],
            "schedules": [asdict(t) for t in self.schedules],
            "slow_groups": [asdict(g) for g in self.slow_groups],
            "growing_morgues": [asdict(d) for d in self.growing_morgues],
            "held_by_dead": [asdict(d) for d in self.held_by_dead],
        }


def read(c: Console, rows: Rows, members: Sequence[Member], now: float,
         board: ScheduleConsole | None = None) -> Attention:
    """Everything the band shows, from the dashboard's ``rows`` (read with groups) and a few bounded reads."""
    measured = [(view, m) for view, m in rows if m.measured]
    stalled = stalls(c, measured, now)
    return Attention(
        stalled=stalled,
        long_performs=long_performs(c, measured, members) if stalled else [],
        over_limit=over_time_limit(c, measured, members),
        held=[Held(view.name, m.morgue_length) for view, m in measured
              if view.info.holds_dead_ids and m.morgue_length],
        schedules=schedule_troubles(board or c.schedule_board(), now),
        slow_groups=slow_groups(measured),
        growing_morgues=growing_morgues(c, measured, now),
        held_by_dead=held_by_dead(c, measured),
    )


def over_time_limit(c: Console, rows: Rows, members: Sequence[Member]) -> list[OverLimit]:
    """The busy shards of workers with a time limit whose batch was taken longer ago than that limit: one
    round trip per such worker with a busy shard, for OVER_LIMIT_WORKERS of them at most (the busiest)."""
    out = []
    limited = [(view, m, limit) for view, m in rows if (limit := view.info.time_limit) is not None and m.busy]
    for view, m, limit in sorted(limited, key=lambda row: -row[1].busy)[:OVER_LIMIT_WORKERS]:
        out += [OverLimit(perform, float(limit)) for perform in performs_longer_than(c, view, m, members, limit)]
    return sorted(out, key=lambda o: -o.perform.running_for)


def schedule_troubles(board: ScheduleConsole, now: float) -> list[ScheduleTrouble]:
    """Active schedules whose tick after the last one dealt with is over TICK_GRACE late at ``now``, and
    schedules whose last run is retrying or dead (paused ones too: their last run failed all the same)."""
    out = []
    rows = board.rows(now)
    for row in rows:
        state = row.state
        missed = None
        if not state.paused and state.mark is not None:
            due = row.info.rule.next_after(state.mark)
            if due < now - TICK_GRACE:
                missed = due
        if missed is not None or state.outcome in FAILED_OUTCOMES:
            out.append(ScheduleTrouble(row.info.name, row.info.worker, row.info.id, missed, state.outcome))
    return out


def slow_groups(rows: Rows) -> list[SlowGroup]:
    """Per worker with two groups or more, the groups waiting GROUP_LAG_RATIO times the others' median and at
    least GROUP_LAG_FLOOR seconds: when every group waits alike (a stuck thread) none is named."""
    out = []
    for view, m in rows:
        named = [g for g in m.groups if g.name != OTHER]
        if len(named) < 2:
            continue
        for g in named:
            others = statistics.median(o.lag for o in named if o is not g)
            if g.lag >= GROUP_LAG_FLOOR and g.lag >= GROUP_LAG_RATIO * others:
                out.append(SlowGroup(view.name, g.name, g.lag, others, g.length))
    return sorted(out, key=lambda s: -s.lag)


def growing_morgues(c: Console, rows: Rows, now: float) -> list[GrowingMorgue]:
    """Workers whose dead jobs outnumber their sample of about MORGUE_MINUTES ago (one round trip for the
    workers with dead jobs). A worker without such a sample yet is not judged."""
    dying = [(view, m) for view, m in rows if m.morgue_length]
    if not dying:
        return []
    samples = minute_totals.read(c.client, [view.info.queue_name for view, _ in dying], MORGUE_MINUTES, now)
    out = []
    for view, m in dying:
        old = [p for p in samples.get(view.info.queue_name, []) if p.at <= now - STALL_AFTER]
        if old and m.morgue_length > old[0].dead:
            out.append(GrowingMorgue(view.name, m.morgue_length, m.morgue_length - old[0].dead,
                                     (now - old[0].at) / 60))
    return out


def held_by_dead(c: Console, rows: Rows) -> list[HeldByDead]:
    """Sampled ids waiting on a dead dependency. Nothing is read while no morgue holds a job; else each worker's
    waiting counts (one round trip), a sample of the shards with waiting ids (one), where their dependencies
    are (one)."""
    if not any(m.morgue_length for _, m in rows):
        return []
    shards = [(view, keys) for view, _ in rows for keys in view.keys.shards()]
    counts = dependencies.waiting_counts(c.client, [keys for _, keys in shards])
    waiting = [(view, keys) for (view, keys), n in zip(shards, counts) if n][:WAITING_SHARDS]
    if not waiting:
        return []
    sampled: list[tuple[str, str, str, str]] = []  # worker, id, dependency's worker, dependency
    samples = dependencies.sample_waiting(c.client, [keys for _, keys in waiting], WAITING_SAMPLE)
    for (view, _), found in zip(waiting, samples):
        for job_id, on in found:
            sampled += [(view.name, job_id, worker, dependency) for worker, dependency in on]
    places, asked = [], []
    for item in sampled:
        try:
            known = c.worker(item[2]).keys
        except UnknownWorker:
            continue
        places.append((known.shard(codec.shard_of(item[3], known.shards_count)), item[3]))
        asked.append(item)
    states = dependencies.states(c.client, places)
    return [HeldByDead(*item) for item, state in zip(asked, states) if state == "dead"]
