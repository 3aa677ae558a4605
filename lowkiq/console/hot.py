"""A worker's hot ids for operators (the console's Hot ids tab, ``GET api/v1/workers/<w>/hot``, ``lowkiq jobs
hot W``): the ids with the most versions enqueued, retries and perform time over the last hour, and each shard's
lag with its oldest due id named (store/hot_ids.py).

A request reads at most HOT_ENTRIES history entries in all, an even share per shard (every shard's first page in
one round trip): a shard busier than its share is counted over less than the hour, and the answer says so.

Example::

    found = hot.hot_ids(console, console.worker("OrdersWorker"))
    found.by_versions[0].id   # the id that got the most versions in the last hour
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..store import hot_ids as store
from ..store.hot_ids import Hot, HotId

if TYPE_CHECKING:
    from . import Console, WorkerView

# The window counted, in seconds.
WINDOW = 3600.0
# History entries one request reads at most, all shards together (about a second of the console's CPU).
HOT_ENTRIES = 100_000


def per_shard(shards_count: int) -> int:
    """Entries each shard's walk reads at most: an even share of HOT_ENTRIES (one at least), so that a worker of
    4,096 shards costs what one of 4 does."""
    return max(1, HOT_ENTRIES // shards_count)


def hot_ids(console: Console, view: WorkerView, *, top: int = store.TOP) -> Hot:
    now = console.clock()
    return store.read(console.client, view.keys, since=now - WINDOW, now=now,
                        per_shard=per_shard(view.info.shards_count), top=top)


def as_json(view: WorkerView, found: Hot) -> dict[str, Any]:
    """The API's and the CLI's answer: each measure's ids, each shard's lag and oldest due id, what was read."""
    def ids(rows: list[HotId]) -> list[dict[str, Any]]:
        return [{"id": h.id, "shard": h.shard, "versions": h.versions, "retries": h.retries,
                 "perform_seconds": h.perform_seconds} for h in rows]

    return {
        "worker": view.name,
        "since": found.since,
        "by_versions": ids(found.by_versions),
        "by_retries": ids(found.by_retries),
        "by_perform_time": ids(found.by_perform_time),
        "shards": [{"shard": h.shard, "queued": h.queued, "lag": h.lag, "oldest_id": h.oldest_id,
                    "oldest_perform_in": h.perform_in, "examined": w.examined, "reaches_back_to": w.reaches_back_to,
                    "whole_window": w.whole} for h, w in zip(found.heads, found.walks)],
        "examined": found.examined,
        "ids_seen": found.ids_seen,
        "whole_window": found.whole,
        "budget": {"entries": HOT_ENTRIES, "per_shard": per_shard(view.info.shards_count)},
    }
