"""Group limits kept in Redis (docs/fairness.md, "Group limits"): the calls on each group's own slot.

A permit stands for one id performing under one lease of its shard: its member is
``<queue>:<shard>:<grant>:<id>`` and its score the end of that lease, moved along with every
renewal. The take (``ack_and_take``, in the shard's slot) and the permit (in the group's slot)
are two scripts, never one: on a Redis Cluster they live on different nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .keys import GroupKeys, ShardKeys
from .lua import Call


@dataclass(frozen=True, slots=True)
class Limits:
    """A worker's group limits: ``concurrency`` ids performing at once (0: no limit), ``count`` starts per
    ``period_ms`` (count 0: no limit)."""

    concurrency: int
    count: int
    period_ms: int

    @classmethod
    def of(cls, worker: Any) -> Limits | None:
        concurrency = getattr(worker, "group_concurrency", None) or 0
        rate = getattr(worker, "group_rate_limit", None)
        if not concurrency and rate is None:
            return None
        count, period = rate if rate is not None else (0, 0.0)
        return cls(int(concurrency), int(count), int(round(float(period) * 1000)))


@dataclass(frozen=True, slots=True)
class Granted:
    """What ``permit_take`` answered: how many of the members (in order) may start, and, when not all,
    when a permit may free, in seconds from now (Redis time)."""

    count: int
    wait: float


def member(keys: ShardKeys, grant: str, job_id: str) -> str:
    return f"{keys.queue_name}:{keys.shard}:{grant}:{job_id}"


def take_call(group: GroupKeys, limits: Limits, ttl_ms: int, members: Sequence[str]) -> Call:
    return ("permit_take", group, (ttl_ms, limits.concurrency, limits.count, limits.period_ms, *members))


def granted(reply: Sequence[Any]) -> Granted:
    count = int(reply[0])
    free_at = reply[1]
    wait = max(0.0, (int(free_at) - int(reply[2])) / 1000) if free_at is not None else 0.0
    return Granted(count, wait)


def extend_call(group: GroupKeys, ttl_ms: int, members: Sequence[str]) -> Call:
    return ("permit_extend", group, (ttl_ms, *members))


def release_call(group: GroupKeys, members: Sequence[str]) -> Call:
    return ("permit_release", group, tuple(members))

