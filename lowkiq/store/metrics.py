"""Numbers for the dashboard and the stats API: one round trip per call.

Every shard of every queue is read with plain commands (ZCARD, HLEN, HMGET,
ZRANGE 0 0), a few µs each in Redis; a Lua script per shard costs several
times more at 50 workers x 24 shards. Since the keys never change for a set
of queues, the whole pipeline is packed into bytes once and cached (grouped
per node, on a cluster, once per slot map). The reads of one shard are not
atomic together; for numbers on a dashboard a job moving between two reads
of the same millisecond does not matter.

A console reads with a budget of shards (CONSOLE_SHARD_BUDGET): the workers that
fit are measured, whole, in their order; the others come back marked not
measured, so that one page never visits more shards than the budget, whatever
the registry holds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

import redis

from ..transport import Batch, NodeReply, Transport, as_transport
from ..transport.errors import first_error
from ..transport.resp import pack
from ..transport.slots import key_slot, keyset_slot
from . import codec, eviction, group_metrics, membership, pausing
from .group_metrics import GroupMetrics
from .keys import QueueKeys, ShardKeys
from .membership import Member
from .pausing import Pause

# Shards one console read visits at most (the dashboard and its live refresh, api/v1/stats, a
# Prometheus scrape). A shard costs 3 to 6 commands, so a read costs at most 60,000 commands:
# well under a second of Redis and of Python, and a few MB of packed commands cached, where
# 100 workers of 4,096 shards once cost 2.4 million commands and a gigabyte. Not less than
# registry.MAX_SHARDS_COUNT: any one worker can always be measured, on its own page at least.
CONSOLE_SHARD_BUDGET = 10_000


class ShardMetrics(NamedTuple):
    # A tuple, not a dataclass: the stats API builds 1,200 of these per request.
    length: int
    retries: int
    morgue_length: int
    busy: int
    processed: int
    failed: int
    dropped: int  # payloads a per-id cap dropped (max_payloads_per_id, "drop_oldest")
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
    paused: Pause | None = None  # who paused the queue and when; None while it runs
    # False when the read's shard budget left the queue out: its numbers are zeros, not readings.
    measured: bool = True
    # Its biggest groups and "(other)" (group_metrics), when the read asked for groups and it holds grouped ids.
    groups: tuple[GroupMetrics, ...] = ()
    # Payloads a per-id cap dropped (max_payloads_per_id with payload_overflow "drop_oldest"); 0 without a cap.
    dropped: int = 0


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
        ("HMGET", shard.counters_hash, "processed", "failed", "dropped"),
    ]


class MetricsReader:
    """Reads QueueMetrics for many queues with one pre-packed pipeline."""

    def __init__(self, client: Transport | redis.Redis, *, shard_budget: int | None = None) -> None:
        """``shard_budget``: the most shards one read visits (None: every shard of the queues asked for)."""
        self.transport = as_transport(client)
        self.shard_budget = shard_budget
        self._packed: dict[tuple[Any, ...], Batch] = {}
        self._lock = threading.Lock()

    def read(self, queues: Sequence[QueueKeys], now: float, *, kind: str = FULL, with_info: bool = False,
             groups: bool = False) -> tuple[list[QueueMetrics], dict[str, Any] | None]:
        """Metrics of ``queues`` (and Redis INFO of every node when asked), in one round trip; with ``groups``,
        each queue's biggest groups too (one more round trip when a shard holds groups: group_metrics)."""
        measured, info, _ = self._read(queues, now, kind, with_info, with_members=False, groups=groups)
        return measured, info

    def read_with_members(self, queues: Sequence[QueueKeys], now: float, *, with_info: bool = True,
                          groups: bool = False) -> tuple[list[QueueMetrics], dict[str, Any], list[Member]]:
        """Every metric, Redis INFO of every node (unless told not to) and the live server processes,
        in one round trip (and groups as in ``read``)."""
        measured, info, members = self._read(queues, now, FULL, with_info, with_members=True, groups=groups)
        return measured, info or {}, members

    def _read(self, queues: Sequence[QueueKeys], now: float, kind: str, with_info: bool, with_members: bool,
              groups: bool = False) -> tuple[list[QueueMetrics], dict[str, Any] | None, list[Member]]:
        fits = within_budget(queues, self.shard_budget)
        batch = self._pack(tuple(keys for keys, fit in zip(queues, fits) if fit), kind, with_members, groups)
        replies, nodes = self.transport.execute(batch, each_node=("INFO",) if with_info else None, replicas=True)
        first_error(replies)
        paused = pausing.parse_all(replies[-1])
        members = membership.from_replies(replies[-1 - len(membership.READ_COMMANDS):-1]) if with_members else []
        per_shard = 3 if kind == STATS else 6
        extra = group_metrics.COMMANDS_PER_SHARD if groups else 0
        out = []
        by_groups: dict[int, list[group_metrics.ShardGroups]] = {}  # queue's index in out -> its shards' groups
        position = 0
        for keys, fit in zip(queues, fits):
            if not fit:
                out.append(not_measured(keys.queue_name, paused.get(keys.queue_name)))
                continue
            shards = []
            grouped = []
            for shard in range(keys.shards_count):
                r = replies[position : position + per_shard]
                if extra:
                    grouped.append(group_metrics.parse_shard(keys.shard(shard), replies[position + per_shard :
                                                                                        position + per_shard + extra]))
                position += per_shard + extra
                head = _head_score(r[2])
                if kind == STATS:
                    shards.append(ShardMetrics(r[0], 0, r[1], 0, 0, 0, 0, head))
                else:
                    processed, failed, dropped = r[5]
                    shards.append(ShardMetrics(r[0], r[3], r[1], r[4], int(processed or 0), int(failed or 0),
                                               int(dropped or 0), head))
            out.append(_queue(keys.queue_name, shards, now, paused.get(keys.queue_name)))
            if grouped:
                by_groups[len(out) - 1] = grouped
        if by_groups:
            read = group_metrics.read(self.transport, list(by_groups.values()), now)
            for index, found in zip(by_groups, read, strict=True):
                out[index] = replace(out[index], groups=found)
        return out, redis_info(nodes) if with_info else None, members

    def _pack(self, queues: tuple[QueueKeys, ...], kind: str, with_members: bool = False,
              groups: bool = False) -> Batch:
        cache_key = (queues, kind, with_members, groups)
        batch = self._packed.get(cache_key)
        if batch is None:
            packed, slots = [], []
            for keys in queues:
                for shard in keys.shards():
                    slot = keyset_slot(shard)
                    commands = _shard_commands(shard, kind)
                    if groups:
                        commands += group_metrics.shard_commands(shard)
                    for command in commands:
                        packed.append(pack(command))
                        slots.append(slot)
            control = [*membership.READ_COMMANDS] if with_members else []
            # Paused queues, with every read: the console shows them wherever it shows a queue.
            control.append(("HGETALL", pausing.PAUSE_KEYS.paused_hash))
            for command in control:
                packed.append(pack(command))
                slots.append(key_slot(pausing.PAUSE_KEYS.paused_hash))
            batch = Batch(packed, slots)
            with self._lock:
                # Worker sets change on deploys only; keep the cache from growing regardless.
                if len(self._packed) > 16:
                    self._packed.clear()
                self._packed[cache_key] = batch
        return batch


