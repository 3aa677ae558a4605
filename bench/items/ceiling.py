"""Item 12: what Redis pays per job, and how it holds as things grow.

The hot script's cost per job and where it goes (``bench.script_cost``), one more version of a deep id
(``bench.depth``), a Zipf workload on the default worker (nothing dropped), a server's start and a rolling
restart (``bench.startup``), enqueue across shard counts and at 10x the jobs (``bench.growth``). Each part
starts its own redis-server.
"""

from __future__ import annotations

import random
import statistics
from typing import Any

import lowkiq

from .. import depth, growth, script_cost, startup
from ..common import ItemResult, Sizes, hold, log, spread
from ..options import Options
from ..redis_server import RedisServer


def run(sizes: Sizes, options: Options) -> ItemResult:
    result = ItemResult(12, "Redis as the ceiling", "a private redis-server per part; store level, one thread, "
                        "except the start-up part (real `lowkiq -r bench/apps/startup_app.py` processes); Redis CPU "
                        "from `INFO commandstats`")
    _hot_script(result, sizes)
    _depth(result, sizes)
    _zipf(result, sizes)
    _startup(result, sizes)
    _growth(result, sizes)
    return result


def _check(sizes: Sizes, ok: bool) -> bool | None:
    return None if sizes.smoke else ok


