"""I/O-bound work on async workers: ``python -m bench.async_io [--versions N] [--ids K] [--rounds R] [--smoke]``.

bench.ordering's measurement (bench/peers/marks.py: every version applied with one script, a version older
than the one its id holds counted out of order), with I/O-bound jobs: ``--versions`` (10,000) versions over
``--ids`` (1,000) ids, Zipf-like, each job ``await asyncio.sleep(0.05)`` before it applies its version. A
producer process sends them one by one while the worker runs. Everyone at concurrency 200 on one process:
lowkiq's async worker (500 shards, batch_size 1, ``concurrency`` 200, two server threads; a perform gets
every version of its id queued so far, awaits the newest one's work once and records each, in order:
bench/apps/async_io.py), arq (``max_jobs`` 200), saq (``concurrency`` 200) and taskiq
(``--max-async-tasks`` 200). The contenders' order is reversed every other round.

Reported per contender and round: versions applied out of order, ids left at an older version, seconds from
the first version sent to the last applied, jobs/s (versions over those seconds), and how long the producer
took to send. ``--smoke`` runs 300 versions over 30 ids. ``--drain N`` measures lowkiq's server alone instead: N
distinct ids (no merging: each one a perform of 50 ms) queued before the server starts, then drained at
concurrency 200; jobs/s, the server's CPU per job and Redis's (``INFO commandstats``), ``--rounds`` times.
``--batch N`` sends the versions N at a time: lowkiq's producer in one ``perform_async`` call of N jobs (its bulk
enqueue), the peers' as N sends awaited together with ``asyncio.gather`` (none of arq, saq, taskiq has a bulk
enqueue); a burst's versions of one id may then reach a peer's queue in any order.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys

from .common import LowkiqServer, log
from .ordering import Contender, Outcome, _module, _taskiq, disordered, run_rounds, versions
from .peers import arq_env

CONCURRENCY = 200
SHARDS = 500
WORK_MS = 50.0

CONTENDERS = (
    Contender("lowkiq", f"async worker: {SHARDS} shards, concurrency {CONCURRENCY}, batch_size 1, 2 threads",
              "bench.async_io", lambda _, __: [], concurrency=CONCURRENCY, app="async_io", threads=2),
    Contender("arq", f"max_jobs {CONCURRENCY}", "bench.peers.arq_app", _module("bench.peers.arq_app"), arq_env.python,
              concurrency=CONCURRENCY),
    Contender("saq", f"concurrency {CONCURRENCY}", "bench.peers.saq_app",
              lambda _, __: [sys.executable.rsplit("/", 1)[0] + "/saq", "bench.peers.saq_app.settings", "--workers",
                             "1"], concurrency=CONCURRENCY),
    Contender("taskiq", f"--max-async-tasks {CONCURRENCY}", "bench.peers.taskiq_app", _taskiq(CONCURRENCY),
              concurrency=CONCURRENCY),
)


def produce_versions(path: str) -> None:
    """lowkiq's producer: one ``perform_async`` per version, score = version (a subprocess, as the peers')."""
    import lowkiq

    from .peers.marks import send_versions

    worker = type("AsyncIoWorker", (lowkiq.Worker,), {"shards_count": SHARDS, "batch_size": 1, "__module__": __name__,
                                                      "perform": lambda self, payloads_by_id: None})
    runtime = lowkiq.configure(workers=[worker], redis_url=os.environ["BENCH_REDIS_URL"])
    try:
        send_versions(lambda job_id, version, work: worker.perform_async(
            [{"id": job_id, "payload": {"v": version, "w": work}, "score": version}]), path,
            lambda batch: worker.perform_async([{"id": job_id, "payload": {"v": version, "w": work}, "score": version}
                                                for job_id, version, work in batch]))
    finally:
        runtime.close()


def table(outcomes: dict[Contender, list[Outcome]], total: int, ids: int, rounds: int, batch: int = 1) -> str:
    sending = "sent one by one" if batch == 1 else (f"sent {batch} at a time (lowkiq: one perform_async call; the "
                                                    f"peers: {batch} sends awaited together)")
    lines = [f"{total:,} versions over {ids:,} ids (Zipf-like), each job awaiting {WORK_MS:.0f} ms, {sending} "
             f"while the worker runs; {rounds} round(s), the contenders' order reversed every other round; every "
             "round's figures",
             "",
             "| queue | set up | versions applied out of order | ids left at an older version | seconds, first sent "
             "to last applied | jobs/s | sending took, s |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    for contender, runs in outcomes.items():
        lines.append(f"| {contender.name} | {contender.setup} | {', '.join(f'{o.out_of_order:,}' for o in runs)} | "
                     f"{', '.join(str(o.left_older) for o in runs)} | {', '.join(f'{o.seconds:.2f}' for o in runs)} | "
                     f"{', '.join(f'{total / o.seconds:,.0f}' for o in runs)} | "
                     f"{', '.join(f'{o.sending:.2f}' for o in runs)} |")
    return "\n".join(lines)


def drain(count: int) -> tuple[float, float, float]:
    """``count`` distinct ids queued, then drained by lowkiq's async worker: (jobs/s, server CPU µs per job,
    Redis CPU µs per job). Timed from the first version applied to the last (bench:applied's count)."""
    import time

    import lowkiq

    from .peers.marks import APPLIED
    from .redis_server import RedisServer

    with RedisServer() as redis_server:
        os.environ["BENCH_REDIS_URL"] = redis_server.url
        worker = type("AsyncIoWorker", (lowkiq.Worker,), {"shards_count": SHARDS, "batch_size": 1,
                                                          "__module__": __name__,
                                                          "perform": lambda self, payloads_by_id: None})
        runtime = lowkiq.configure(workers=[worker], redis_url=redis_server.url)
        try:
            jobs = [{"id": f"d{n}", "payload": {"v": 1, "w": WORK_MS}} for n in range(count)]
            for start in range(0, count, 1_000):
                worker.perform_async(jobs[start : start + 1_000])
        finally:
            runtime.close()
        client = redis_server.client()
        client.config_resetstat()
        with LowkiqServer("async_io", redis_server.url, threads=2,
                          env={"BENCH_REDIS_URL": redis_server.url}) as server:
            deadline = time.monotonic() + 300
            first = None
            while (applied := int(client.get(APPLIED) or 0)) < count:
                if applied and first is None:
                    first = time.perf_counter()
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the server applied {applied:,} of {count:,} in 300 s")
                server.check_alive()
                time.sleep(0.005)
            seconds = time.perf_counter() - (first or time.perf_counter())
            cpu = server.ps.cpu_times()
            used = sum(stats["usec"] for name, stats in client.info("commandstats").items()
                       if name == "cmdstat_evalsha")
        return count / max(seconds, 1e-9), (cpu.user + cpu.system) / count * 1e6, used / count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.async_io", description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", type=int, default=10_000)
    parser.add_argument("--ids", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", default="", help="contenders by name, e.g. lowkiq,arq (default all)")
    parser.add_argument("--smoke", action="store_true", help="300 versions over 30 ids: only checks that it works")
    parser.add_argument("--batch", type=int, default=1,
                        help="the producers send this many versions at a time: lowkiq in one perform_async call, "
                             "the peers (no bulk enqueue) as that many sends awaited together (default 1: one by one)")
    parser.add_argument("--drain", type=int, default=0, metavar="N",
                        help="lowkiq's server alone: N distinct ids queued beforehand, drained at concurrency 200")
    args = parser.parse_args(argv)
    if args.drain:
        for _ in range(args.rounds):
            rate, server_us, redis_us = drain(args.drain)
            log(f"drained {args.drain:,} ids at {rate:,.0f} jobs/s; the server's CPU {server_us:,.0f} µs per job "
                f"(its start included), Redis's scripts {redis_us:,.1f} µs per job; load {os.getloadavg()[0]:.2f}")
        return 0
    os.environ["BENCH_PRODUCER_BATCH"] = str(args.batch)  # read by every producer (bench/peers/marks.py)
    total, ids = (300, 30) if args.smoke else (args.versions, args.ids)
    wanted = {name.strip() for name in args.only.split(",") if name.strip()}
    chosen = [c for c in CONTENDERS if not wanted or c.name in wanted]
    sent = [(job_id, version, WORK_MS) for job_id, version, _ in versions(total, ids)]
    outcomes = run_rounds(chosen, sent, args.rounds)
    print()
    print(table(outcomes, total, ids, args.rounds, args.batch))
    if disordered(outcomes):
        return 1
    log("median jobs/s: " + ", ".join(f"{c.name} {statistics.median(total / o.seconds for o in runs):,.0f}"
                                       for c, runs in outcomes.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
