"""Drain a queue of blank jobs with a real ``lowkiq`` server process: items 1, 2 and 4 share this."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

import lowkiq

from .common import MARK_FIRST, MARK_LAST, Drain, LowkiqServer, RedisCounters, Sizes, as_served, log, wait_drained, wait_for
from .profiling import Profile, SpyRecorder


def blank_worker(shards_count: int, batch_size: int) -> type[lowkiq.Worker]:
    """The bench process's twin of ``bench/apps/blank.py``: same name, same shards."""
    return type("BlankWorker", (lowkiq.Worker,), {"shards_count": shards_count, "batch_size": batch_size,
                                                  "__module__": __name__, "perform": lambda self, payloads_by_id: None})


def enqueue_blank(worker: type[lowkiq.Worker], jobs: int, slice_size: int) -> float:
    """ids 0..jobs-1, payload str(i), in slices; returns the seconds it took (building the dicts included)."""
    started = time.perf_counter()
    for start in range(0, jobs, slice_size):
        worker.perform_async([{"id": i, "payload": str(i)} for i in range(start, min(jobs, start + slice_size))])
    return time.perf_counter() - started


@dataclass
class LowkiqRun:
    enqueue: float
    drain: Drain
    counters: RedisCounters
    jobs: int
    profile: Profile | None = None

    @property
    def jobs_per_second(self) -> float:
        return self.jobs / self.drain.seconds

    @property
    def us_per_job(self) -> float:
        return self.drain.seconds / self.jobs * 1e6


def drain_blank(url: str, sizes: Sizes, *, scheduler: str, shards_count: int, batch_size: int,
                profile_to: str | None = None, profile_rate: int = 200, cpus: set[int] | None = None,
                server_env: dict[str, str] | None = None, server_args: Sequence[str] = ()) -> LowkiqRun:
    """Enqueue ``sizes.jobs`` blank jobs into an empty Redis, then time a server draining them."""
    client = redis.Redis.from_url(url)
    client.flushall()
    worker = blank_worker(shards_count, batch_size)
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    try:
        as_served(runtime, worker)
        enqueue = enqueue_blank(worker, sizes.jobs, sizes.slice)
    finally:
        runtime.close()
    counters = RedisCounters(client).start()
    env = {"BENCH_EXPECTED": str(sizes.jobs), "BENCH_SHARDS_COUNT": str(shards_count),
           "BENCH_BATCH_SIZE": str(batch_size), **(server_env or {})}
    with LowkiqServer("blank", url, scheduler=scheduler, env=env, cpus=cpus, args=server_args) as server:
        spy = SpyRecorder(server.pid, profile_to, profile_rate).start() if profile_to else None
        drain = wait_drained(client, timeout=600, alive=server.check_alive, cpu=server.cpu_seconds)
        profile = spy.stop() if spy else None
        counters.stop()
        drain.peak_rss = server.peak_rss()
        wait_for(lambda: _empty(client, worker), timeout=30, alive=server.check_alive,
                 what="the queue to be empty and every id acknowledged")
    client.delete(MARK_FIRST, MARK_LAST)
    run = LowkiqRun(enqueue, drain, counters, sizes.jobs, profile)
    log(f"lowkiq {scheduler} shards={shards_count} batch={batch_size}{' pinned' if cpus else ''}: enqueue {enqueue:.2f} s, "
        f"drain {drain.seconds:.2f} s = {run.jobs_per_second:,.0f} jobs/s")
    return run


def _empty(client: redis.Redis, worker: type[lowkiq.Worker]) -> bool:
    """Queue length 0, nothing in processing, processed == every job (the last acks ride on the next take)."""
    pipe = client.pipeline(transaction=False)
    for shard in worker.keys().shards():
        pipe.zcard(shard.ids_by_perform_in_zset)
        pipe.hlen(shard.processing_hash)
        pipe.hget(shard.counters_hash, "processed")
    replies = pipe.execute()
    length = sum(replies[0::3]) + sum(replies[1::3])
    return length == 0


def cost_breakdown(run: LowkiqRun) -> dict[str, Any]:
    """Where a job's time goes: server CPU, Redis CPU, commands and bytes, per job."""
    c, n = run.counters, run.jobs
    return {
        "server_cpu_us": run.drain.server_cpu / n * 1e6,
        "redis_cpu_us": c.cpu_seconds / n * 1e6,
        "evalsha_per_job": c.calls("evalsha") / n,
        "evalsha_us": c.usec_per_call("evalsha"),
        "commands_per_job": c.delta("total_commands_processed") / n,
        "bytes_in_per_job": c.delta("total_net_input_bytes") / n,
        "bytes_out_per_job": c.delta("total_net_output_bytes") / n,
        "probes_per_job": c.calls("zrange") / n,
    }
