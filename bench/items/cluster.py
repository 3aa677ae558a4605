"""Item 8: Lowkiq's shape on a Redis Cluster of three primaries, beside one standalone Redis.

The same blank jobs (item 1's ids and payloads) go through the same code, once
into a private standalone redis-server and once into a private cluster (six
redis-server processes: three primaries, three replicas, formed by the test
suite's harness), alternating, at batch_size 1 and 100. The worker has 12
shards so that every primary owns some (checked with CLUSTER KEYSLOT). Redis's
counters are summed over the primaries. Everything shares this machine's cores:
six redis-servers and the lowkiq server on two cores measure the code paths,
not what a cluster of real hosts would do.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis
import redis.cluster

import lowkiq

from .. import ROOT
from ..common import MARK_FIRST, MARK_LAST, ItemResult, LowkiqServer, Sizes, log, median, spread, wait_for
from ..lowkiq_side import blank_worker, enqueue_blank
from ..options import Options
from ..redis_server import RedisServer

SHARDS = 12
BATCH_SIZES = (1, 100)
COUNTED = ("used_cpu_user", "used_cpu_sys", "total_commands_processed")


def _cluster_harness() -> Any:
    tests = str(Path(ROOT) / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from redis_cluster import RedisCluster  # the suite's real cluster: six processes, formed by redis-cli

    return RedisCluster()


class Target:
    """One Redis deployment: how to flush it, read its marks and sum its counters."""

    def __init__(self, name: str, url: str, clients: list[redis.Redis], marks: Any, cluster: bool) -> None:
        self.name, self.url, self.clients, self.marks, self.cluster = name, url, clients, marks, cluster

    def flush(self) -> None:
        for client in self.clients:
            client.flushall()

    def counters(self) -> dict[str, float]:
        totals = dict.fromkeys(COUNTED, 0.0)
        evalsha = 0.0
        for client in self.clients:
            info = client.info("all")
            for key in COUNTED:
                totals[key] += float(info[key])
            evalsha += float(info.get("cmdstat_evalsha", {}).get("calls", 0))
        totals["evalsha"] = evalsha
        return totals


def _drain(target: Target, sizes: Sizes, batch_size: int) -> dict[str, float]:
    target.flush()
    worker = blank_worker(SHARDS, batch_size)
    runtime = lowkiq.configure(workers=[worker], redis_url=target.url)
    try:
        enqueue = enqueue_blank(worker, sizes.jobs, sizes.slice)
    finally:
        runtime.close()
    before = target.counters()
    env = {"BENCH_EXPECTED": str(sizes.jobs), "BENCH_SHARDS_COUNT": str(SHARDS), "BENCH_BATCH_SIZE": str(batch_size),
           **({"BENCH_CLUSTER": "1"} if target.cluster else {})}
    with LowkiqServer("blank", target.url, env=env) as server:
        wait_for(lambda: target.marks.get(MARK_LAST) is not None, timeout=600, alive=server.check_alive,
                 what="the last perform")
        first, last = float(target.marks.get(MARK_FIRST)), float(target.marks.get(MARK_LAST))
    after = target.counters()
    batches = sizes.jobs / batch_size
    out = {
        "enqueue": enqueue,
        "drain": last - first,
        "redis_cpu_us_per_job": (after["used_cpu_user"] + after["used_cpu_sys"]
                                 - before["used_cpu_user"] - before["used_cpu_sys"]) / sizes.jobs * 1e6,
        "commands_per_batch": (after["total_commands_processed"] - before["total_commands_processed"]) / batches,
        "evalsha_per_batch": (after["evalsha"] - before["evalsha"]) / batches,
    }
    log(f"{target.name} batch_size {batch_size}: enqueue {enqueue:.2f} s, drain {out['drain']:.2f} s = "
        f"{sizes.jobs / out['drain']:,.0f} jobs/s, {out['evalsha_per_batch']:.2f} EVALSHA per batch")
    return out


def _stats_latency(url: str, requests: int) -> tuple[float, float]:
    """p50 and p99 of api/v1/stats, in-process, for 50 workers × 24 shards (item 6's shape, empty queues)."""
    from lowkiq.store import registry
    from lowkiq.transport import Transport
    from lowkiq.webui import served_app

    workers = [type(f"StatsWorker{n:02d}", (lowkiq.Worker,), {"shards_count": 24}) for n in range(50)]
    transport = Transport(url, pool_size=2, timeout=5)
    registry.register(transport, workers)
    transport.close()
    client = served_app(environ={"LOWKIQ_REDIS_URL": url}).test_client()  # as `lowkiq web` builds it
    times = []
    for n in range(requests + 5):
        started = time.perf_counter()
        reply = client.get("/api/v1/stats")
        if reply.status_code != 200:
            raise RuntimeError(f"api/v1/stats answered {reply.status_code}: {reply.data[:300]!r}")
        if n >= 5:
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return times[len(times) // 2], times[min(len(times) - 1, int(len(times) * 0.99))]


def run(sizes: Sizes, options: Options) -> ItemResult:
    result = ItemResult(8, "Redis Cluster beside standalone",
                        f"{sizes.jobs:,} blank jobs (item 1's), one `lowkiq` process, 5 threads, shards_count {SHARDS}, "
                        "lag scheduler, batch_size 1 and 100; a private standalone redis-server and a private cluster "
                        "of 3 primaries + 3 replicas on this machine, alternating; Redis counters summed over the "
                        "primaries; stats latency: api/v1/stats in-process, 50 workers × 24 shards")
    cluster = _cluster_harness().start()
    try:
        with RedisServer() as single:
            primaries = [cluster.client(port) for port in cluster.primaries()]
            owners = {cluster.owner(cluster.keyslot(shard.lease_hash)) for shard in blank_worker(SHARDS, 1).keys().shards()}
            result.note(f"The {SHARDS} shards' slots are owned by {len(owners)} of the {len(primaries)} primaries.")
            targets = [
                Target("standalone", single.url, [single.client()], single.client(), False),
                Target("cluster", cluster.url, primaries, redis.cluster.RedisCluster.from_url(cluster.url), True),
            ]
            measured: dict[tuple[str, int], list[dict[str, float]]] = {}
            for n in range(sizes.runs):
                for batch_size in BATCH_SIZES:
                    for target in (targets if n % 2 == 0 else targets[::-1]):
                        log(f"item 8, run {n + 1}/{sizes.runs}, batch_size {batch_size}, {target.name}")
                        measured.setdefault((target.name, batch_size), []).append(_drain(target, sizes, batch_size))
            for batch_size in BATCH_SIZES:
                rates = {}
                for target in targets:
                    runs = measured[(target.name, batch_size)]
                    pick: Callable[[str], float] = lambda key, runs=runs: median([r[key] for r in runs])  # noqa: E731
                    rates[target.name] = sizes.jobs / pick("drain")
                    result.row(f"batch_size {batch_size}, {target.name}: drain, s",
                               spread([r["drain"] for r in runs]))
                    result.row(f"batch_size {batch_size}, {target.name}: drain, jobs/s", f"{rates[target.name]:,.0f}")
                    result.row(f"batch_size {batch_size}, {target.name}: enqueue, jobs/s",
                               f"{sizes.jobs / pick('enqueue'):,.0f}")
                    result.row(f"batch_size {batch_size}, {target.name}: script calls and commands per batch",
                               f"{pick('evalsha_per_batch'):.2f}; {pick('commands_per_batch'):.1f}")
                    result.row(f"batch_size {batch_size}, {target.name}: Redis CPU per job, µs (all primaries)",
                               f"{pick('redis_cpu_us_per_job'):.1f}")
                result.row(f"batch_size {batch_size}: drain throughput, cluster / standalone",
                           f"{rates['cluster'] / rates['standalone']:.2f}×")
            requests = max(20, sizes.console_requests // 4)
            for target in targets:
                target.flush()
                p50, p99 = _stats_latency(target.url, requests)
                result.row(f"api/v1/stats, 50 workers × 24 shards, {target.name}", f"p50 {p50:.1f} ms, p99 {p99:.1f} ms")
            result.note("Six redis-server processes and the lowkiq server share two cores here: the ratios show what "
                        "the cluster path costs in code (grouping per node, one send per node), not the scaling a "
                        "cluster of separate hosts gives.")
    finally:
        cluster.stop()
    return result
