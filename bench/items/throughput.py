"""Items 1 and 2: Lowkiq's own benchmark shape, then batched."""

from __future__ import annotations

import os
from pathlib import Path

from .. import floor, script_cost
from ..common import ItemResult, Sizes, human_bytes, log, median, spread
from ..lowkiq_side import LowkiqRun, cost_breakdown, drain_blank
from ..options import Options
from ..redis_server import RedisServer

OUT = Path(__file__).resolve().parents[1] / "out"


def item1(sizes: Sizes, options: Options) -> ItemResult:
    result = ItemResult(1, "Lowkiq's shape", f"{sizes.jobs:,} jobs, ids 0..{sizes.jobs - 1}, payload str(i), "
                        f"enqueued in slices of {sizes.slice:,}; one `lowkiq` process, 5 threads, shards_count 5, "
                        "batch_size 1, empty perform; drain = first perform start to last perform end")
    by_scheduler: dict[str, list[LowkiqRun]] = {}
    with RedisServer() as redis_server:
        for run in range(sizes.runs):
            for scheduler in ("lag", "seq"):
                log(f"item 1, run {run + 1}/{sizes.runs}, scheduler {scheduler}")
                by_scheduler.setdefault(scheduler, []).append(
                    drain_blank(redis_server.url, sizes, scheduler=scheduler, shards_count=5, batch_size=1))
        enqueue = [r.enqueue for runs in by_scheduler.values() for r in runs]
        result.row("enqueue 100,000 jobs, s" if not sizes.smoke else f"enqueue {sizes.jobs:,} jobs, s",
                   spread(enqueue), "<= 0.5 s", _check(sizes, median(enqueue) <= 0.5))
        result.row("enqueue, jobs/s", f"{sizes.jobs / median(enqueue):,.0f}")
        for scheduler, runs in by_scheduler.items():
            seconds = [r.drain.seconds for r in runs]
            target = scheduler == "lag"
            result.row(f"drain, scheduler {scheduler}, s", spread(seconds),
                       "<= 5 s" if target else "", _check(sizes, median(seconds) <= 5) if target else None)
            rate = sizes.jobs / median(seconds)
            result.row(f"drain, scheduler {scheduler}, jobs/s", f"{rate:,.0f}",
                       ">= 20,000" if target else "", _check(sizes, rate >= 20_000) if target else None)
            result.row(f"drain, scheduler {scheduler}, µs/job", f"{median(seconds) / sizes.jobs * 1e6:.1f}")
        # The same drains with Redis and the server each pinned to its own core: the kernel
        # otherwise moves the server's five threads onto Redis's core now and then, and a
        # batch_size 1 drain swings by 2x from run to run. Not the verdict, an explanation.
        usable = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if len(usable) >= 2:
            server_cpu, redis_cpu = usable[:2]
            with RedisServer(cpus={redis_cpu}) as pinned_redis:
                pinned = [drain_blank(pinned_redis.url, sizes, scheduler="lag", shards_count=5, batch_size=1, cpus={server_cpu})
                          for _ in range(sizes.runs)]
            seconds = [r.drain.seconds for r in pinned]
            result.row(f"drain, lag, Redis on CPU {redis_cpu} and server on CPU {server_cpu}, s", spread(seconds))
            result.row("drain, lag, pinned, jobs/s", f"{sizes.jobs / median(seconds):,.0f}")
            pinned_costs = [cost_breakdown(r) for r in pinned]
            # The product's own way to the same: `lowkiq -r ... --cpus N`, Redis left where the kernel puts it.
            held = [drain_blank(redis_server.url, sizes, scheduler="lag", shards_count=5, batch_size=1,
                                server_args=["--cpus", str(server_cpu)]) for _ in range(sizes.runs)]
            held_costs = [cost_breakdown(r) for r in held]
            result.row(f"drain, lag, server started with `--cpus {server_cpu}` (Redis not held), s",
                       spread([r.drain.seconds for r in held]))
            result.row(f"drain, lag, `--cpus {server_cpu}`, jobs/s",
                       f"{sizes.jobs / median([r.drain.seconds for r in held]):,.0f}")
            result.row(f"server CPU per job during the `--cpus {server_cpu}` drain, µs",
                       spread([c["server_cpu_us"] for c in held_costs], "{:.1f}"))
            result.row("server CPU per job during the pinned drain (all threads on one core), µs",
                       spread([c["server_cpu_us"] for c in pinned_costs], "{:.1f}"))
            result.row("Redis CPU in scripts per job during the pinned drain, µs",
                       spread([c["evalsha_us"] * c["evalsha_per_job"] for c in pinned_costs], "{:.1f}"))
        peak = max(r.drain.peak_rss for runs in by_scheduler.values() for r in runs)
        result.row("server peak RSS (VmHWM)", human_bytes(peak))
        calls = max(2_000, sizes.jobs // 2)
        for mode in floor.MODES:
            for threads in (5, 1):
                rate = floor.evalsha_calls_per_second(redis_server.url, threads=threads, calls=calls, mode=mode)
                result.row(f"floor: no-op EVALSHA, {mode}, {threads} thread{'s' if threads > 1 else ''}, calls/s",
                           f"{rate:,.0f}")
        costs = [cost_breakdown(r) for r in by_scheduler["lag"]]
        script_us = [c["evalsha_us"] * c["evalsha_per_job"] for c in costs]
        result.row("Redis CPU in scripts per job during the drain (lag), µs", spread(script_us, "{:.1f}"),
                   "<= 10 µs", _check(sizes, median(script_us) <= 10))
        alone = [script_cost.measure(redis_server.url, redis_server.client(), min(sizes.jobs, 20_000), 1)
                 for _ in range(sizes.runs)]
        result.row("Redis CPU per `ack_and_take` call, one thread alone on a warm Redis, µs",
                   spread([a["usec_per_call"] for a in alone], "{:.1f}"))
        server_us = [c["server_cpu_us"] for c in costs]
        result.row("server CPU per job during the drain (lag, all threads), µs", spread(server_us, "{:.1f}"),
                   "<= 15 µs", _check(sizes, median(server_us) <= 15))
        bare = [floor.round_trip_cpu(redis_server.url, calls=min(sizes.jobs, 20_000)) for _ in range(sizes.runs)]
        result.row("floor: one round trip on a bare socket (no-op EVALSHA), client CPU, µs",
                   spread([b["client_cpu_us"] for b in bare], "{:.1f}"))
        result.row("floor: the same round trip, Redis CPU, µs", spread([b["redis_cpu_us"] for b in bare], "{:.1f}"))
        # The same, from five threads at once, with Redis as busy per call as with ack_and_take: the
        # floor a server's five threads stand on (a blocked recv costs more than a ready one).
        hot_us = median([a["usec_per_call"] for a in alone])
        threaded = [floor.threads_round_trip_cpu(redis_server.url, threads=5, calls=min(sizes.jobs, 50_000),
                                                 script_usec=hot_us) for _ in range(sizes.runs)]
        result.row(f"floor: 5 threads, a round trip each on a bare socket, a script of {hot_us:.0f} µs "
                   "(as `ack_and_take`), client CPU per call, µs", spread([t["client_cpu_us"] for t in threaded], "{:.1f}"))
        result.row("floor: the same, calls/s", f"{median([t['calls_per_s'] for t in threaded]):,.0f}")
        _explain(result, by_scheduler["lag"], "lag, batch_size 1")
        if _wants_profile(result, options):
            _profile(result, redis_server.url, sizes, scheduler="lag", shards_count=5, batch_size=1, tag="item1")
    return result


def item2(sizes: Sizes, options: Options) -> ItemResult:
    result = ItemResult(2, "Batched", "as item 1 with batch_size 100 and shards_count 24 (lag scheduler)")
    runs: list[LowkiqRun] = []
    with RedisServer() as redis_server:
        for run in range(sizes.runs):
            log(f"item 2, run {run + 1}/{sizes.runs}")
            runs.append(drain_blank(redis_server.url, sizes, scheduler="lag", shards_count=24, batch_size=100))
        seconds = [r.drain.seconds for r in runs]
        rate = sizes.jobs / median(seconds)
        result.row("drain, s", spread(seconds))
        result.row("drain, jobs/s", f"{rate:,.0f}", ">= 100,000", _check(sizes, rate >= 100_000))
        result.row("drain, µs/job", f"{median(seconds) / sizes.jobs * 1e6:.1f}")
        result.row("enqueue, s", spread([r.enqueue for r in runs]))
        result.row("server peak RSS (VmHWM)", human_bytes(max(r.drain.peak_rss for r in runs)))
        _explain(result, runs, "lag, batch_size 100, 24 shards")
        if _wants_profile(result, options):
            _profile(result, redis_server.url, sizes, scheduler="lag", shards_count=24, batch_size=100, tag="item2")
    return result


def _check(sizes: Sizes, ok: bool) -> bool | None:
    """Targets are for the full sizes; a smoke run shows no verdict."""
    return None if sizes.smoke else ok


def _wants_profile(result: ItemResult, options: Options) -> bool:
    if options.profile == "never":
        return False
    return options.profile == "always" or any(r.ok is False for r in result.rows)


def _explain(result: ItemResult, runs: list[LowkiqRun], label: str) -> None:
    """Median per-job costs: what the server process and Redis each spend, and what travels."""
    costs = [cost_breakdown(r) for r in runs]

    def med(key: str) -> float:
        return median([c[key] for c in costs])

    wall = median([r.us_per_job for r in runs])
    if label == "lag, batch_size 1":
        result.note("The floor rows: threads of one Python process calling a no-op Lua script with a shard's 11 "
                    "keys through redis-py and nothing else (bench/floor.py, best of 3 tries): `command` is "
                    "`execute_command`, `packed` sends a pre-packed command and reads the reply on the thread's "
                    "connection, `pipelined` sends five scripts per round trip. A batch_size 1 drain is at least "
                    "one round trip per job plus lowkiq's own work, so `packed` bounds it from above. The "
                    "5-thread bare-socket rows are the client CPU a server's five threads cannot go below at "
                    "batch_size 1 (one round trip per job, a script as long as the hot one, nothing else): "
                    "what a drain spends above it is lowkiq's own work per job.")
    result.note(
        f"Per job ({label}, medians): wall {wall:.1f} µs; server process CPU {med('server_cpu_us'):.1f} µs "
        f"(all threads; one GIL, so at most one core of Python); Redis CPU {med('redis_cpu_us'):.1f} µs, "
        f"of which EVALSHA {med('evalsha_per_job'):.2f} calls × {med('evalsha_us'):.1f} µs; "
        f"bytes to Redis {med('bytes_in_per_job'):.0f}, from Redis {med('bytes_out_per_job'):.0f}."
    )
    top = runs[len(runs) // 2].counters.top(8)
    lines = ["| Redis command (incl. inside scripts) | calls | µs total | µs/call |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {name} | {calls:,} | {usec:,.0f} | {per:.2f} |" for name, calls, usec, per in top]
    result.note(f"`INFO commandstats` during one drain ({label}):\n\n" + "\n".join(lines))
    slow = runs[len(runs) // 2].counters.slowlog(3)
    if slow:
        entries = "; ".join(f"{e['duration']} µs `{' '.join(_text(a) for a in e['command'][:1])}`" for e in slow)
        result.note(f"SLOWLOG (entries over the 10 ms default threshold): {entries}")
    else:
        result.note("SLOWLOG: empty (no command over 10 ms).")


def _text(value: object) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _profile(result: ItemResult, url: str, sizes: Sizes, *, scheduler: str, shards_count: int, batch_size: int,
             tag: str) -> None:
    log(f"{tag}: one more drain under py-spy (not timed)")
    run = drain_blank(url, sizes, scheduler=scheduler, shards_count=shards_count, batch_size=batch_size,
                      profile_to=str(OUT / f"{tag}-{scheduler}-pyspy.txt"), profile_rate=1000 if batch_size > 1 else 200)
    if run.profile is None:
        result.note("py-spy is not installed (`pip install py-spy`): no profile.")
        return
    result.note(f"Profile of the server during a drain ({run.drain.seconds:.1f} s under py-spy):\n\n"
                + run.profile.markdown())
