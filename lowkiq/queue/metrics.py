"""Numbers for the dashboard and the stats API: one pipelined round trip per call."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

import redis

from . import lua
from .keys import QueueKeys


@dataclass(frozen=True, slots=True)
class ShardMetrics:
    length: int
    retries: int
    morgue_length: int
    busy: int
    processed: int
    failed: int
    oldest_perform_in: float | None

    def lag(self, now: float) -> float:
        """Seconds the oldest job is overdue; 0 when none is."""
        if self.oldest_perform_in is None:
            return 0.0
        return max(0.0, now - self.oldest_perform_in)


@dataclass(frozen=True, slots=True)
class QueueMetrics:
    queue_name: str
    length: int  # fresh + retries
    fresh: int
    retries: int
    morgue_length: int
    busy: int
    processed: int
    failed: int
    lag: float
    shards: tuple[ShardMetrics, ...]


def shard_metrics(client: redis.Redis, queues: Sequence[QueueKeys]) -> list[list[ShardMetrics]]:
    """Every shard of every queue, in one round trip."""
    calls = [("shard_stats", shard, ()) for keys in queues for shard in keys.shards()]
    replies = iter(lua.run_many(client, calls))
    result = []
    for keys in queues:
        shards = []
        for _ in range(keys.shards_count):
            length, retries, morgue, busy, processed, failed, head = next(replies)
            shards.append(ShardMetrics(length, retries, morgue, busy, processed, failed, float(head) if head is not None else None))
        result.append(shards)
    return result


def queue_metrics(client: redis.Redis, queues: Sequence[QueueKeys], now: float | None = None) -> list[QueueMetrics]:
    now = time.time() if now is None else now
    out = []
    for keys, shards in zip(queues, shard_metrics(client, queues)):
        length = sum(s.length for s in shards)
        retries = sum(s.retries for s in shards)
        out.append(
            QueueMetrics(
                queue_name=keys.queue_name,
                length=length,
                fresh=length - retries,
                retries=retries,
                morgue_length=sum(s.morgue_length for s in shards),
                busy=sum(s.busy for s in shards),
                processed=sum(s.processed for s in shards),
                failed=sum(s.failed for s in shards),
                lag=max((s.lag(now) for s in shards), default=0.0),
                shards=tuple(shards),
            )
        )
    return out