def _hot_script(result: ItemResult, sizes: Sizes) -> None:
    jobs = 20_000 if not sizes.smoke else 500
    per_job: dict[int, list[float]] = {1: [], 10: []}
    with RedisServer() as server:
        client = server.client()
        for n in range(sizes.runs):
            log(f"item 12: hot script, run {n + 1}/{sizes.runs}")
            for batch in per_job:
                measured = script_cost.measure(server.url, client, jobs, batch)
                per_job[batch].append(measured["usec_per_call"] / batch)
        log("item 12: the hot script's steps")
        found = script_cost.steps(server.url, client, jobs // 5, sizes.runs)
    result.row("hot script (take + ack), batch 1: Redis CPU per job, µs", spread(per_job[1], "{:.1f}"), "<= 10",
               _check(sizes, statistics.median(per_job[1]) <= 10))
    result.row("hot script, batch 10: Redis CPU per job, µs", spread(per_job[10], "{:.1f}"))
    result.row("the same Redis commands as a batch-1 call and nothing else (the floor), µs per call",
               f"{found['floor']:.1f}")
    result.row("the fewest commands of a fenced take and ack (9: no console index, counter or renewal), µs per call",
               f"{found['minimal']:.1f}")
    result.row("a script that only returns, with the shard's 24 keys, µs per call", f"{found['empty']:.1f}")
    lines = ["Where a batch-1 call's Redis CPU goes (`python -m bench.script_cost --steps`: the script cut after each "
             "step, on fresh queues, median of the runs; a step is the difference between two cuts):", "",
             "| step | µs |", "| --- | ---: |"]
    lines += [f"| {label} | {usec:.1f} |" for label, usec in found["steps"]]
    lines += [f"| the whole script, per call | {found['whole']:.1f} |",
              f"| the floor: its Redis commands and nothing else | {found['floor']:.1f} |",
              f"| the fewest commands a fenced take and ack can be (`MINIMAL` in bench/script_cost.py) | "
              f"{found['minimal']:.1f} |"]
    result.note("\n".join(lines))


def _depth(result: ItemResult, sizes: Sizes) -> None:
    deepest = 100_000 if not sizes.smoke else 1_000
    versions = 200 if not sizes.smoke else 20
    costs: dict[int, list[float]] = {1: [], deepest: []}
    with RedisServer() as server:
        client = server.client()
        for n in range(sizes.runs):
            log(f"item 12: one more version of a deep id, run {n + 1}/{sizes.runs}")
            for held in costs:
                costs[held].append(depth.one_depth(server.url, client, held, versions))
    ratio = statistics.median(costs[deepest]) / statistics.median(costs[1])
    result.row("one more version, id holding 1 payload: Redis CPU, µs", spread(costs[1], "{:.1f}"))
    result.row(f"one more version, id holding {deepest:,} payloads: Redis CPU, µs", spread(costs[deepest], "{:.1f}"))
    result.row("deepest / shallowest", f"{ratio:.2f}×", "<= 2×", _check(sizes, ratio <= 2))


def _zipf(result: ItemResult, sizes: Sizes) -> None:
    """Versions over ids drawn Zipf-like (s = 1), on a worker with every default: each payload is kept."""
    versions, ids = (100_000, 1_000) if not sizes.smoke else (5_000, 100)
    log(f"item 12: {versions:,} Zipf versions over {ids:,} ids")
    draw = random.Random(12)
    chosen = draw.choices(range(ids), weights=[1 / (rank + 1) for rank in range(ids)], k=versions)
    worker = type("ZipfWorker", (lowkiq.Worker,), {"__module__": __name__, "perform": lambda self, payloads_by_id: None})
    with RedisServer() as server:
        runtime = lowkiq.configure(workers=[worker], redis_url=server.url)
        try:
            for start in range(0, versions, 10_000):
                worker.perform_async([{"id": f"order-{chosen[v]}", "payload": f"v{v}", "score": v}
                                      for v in range(start, min(versions, start + 10_000))])
            delivered, dropped = _drain(runtime.queue(worker), server.client())
        finally:
            runtime.close()
    hottest = max(chosen.count(i) for i in range(min(ids, 10)))
    result.row(f"Zipf workload, default worker: payloads kept of {versions:,} (the hottest id got {hottest:,})",
               f"{delivered:,}", f"= {versions:,}", _check(sizes, delivered == versions))
    result.row("Zipf workload, default worker: payloads dropped", f"{dropped:,}", "0", _check(sizes, dropped == 0))


def _drain(queue: Any, client: Any) -> tuple[int, int]:
    """Every payload the queue holds, taken shard by shard; and the shards' count of dropped payloads."""
    delivered = dropped = 0
    for shard in range(queue.keys.shards_count):
        lease = hold(queue, shard, "zipf", ttl=600)
        acked: list[str] = []
        while True:
            taken = queue.ack_and_take((lease, acked) if acked else None, (lease, 1000))
            if not taken.jobs:
                break
            delivered += sum(len(job.payloads) for job in taken.jobs)
            acked = [job.id for job in taken.jobs]
        dropped += int(client.hget(queue.keys.shard(shard).counters_hash, "dropped") or 0)
    return delivered, dropped


def _startup(result: ItemResult, sizes: Sizes) -> None:
    log("item 12: start-up and a rolling restart")
    first_job, handover = startup.measure(sizes.runs)
    result.row("process start to its first job, s", spread(first_job, "{:.3f}"), "<= 0.5",
               _check(sizes, statistics.median(first_job) <= 0.5))
    result.row("rolling restart: a job enqueued as the old process exits, to its perform on the new one, s",
               spread(handover, "{:.3f}"), "<= 0.5", _check(sizes, statistics.median(handover) <= 0.5))


def _growth(result: ItemResult, sizes: Sizes) -> None:
    jobs = sizes.jobs
    rates: dict[str, list[float]] = {}
    usec: dict[str, list[float]] = {}

    def keep(name: str, measured: tuple[float, float]) -> None:
        rates.setdefault(name, []).append(measured[0])
        usec.setdefault(name, []).append(measured[1])

    with RedisServer() as server:
        client = server.client()
        for n in range(sizes.runs):
            log(f"item 12: growth, run {n + 1}/{sizes.runs}")
            for shards in (5, 1000):
                keep(f"enqueue, {shards} shards", growth.enqueue(server.url, client, shards, jobs))
        # Redis keeps a sorted set under 128 members as a listpack, whose insert reads every score before
        # the new one's place: the same enqueue with sorted sets kept as skiplists shows what that costs.
        listpack = client.config_get("zset-max-listpack-entries")["zset-max-listpack-entries"]
        client.config_set("zset-max-listpack-entries", 0)
        for _ in range(sizes.runs):
            keep("enqueue, 1000 shards, sorted sets as skiplists", growth.enqueue(server.url, client, 1000, jobs))
        client.config_set("zset-max-listpack-entries", listpack)
        log("item 12: growth, 10x the jobs")
        for count in (jobs, 10 * jobs):
            keep(f"enqueue, 5 shards, {count:,} jobs", growth.enqueue(server.url, client, 5, count))
            keep(f"drain (batch 1), 5 shards, {count:,} jobs", growth.drain(server.url, client, count))
    for name in rates:
        result.row(f"{name}: jobs/s (Redis CPU per job, µs)",
                   f"{statistics.median(rates[name]):,.0f} ({statistics.median(usec[name]):.1f})")

    def ratio(a: str, b: str) -> float:
        return statistics.median(rates[a]) / statistics.median(rates[b])

    spread_ratio = ratio("enqueue, 5 shards", "enqueue, 1000 shards")
    result.row("enqueue rate, 5 shards / 1,000 shards", f"{spread_ratio:.2f}×", "<= 1.5×", _check(sizes, spread_ratio <= 1.5))
    for what in ("enqueue", "drain (batch 1)"):
        ten = ratio(f"{what}, 5 shards, {10 * jobs:,} jobs", f"{what}, 5 shards, {jobs:,} jobs")
        result.row(f"{what} rate at {10 * jobs:,} jobs / at {jobs:,}", f"{ten:.2f}×", ">= 0.90×", _check(sizes, ten >= 0.9))
