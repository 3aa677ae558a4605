"""Redis CPU of the hot script, alone: one thread takes and acknowledges batch_size 1 jobs of one
shard as fast as it can on a warm Redis, and ``INFO commandstats`` says what each call cost.

    python -m bench.script_cost [--jobs 20000] [--batch 1]
"""

from __future__ import annotations

import argparse
import time

import lowkiq
from bench.common import RedisCounters, hold
from bench.redis_server import RedisServer
from lowkiq.store import lua


def measure(url: str, client, jobs: int, batch: int, **attributes: object) -> dict[str, float]:
    """``attributes``: more of the worker's class attributes (e.g. history_length=0)."""
    client.flushall()
    worker = type("CostWorker", (lowkiq.Worker,), {"shards_count": 1, "batch_size": batch, "__module__": __name__,
                                                   "perform": lambda self, payloads_by_id: None, **attributes})
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    try:
        for start in range(0, jobs, 10_000):
            worker.perform_async([{"id": i, "payload": str(i)} for i in range(start, min(jobs, start + 10_000))])
        queue = runtime.queue(worker)
        lease = hold(queue, 0, "cost", ttl=60)
        wire = lua.Wire(queue.client)
        counters = RedisCounters(client).start()
        started, cpu_started = time.perf_counter(), time.process_time()
        acked: list[str] = []
        taken = 0
        while True:
            got = queue.ack_and_take((lease, acked) if acked else None, (lease, batch), thread="t", wire=wire)
            if not got.jobs:
                break
            taken += len(got.jobs)
            acked = [j.id for j in got.jobs]
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
        counters.stop()
    finally:
        runtime.close()
    calls = counters.calls("evalsha")
    return {"jobs": taken, "calls": calls, "usec_per_call": counters.usec_per_call("evalsha"),
            "redis_cpu_per_job_us": counters.cpu_seconds / taken * 1e6, "wall_per_job_us": wall / taken * 1e6,
            "python_cpu_per_job_us": cpu / taken * 1e6,
            "commands": {k: v for k, v in ((c, counters.usec_per_call(c)) for c in counters.commandstats)}}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with RedisServer() as server:
        client = server.client()
        for _ in range(args.runs):
            m = measure(server.url, client, args.jobs, args.batch)
            print(f"{m['jobs']} jobs, {m['calls']} calls: evalsha {m['usec_per_call']:.2f} µs/call, "
                  f"Redis CPU {m['redis_cpu_per_job_us']:.2f} µs/job, "
                  f"this process's CPU {m['python_cpu_per_job_us']:.1f} µs/job, "
                  f"wall {m['wall_per_job_us']:.1f} µs/job")
        print({k: round(v, 2) for k, v in m["commands"].items()})


if __name__ == "__main__":
    main()
