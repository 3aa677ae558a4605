"""Workers known to Redis, so the standalone console can find queues without the app's code."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Iterable

import redis

from .queue.keys import registry_hash

if TYPE_CHECKING:
    from .worker import Worker


@dataclass(frozen=True)
class WorkerInfo:
    name: str
    queue_name: str
    shards_count: int
    max_retry_count: int = 25
    batch_size: int = 1


def info_of(worker: type["Worker"]) -> WorkerInfo:
    return WorkerInfo(worker.__name__, worker.queue_name, worker.shards_count, worker.max_retry_count, worker.batch_size)


def register(client: redis.Redis, workers: Iterable[type["Worker"]]) -> None:
    mapping = {}
    for w in workers:
        info = info_of(w)
        mapping[info.name] = json.dumps({**info.__dict__, "registered_at": time.time()})
    if mapping:
        client.hset(registry_hash(), mapping=mapping)


def known(client: redis.Redis) -> list[WorkerInfo]:
    found = []
    for name, raw in sorted(client.hgetall(registry_hash()).items()):
        data = json.loads(raw)
        found.append(
            WorkerInfo(
                name=name.decode() if isinstance(name, bytes) else name,
                queue_name=data["queue_name"],
                shards_count=int(data["shards_count"]),
                max_retry_count=int(data.get("max_retry_count", 25)),
                batch_size=int(data.get("batch_size", 1)),
            )
        )
    return found


def forget(client: redis.Redis, names: Iterable[str]) -> int:
    names = list(names)
    return client.hdel(registry_hash(), *names) if names else 0
