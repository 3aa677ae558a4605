"""Item 10: more than one core, ``lowkiq -r app.py --processes N``.

Lowkiq's shape (blank jobs, batch_size 1, 5 threads per process; 10 shards, so
that two processes get five each) drained by one server process and by two
under one parent, in alternating order on one private redis-server. The queue
is paused while the processes start and agree on the shards, then resumed: the
drain measures serving, not joining. Each
process counts its own performs, so progress is seen from outside: the harness
polls the shards' processed counters every 10 ms and times the drain from the
moment every process holds its shards over three quarters of the jobs left. CPU is
the server processes' own (the parent's children included), from /proc.
"""

from __future__ import annotations

import os
import time

import redis

import lowkiq
from lowkiq.store import membership, pausing

from ..common import ItemResult, LowkiqServer, Sizes, log, median, spread, wait_for
from ..lowkiq_side import blank_worker, enqueue_blank
from ..options import Options
from ..redis_server import RedisServer

SHARDS = 10
THREADS = 5
POLL = 0.01
TIMED_SHARE = 0.75  # of the jobs left once every process serves
SETTLE = 1.5  # the default settle (1 s) and a heartbeat: the processes agree on who serves what


def variants() -> dict[str, tuple[int, tuple[str, ...]]]:
    """What each variant adds to `lowkiq -r`, and how many server processes it runs; --cpus holds each process
    to a CPU of its own (the first two this process may use)."""
    usable = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    out: dict[str, tuple[int, tuple[str, ...]]] = {"--processes 1": (1, ()), "--processes 2": (2, ())}
    if len(usable) >= 2:
        one, two = str(usable[0]), f"{usable[0]},{usable[1]}"
        out[f"--processes 1 --cpus {one}"] = (1, ("--cpus", one))
        out[f"--processes 2 --cpus {two}"] = (2, ("--cpus", two))
    return out


def run(sizes: Sizes, options: Options) -> ItemResult:
    result = ItemResult(10, "More than one core", f"{sizes.jobs:,} blank jobs, shards_count {SHARDS}, batch_size 1, "
                        f"{THREADS} threads per process, drained by `lowkiq -r` alone and with `--processes 2`, each "
                        f"also with `--cpus` (every process held to a CPU of its own), in turn, {sizes.runs} run(s) "
                        f"each; {os.cpu_count()} cores, shared with redis-server")
    chosen = variants()
    measured: dict[str, list[tuple[float, float]]] = {label: [] for label in chosen}
    with RedisServer() as redis_server:
        for n in range(sizes.runs):
            for label in (list(chosen) if n % 2 == 0 else list(reversed(chosen))):
                processes, extra = chosen[label]
                rate, cpu = _drain(redis_server.url, sizes, processes, extra)
                measured[label].append((rate, cpu))
                log(f"item 10, run {n + 1}: {label}: {rate:,.0f} jobs/s, {cpu:.1f} µs CPU per job")
    for label, runs in measured.items():
        result.row(f"{label}: drain, jobs/s", spread([r for r, _ in runs], "{:,.0f}"))
        result.row(f"{label}: server CPU per job, µs", spread([c for _, c in runs], "{:.1f}"))
    rate = {label: median([r for r, _ in runs]) for label, runs in measured.items()}
    for label in list(chosen)[1:]:
        result.row(f"{label} / --processes 1", f"{rate[label] / rate['--processes 1']:.2f}×")
    result.note("On this 2-core machine redis-server, the server processes and the harness share the two cores: "
                "a second process can only use what Redis leaves of the second core, so the gain here is a floor; "
                "with Redis on its own host each process adds close to a core.")
    return result


def _drain(url: str, sizes: Sizes, processes: int, extra: tuple[str, ...] = ()) -> tuple[float, float]:
    client = redis.Redis.from_url(url)
    client.flushall()
    worker = blank_worker(SHARDS, 1)
    runtime = lowkiq.configure(workers=[worker], redis_url=url)
    try:
        enqueue_blank(worker, sizes.jobs, sizes.slice)
    finally:
        runtime.close()
    counters = [shard.counters_hash for shard in worker.keys().shards()]
    # The app's own end mark needs one process to see every job: set it out of reach.
    env = {"BENCH_EXPECTED": str(sizes.jobs * 10), "BENCH_SHARDS_COUNT": str(SHARDS), "BENCH_BATCH_SIZE": "1"}
    # Paused until every process is up and agrees on the shards: the drain measures serving, not joining.
    pausing.pause(client, worker.queue_name, worker=worker.__name__, who="bench", source="cli")
    with LowkiqServer("blank", url, threads=THREADS, env=env, args=["--processes", str(processes), *extra]) as server:
        wait_for(lambda: len(membership.live(client)) == processes, timeout=60, alive=server.check_alive,
                 what=f"{processes} live server processes")
        time.sleep(SETTLE)
        pausing.resume(client, worker.queue_name, worker=worker.__name__, who="bench", source="cli")
        # Timed from the moment every process holds its shards (each sees the resume at its own next
        # heartbeat, up to a second apart) over three quarters of what is left: before any runs dry.
        wait_for(lambda: _all_serving(client, processes), timeout=60, alive=server.check_alive,
                 what="every process holding shards")
        start = (time.time(), server.cpu_seconds(), _processed(client, counters))
        target = start[2] + (sizes.jobs - start[2]) * TIMED_SHARE
        deadline = time.monotonic() + 600
        while (done := _processed(client, counters)) < target:
            server.check_alive()
            if time.monotonic() > deadline:
                raise TimeoutError("the queue did not drain in 600 s")
            time.sleep(POLL)
        end = (time.time(), server.cpu_seconds(), done)
        wait_for(lambda: _processed(client, counters) >= sizes.jobs, timeout=600, alive=server.check_alive,
                 what="every job processed")
    jobs = max(1, end[2] - start[2])
    return jobs / max(end[0] - start[0], 1e-6), (end[1] - start[1]) / jobs * 1e6


def _all_serving(client: redis.Redis, processes: int) -> bool:
    live = membership.live(client)
    return len(live) == processes and all(m.shards.get("BlankWorker") for m in live)


def _processed(client: redis.Redis, counters: list[str]) -> int:
    pipe = client.pipeline(transaction=False)
    for key in counters:
        pipe.hget(key, "processed")
    return sum(int(v or 0) for v in pipe.execute())
