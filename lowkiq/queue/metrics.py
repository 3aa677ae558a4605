"""Numbers for the dashboard and the stats API: one round trip per call.

Every shard of every queue is read with plain commands (ZCARD, HLEN, HMGET,
ZRANGE 0 0), a few µs each in Redis; a Lua script per shard costs several
times more at 50 workers x 24 shards. Since the keys never change for a set
of queues, the whole pipeline is packed into bytes once and cached. The
reads of one shard are not atomic together; for numbers on a dashboard a job
moving between two reads of the same millisecond does not matter.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import redis

from .keys import QueueKeys, ShardKeys
from .replies import read as replies_of


class ShardMetrics(NamedTuple):
    # A tuple, not a dataclass: the stats API builds 1,200 of these per request.
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


# Commands per shard: what api/v1/stats needs, and what the dashboard needs.
STATS = "stats"
FULL = "full"


def _shard_commands(shard: ShardKeys, kind: str) -> list[tuple[Any, ...]]:
    head = ("ZRANGE", shard.ids_by_perform_in_zset, 0, 0, "WITHSCORES")
    if kind == STATS:
        return [("ZCARD", shard.ids_by_perform_in_zset), ("ZCARD", shard.morgue_ids_lex_zset), head]
    return [
        ("ZCARD", shard.ids_by_perform_in_zset),
        ("ZCARD", shard.morgue_ids_lex_zset),
        head,
        ("ZCARD", shard.ids_by_retry_count_zset),
        ("HLEN", shard.processing_hash),
        ("HMGET", shard.counters_hash, "processed", "failed"),
    ]


class MetricsReader:
    """Reads QueueMetrics for many queues with one pre-packed pipeline."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._packed: dict[tuple[Any, ...], tuple[list[bytes], int]] = {}
        self._lock = threading.Lock()

    def read(self, queues: Sequence[QueueKeys], now: float, *, kind: str = FULL, with_info: bool = False) -> tuple[list[QueueMetrics], dict[str, Any] | None]:
        """Metrics of ``queues`` (and Redis INFO when asked), in one round trip."""
        chunks, count = self._pack(tuple(queues), kind, with_info)
        replies = self._send(chunks, count)
        info = replies.pop() if with_info else None
        per_shard = 3 if kind == STATS else 6
        out = []
        position = 0
        for keys in queues:
            shards = []
            for _ in range(keys.shards_count):
                r = replies[position : position + per_shard]
                position += per_shard
                head = _head_score(r[2])
                if kind == STATS:
                    shards.append(ShardMetrics(r[0], 0, r[1], 0, 0, 0, head))
                else:
                    processed, failed = r[5]
                    shards.append(ShardMetrics(r[0], r[3], r[1], r[4], int(processed or 0), int(failed or 0), head))
            out.append(_queue(keys.queue_name, shards, now))
        return out, _parse_info(info) if info is not None else None

    def _pack(self, queues: tuple[QueueKeys, ...], kind: str, with_info: bool) -> tuple[list[bytes], int]:
        cache_key = (queues, kind, with_info)
        packed = self._packed.get(cache_key)
        if packed is None:
            commands = [c for keys in queues for shard in keys.shards() for c in _shard_commands(shard, kind)]
            if with_info:
                commands.append(("INFO",))
            connection = self.client.connection_pool.get_connection()
            try:
                packed = (connection.pack_commands(commands), len(commands))
            finally:
                self.client.connection_pool.release(connection)
            with self._lock:
                # Worker sets change on deploys only; keep the cache from growing regardless.
                if len(self._packed) > 16:
                    self._packed.clear()
                self._packed[cache_key] = packed
        return packed

    def _send(self, chunks: list[bytes], count: int) -> list[Any]:
        pool = self.client.connection_pool
        connection = pool.get_connection()
        try:
            connection.send_packed_command(chunks)
            replies = replies_of(connection, count)
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
            return replies
        except BaseException:
            # Unread replies would be handed to the next user of this connection.
            connection.disconnect()
            raise
        finally:
            pool.release(connection)


def _queue(name: str, shards: list[ShardMetrics], now: float) -> QueueMetrics:
    columns = list(zip(*shards)) if shards else [()] * len(ShardMetrics._fields)
    length, retries, morgue, busy, processed, failed = (sum(column) for column in columns[:6])
    oldest = min((head for head in columns[6] if head is not None), default=None)
    return QueueMetrics(
        queue_name=name,
        length=length,
        fresh=length - retries,
        retries=retries,
        morgue_length=morgue,
        busy=busy,
        processed=processed,
        failed=failed,
        lag=0.0 if oldest is None else max(0.0, now - oldest),
        shards=tuple(shards),
    )


def _head_score(reply: Any) -> float | None:
    """The score of ZRANGE 0 0 WITHSCORES: [member, score] (RESP2) or [[member, score]] (RESP3)."""
    if not reply:
        return None
    pair = reply[0] if isinstance(reply[0], (list, tuple)) else reply
    return float(pair[1])


def _parse_info(raw: Any) -> dict[str, Any]:
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    info: dict[str, Any] = {}
    for line in text.splitlines():
        if not line or line.startswith("#") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        info[key] = int(value) if value.isdigit() else value
    return info


def queue_metrics(client: redis.Redis, queues: Sequence[QueueKeys], now: float | None = None) -> list[QueueMetrics]:
    """Every metric of ``queues``, in one round trip."""
    now = time.time() if now is None else now
    return MetricsReader(client).read(queues, now)[0]
