"""Time scores in seconds against integer microseconds, one version, alternating: ``python -m bench.score_units``.

    python -m bench.score_units [--jobs 100000] [--shards 5 100 1000] [--pairs 4]

On a private redis-server, at the store level: ``--jobs`` distinct ids enqueued in calls of 10,000 into a
queue of each shard count, its shards either as the previous version left them (seconds) or migrated
(their writers write integer microseconds, ``scores_migrate.lua``), the two in alternating pairs. Reported,
median of the pairs: jobs/s, the Redis CPU per job of the push scripts (INFO commandstats, EVALSHA) and of
the ZADDs inside them, and memory per queued job (INFO used_memory delta; the perform_in zsets alone, by
MEMORY USAGE). Then, with ``--drain`` (default: batch 1 and -16, taken ahead), the hot script's Redis CPU
per job draining 5 shards in either unit. ``python -m bench.versus --workload enqueue-shards`` compares two
commits the same way.
"""

from __future__ import annotations

import argparse
import statistics
from typing import Any

import lowkiq
from lowkiq.store import lua, score_units

from .common import hold
from .enqueue_cost import enqueue_into
from .redis_server import RedisServer

CALL = 10_000


def one_run(url: str, client: Any, shards: int, micro: bool, jobs: int) -> dict[str, float]:
    return enqueue_into(url, client, f"Scores{shards}", shards, jobs, CALL, micro)


def drain_run(url: str, client: Any, micro: bool, jobs: int, batch: int) -> float:
    """Redis CPU per job (EVALSHA µs) of the hot script draining ``jobs`` from 5 shards, one shard after
    another, ``batch`` ids per take (negative: taken ahead, as a batch-1 worker does by default)."""
    client.flushall()
    worker = type("ScoresDrain", (lowkiq.Worker,), {"shards_count": 5, "__module__": __name__,
                                                    "perform": lambda self, payloads_by_id: None})
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    try:
        queue = runtime.queue(worker)
        if micro:
            lua.run_many(runtime.client, [score_units.migrate_call(shard) for shard in queue.keys.shards()])
        for start in range(0, jobs, CALL):
            worker.perform_async([{"id": i, "payload": str(i)} for i in range(start, min(jobs, start + CALL))])
        wire = lua.Wire(queue.client)
        client.config_resetstat()
        done = 0
        for shard in range(5):
            lease = hold(queue, shard, "scores", ttl=600)
            acked: list[str] = []
            while True:
                taken = queue.ack_and_take((lease, acked) if acked else None, (lease, batch), wire=wire)
                acked = [job.id for job in taken.jobs]
                if not acked:
                    break
                done += len(acked)
        wire.close()
        return int(client.info("commandstats").get("cmdstat_evalsha", {"usec": 0})["usec"]) / max(done, 1)
    finally:
        runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--shards", type=int, nargs="+", default=[5, 100, 1000])
    parser.add_argument("--pairs", type=int, default=4)
    parser.add_argument("--drain", type=int, nargs="*", default=[1, -16], metavar="BATCH",
                        help="also the hot script's Redis CPU per job draining 5 shards at these batch sizes")
    args = parser.parse_args()
    print("| shards | scores | enqueue jobs/s | Redis CPU µs/job (EVALSHA) | of which ZADD | used_memory B/job "
          "| perform_in zsets B/job | jobs/s, µs / seconds (pairwise median) |")
    print("| ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    with RedisServer() as server:
        client = server.client()
        for shards in args.shards:
            runs: dict[bool, list[dict[str, float]]] = {False: [], True: []}
            ratios = []
            for n in range(args.pairs):
                pair = {}
                for micro in (False, True) if n % 2 == 0 else (True, False):
                    pair[micro] = one_run(server.url, client, shards, micro, args.jobs)
                    runs[micro].append(pair[micro])
                ratios.append(pair[True]["rate"] / pair[False]["rate"])
            for micro in (False, True):
                med = {key: statistics.median(r[key] for r in runs[micro]) for key in runs[micro][0]}
                ratio = (f"{statistics.median(ratios):.2f}× ({min(ratios):.2f} to {max(ratios):.2f})"
                         if micro else "")
                print(f"| {shards:,} | {'µs' if micro else 'seconds'} | {med['rate']:,.0f} | {med['evalsha']:.1f} "
                      f"| {med['zadd']:.1f} | {med['bytes']:.1f} | {med['zset_bytes']:.1f} | {ratio} |", flush=True)
        if args.drain:
            print()
            print("| drain, 5 shards | seconds: Redis CPU µs/job | µs: Redis CPU µs/job | µs / seconds (pairwise median) |")
            print("| --- | ---: | ---: | ---: |")
        for batch in args.drain:
            costs: dict[bool, list[float]] = {False: [], True: []}
            for n in range(args.pairs):
                for micro in (False, True) if n % 2 == 0 else (True, False):
                    costs[micro].append(drain_run(server.url, client, micro, args.jobs, batch))
            ratios = [b / a for a, b in zip(costs[False], costs[True])]
            print(f"| batch {batch} | {statistics.median(costs[False]):.1f} | {statistics.median(costs[True]):.1f} "
                  f"| {statistics.median(ratios):.2f}× ({min(ratios):.2f} to {max(ratios):.2f}) |", flush=True)


if __name__ == "__main__":
    main()
