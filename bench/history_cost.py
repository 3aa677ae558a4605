"""What each id's history costs (docs/history.md): the hot script's Redis CPU per job with the history on
(the default) and off (``history_length = 0``) in alternating runs on one warm Redis, the push's, the memory
a full shard history takes, and how long reading one id's history takes when its shard's stream is full.

    python -m bench.history_cost [--jobs 20000] [--runs 3] [--smoke]
"""

from __future__ import annotations

import argparse
import statistics
import time

import lowkiq
from bench.common import RedisCounters
from bench.redis_server import RedisServer
from bench.script_cost import measure
from lowkiq.store.id_history import PAGE, IdHistories
from lowkiq.store.keys import QueueKeys

DEFAULT_LENGTH = lowkiq.Worker.history_length


def push_cost(url: str, client, jobs: int, **attributes: object) -> float:
    """Redis CPU per job of enqueueing ``jobs`` fresh ids, 1,000 per call, in µs."""
    client.flushall()
    worker = type("PushWorker", (lowkiq.Worker,), {"shards_count": 1, "__module__": __name__,
                                                   "perform": lambda self, payloads_by_id: None, **attributes})
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    try:
        counters = RedisCounters(client).start()
        for start in range(0, jobs, 1000):
            worker.perform_async([{"id": i, "payload": str(i)} for i in range(start, min(jobs, start + 1000))])
        counters.stop()
    finally:
        runtime.close()
    return counters.cpu_seconds / jobs * 1e6


def full_shard(url: str, client, length: int) -> dict[str, float]:
    """A shard whose history holds ``length`` entries of takes and acks (batch 1), as ``measure`` leaves it:
    its stream's memory, and the time to read the newest id's history and to walk the whole stream (an id it
    does not hold)."""
    jobs = length  # one entry per take + ack; the pushes (1,000 jobs per entry) add a few
    measure(url, client, jobs, 1, history_length=length)
    keys = QueueKeys("CostWorker", 1)
    key = keys.shard(0).events_stream
    entries, memory = client.xlen(key), client.memory_usage(key) or 0
    histories = IdHistories(client, keys)
    started = time.perf_counter()
    newest = histories.of(str(jobs - 1), limit=50)
    newest_s = time.perf_counter() - started
    started = time.perf_counter()
    absent = histories.of("not-an-id", limit=50)
    walk_s = time.perf_counter() - started
    return {"entries": entries, "bytes": memory, "bytes_per_entry": memory / max(entries, 1),
            "newest_ms": newest_s * 1000, "newest_events": len(newest.events),
            "walk_ms": walk_s * 1000, "walk_examined": absent.examined, "round_trips": -(-absent.examined // PAGE)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="a few hundred jobs, one run: that it works")
    args = parser.parse_args()
    jobs, runs = (500, 1) if args.smoke else (args.jobs, args.runs)
    with RedisServer() as server:
        client = server.client()
        take = {"on": [], "off": []}
        push = {"on": [], "off": []}
        for _ in range(runs):  # alternating: a noisy machine slows both alike
            for mode, length in (("on", DEFAULT_LENGTH), ("off", 0)):
                take[mode].append(measure(server.url, client, jobs, 1, history_length=length)["redis_cpu_per_job_us"])
                push[mode].append(push_cost(server.url, client, jobs, history_length=length))
        full = full_shard(server.url, client, 2_000 if args.smoke else DEFAULT_LENGTH)
    print(f"take + ack, batch 1, Redis CPU per job (median of {runs}): history on "
          f"{statistics.median(take['on']):.2f} µs, off {statistics.median(take['off']):.2f} µs "
          f"(on/off {statistics.median(take['on']) / statistics.median(take['off']):.3f}x)")
    print(f"push of fresh ids, 1,000 per call, Redis CPU per job: on {statistics.median(push['on']):.2f} µs, "
          f"off {statistics.median(push['off']):.2f} µs")
    print(f"a full shard history: {full['entries']:,} entries, {full['bytes'] / 1024:.0f} KiB "
          f"({full['bytes_per_entry']:.0f} B per entry)")
    print(f"reading the newest id's history: {full['newest_ms']:.1f} ms ({full['newest_events']} events); "
          f"an id the history does not hold (the whole stream walked): {full['walk_ms']:.1f} ms, "
          f"{full['walk_examined']:,} entries in {full['round_trips']} round trips")


if __name__ == "__main__":
    main()
