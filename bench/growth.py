"""How enqueue and drain rates hold as things grow: ``python -m bench.growth [--jobs N] [--shards ...]``.

On a private redis-server, at the store level (no perform, one thread): ``--jobs`` distinct ids enqueued
in calls of 10,000 for each shard count in ``--shards``; then, at 5 shards, the enqueue and the drain
(ack_and_take, batch 1) per job at ``--jobs`` and at 10 x ``--jobs``. Reported: jobs/s and the Redis CPU
per job (INFO commandstats, EVALSHA), median of ``--rounds``; for the two enqueues at 5 shards, also what each
command inside the push scripts cost per job.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

import lowkiq
from lowkiq.store import lua

from .common import hold
from .redis_server import RedisServer

CALL = 10_000


def evalsha_usec(client: Any) -> int:
    return int(client.info("commandstats").get("cmdstat_evalsha", {"usec": 0})["usec"])


def commands_per_job(client: Any, jobs: int) -> str:
    """What each command the scripts ran since the last reset cost per job (INFO commandstats), the costly first."""
    stats = client.info("commandstats")
    costs = {name.removeprefix("cmdstat_"): float(v["usec"]) / jobs for name, v in stats.items()
             if name not in ("cmdstat_evalsha", "cmdstat_config|resetstat", "cmdstat_info", "cmdstat_script|load")}
    return ", ".join(f"{name} {usec:.2f}" for name, usec in sorted(costs.items(), key=lambda kv: -kv[1]) if usec >= 0.01)


def worker_of(shards: int) -> type[lowkiq.Worker]:
    return type(f"Growth{shards}", (lowkiq.Worker,), {"shards_count": shards, "__module__": __name__,
                                                       "perform": lambda self, payloads_by_id: None})


def enqueue(url: str, client: Any, shards: int, jobs: int) -> tuple[float, float]:
    client.flushall()
    worker = worker_of(shards)
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    try:
        batches = [[{"id": i, "payload": str(i)} for i in range(start, min(jobs, start + CALL))]
                   for start in range(0, jobs, CALL)]
        client.config_resetstat()
        started = time.perf_counter()
        for batch in batches:
            worker.perform_async(batch)
        seconds = time.perf_counter() - started
        return jobs / seconds, evalsha_usec(client) / jobs
    finally:
        runtime.close()


def drain(url: str, client: Any, jobs: int) -> tuple[float, float]:
    """The jobs enqueue() left in 5 shards, taken and acknowledged one by one, shard after shard."""
    worker = worker_of(5)
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    try:
        queue = runtime.queue(worker)
        wire = lua.Wire(queue.client)
        client.config_resetstat()
        started = time.perf_counter()
        done = 0
        for shard in range(5):
            lease = hold(queue, shard, "growth", ttl=600)
            acked: list[str] = []
            while True:
                taken = queue.ack_and_take((lease, acked) if acked else None, (lease, 1), wire=wire)
                acked = [job.id for job in taken.jobs]
                if not acked:
                    break
                done += 1
        seconds = time.perf_counter() - started
        wire.close()
        return done / seconds, evalsha_usec(client) / max(done, 1)
    finally:
        runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--shards", type=int, nargs="+", default=[5, 100, 1000])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with RedisServer() as server:
        client = server.client()
        for shards in args.shards:
            runs = [enqueue(server.url, client, shards, args.jobs) for _ in range(args.rounds)]
            rate = statistics.median(r[0] for r in runs)
            usec = statistics.median(r[1] for r in runs)
            print(f"enqueue, {shards:>5} shards, {args.jobs:,} jobs: {rate:10,.0f} jobs/s, {usec:5.1f} µs Redis CPU/job",
                  flush=True)
        for jobs in (args.jobs, 10 * args.jobs):
            pushed = enqueue(server.url, client, 5, jobs)
            inside = commands_per_job(client, jobs)
            drained = drain(server.url, client, jobs)
            print(f"5 shards, {jobs:>9,} jobs: enqueue {pushed[0]:10,.0f} jobs/s ({pushed[1]:5.1f} µs/job), "
                  f"drain {drained[0]:8,.0f} jobs/s ({drained[1]:5.1f} µs/job)", flush=True)
            print(f"  the enqueue's commands inside its scripts, Redis CPU µs per job: {inside}", flush=True)


if __name__ == "__main__":
    main()