def within_budget(queues: Sequence[QueueKeys], budget: int | None) -> list[bool]:
    """Which of ``queues`` one read measures: each, in order, whose shards still fit in ``budget``.

    Whole queues or none of a queue: the sums of part of a queue's shards would read as its numbers.
    """
    if budget is None:
        return [True] * len(queues)
    left = budget
    fits = []
    for keys in queues:
        fit = keys.shards_count <= left
        if fit:
            left -= keys.shards_count
        fits.append(fit)
    return fits


def not_measured(name: str, paused: Pause | None = None) -> QueueMetrics:
    """A queue the read's budget left out: zeros, marked so that nobody reads them as numbers."""
    return QueueMetrics(queue_name=name, length=0, fresh=0, retries=0, morgue_length=0, busy=0, processed=0,
                        failed=0, lag=0.0, shards=(), paused=paused, measured=False)


def _queue(name: str, shards: list[ShardMetrics], now: float, paused: Pause | None = None) -> QueueMetrics:
    columns = list(zip(*shards)) if shards else [()] * len(ShardMetrics._fields)
    length, retries, morgue, busy, processed, failed, dropped = (sum(column) for column in columns[:7])
    oldest = min((head for head in columns[7] if head is not None), default=None)
    return QueueMetrics(
        queue_name=name,
        length=length,
        fresh=length - retries,
        retries=retries,
        morgue_length=morgue,
        busy=busy,
        processed=processed,
        failed=failed,
        dropped=dropped,
        lag=0.0 if oldest is None else max(0.0, now - oldest),
        shards=tuple(shards),
        paused=paused,
    )


