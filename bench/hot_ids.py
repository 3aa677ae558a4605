"""What one read of a worker's hot ids costs (docs/console.md, "Hot ids"): a worker whose 4 shards' history
streams hold ``--entries`` entries of takes and acks (batch 1) plus the pushes, read with the console's budget
(``lowkiq.console.hot.HOT_ENTRIES`` in all): the wall time of the read, the entries examined and the round trips.

    python -m bench.hot_ids [--entries 100000] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import time

import lowkiq
from bench.common import hold
from bench.redis_server import RedisServer
from lowkiq.console import Console, hot
from lowkiq.store.id_history import PAGE


def fill(url: str, jobs: int) -> type[lowkiq.Worker]:
    """``jobs`` jobs of ``jobs // 2`` ids (2 versions each) pushed 1,000 at a time, then taken and acknowledged one by one in each
    of the 4 shards: about ``jobs`` history entries of takes and acks."""
    worker = type("HotWorker", (lowkiq.Worker,), {"shards_count": 4, "__module__": __name__,
                                                  "history_length": jobs, "perform": lambda self, p: None})
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    ids = max(jobs // 2, 1)
    for start in range(0, jobs, 1000):
        worker.perform_async([{"id": f"id-{i % ids}", "payload": i} for i in range(start, start + 1000)])
    queue = runtime.queue(worker)
    for shard in range(4):
        lease = hold(queue, shard, "bench", ttl=600)
        acked: list[str] = []
        while True:
            got = queue.ack_and_take((lease, acked) if acked else None, (lease, 1), thread="t")
            if not got.jobs:
                break
            acked = [j.id for j in got.jobs]
    return worker


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with RedisServer() as server:
        worker = fill(server.url, args.entries)
        console = Console.from_url(server.url, redis_timeout=30)
        view = console.worker(worker.__name__)
        times = []
        for _ in range(args.runs):
            started = time.perf_counter()
            found = hot.hot_ids(console, view)
            times.append(time.perf_counter() - started)
        print(f"entries examined {found.examined:,} (budget {hot.HOT_ENTRIES:,}, {hot.per_shard(4):,} per shard), "
              f"about {found.examined // PAGE + 4} round trips, ids seen {found.ids_seen:,}, whole window "
              f"{found.whole}")
        print(f"read: median {statistics.median(times) * 1000:.0f} ms, min {min(times) * 1000:.0f} ms, "
              f"max {max(times) * 1000:.0f} ms over {args.runs} runs")


if __name__ == "__main__":
    main()