def _head_score(reply: Any) -> float | None:
    """The score of ZRANGE 0 0 WITHSCORES, in seconds."""
    return codec.seconds(codec.first_score(reply)) if reply else None


def _parse_info(raw: Any) -> dict[str, Any]:
    text = raw.decode() if isinstance(raw, bytes) else str(raw)
    info: dict[str, Any] = {}
    for line in text.splitlines():
        if not line or line.startswith("#") or ":" not in line:
            continue
        key, _, value = line.partition(":")
        info[key] = int(value) if value.isdigit() else value
    return info


# Summed over the nodes of a cluster; the rest is the first primary's.
SUMMED = ("used_memory", "used_memory_peak", "connected_clients", "used_memory_rss", "total_commands_processed")


def redis_info(nodes: Sequence[NodeReply]) -> dict[str, Any]:
    """INFO of every node: the first primary's fields, totals of the summed ones, and ``nodes``.

    ``nodes`` lists each node's name, role, version, memory and clients, or
    its ``error`` when it did not answer, so an unreachable node is named.
    """
    parsed = [(n, None if isinstance(n.reply, BaseException) else _parse_info(n.reply)) for n in nodes]
    answered = [info for _, info in parsed if info is not None]
    summary: dict[str, Any] = dict(answered[0]) if answered else {}
    if len(nodes) > 1:
        for key in SUMMED:
            values = [info[key] for info in answered if isinstance(info.get(key), int)]
            if values:
                summary[key] = sum(values)
        for key in ("used_memory", "used_memory_peak"):
            if key in summary:
                summary[f"{key}_human"] = _human(summary[key])
    summary["nodes"] = [
        {"name": n.name, "primary": n.primary, "error": f"{type(n.reply).__name__}: {n.reply}"} if info is None else {
            "name": n.name,
            "primary": n.primary,
            "role": info.get("role"),
            "version": info.get("redis_version"),
            "used_memory": info.get("used_memory"),
            "used_memory_human": info.get("used_memory_human"),
            "connected_clients": info.get("connected_clients"),
            "uptime_in_seconds": info.get("uptime_in_seconds"),
            "maxmemory_policy": info.get("maxmemory_policy"),
        }
        for n, info in parsed
    ]
    summary["evicting"] = {n.name: str(info["maxmemory_policy"]) for n, info in parsed
                           if info is not None and n.primary and eviction.evicts_jobs(info.get("maxmemory_policy"))}
    return summary


def _human(size: int) -> str:
    """Bytes as Redis writes them in INFO (used_memory_human): 1.50M."""
    value = float(size)
    for unit in ("B", "K", "M", "G", "T"):
        if value < 1024 or unit == "T":
            return f"{value:.2f}{unit}" if unit != "B" else f"{int(value)}B"
        value /= 1024
    return f"{size}B"  # pragma: no cover


def queue_metrics(client: Transport | redis.Redis, queues: Sequence[QueueKeys], now: float | None = None) -> list[QueueMetrics]:
    """Every metric of ``queues``, in one round trip."""
    now = time.time() if now is None else now
    return MetricsReader(client).read(queues, now)[0]
