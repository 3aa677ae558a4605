"""Item 4: lowkiq, RQ, Dramatiq, saq, streaq, arq and taskiq draining the same blank jobs, in one run, against one Redis."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import redis

from .. import ROOT
from ..common import MARK_FIRST, MARK_LAST, ItemResult, Sizes, log, median, spread, wait_drained
from ..lowkiq_side import drain_blank
from ..options import Options
from ..peers import runner as peers
from ..redis_server import RedisServer

BIN = Path(sys.executable).parent


@dataclass
class Other:
    enqueue: float
    drain: float
    jobs: int


def run(sizes: Sizes, options: Options) -> ItemResult:
    n, fork_n = sizes.rq_jobs, sizes.rq_fork_jobs
    result = ItemResult(4, "Side by side", f"the same Redis, one after another in each run: lowkiq (item 1's shape, "
                        f"{sizes.jobs:,} jobs, 5 threads, lag), RQ's SimpleWorker (`rq worker --burst --worker-class "
                        f"rq.worker.SimpleWorker`, {n:,} jobs), RQ's default forking worker ({fork_n:,} jobs, "
                        f"extrapolated), Dramatiq (Redis broker, 1 process × 5 threads, {n:,} jobs), then saq, streaq, arq "
                        f"and taskiq with taskiq-redis (1 worker process, 5 concurrent asyncio jobs, {n:,} jobs "
                        "each). Every job is a blank function; drain = first job start to last job end")
    lowkiq_runs, simple, forking, dramatiq = [], [], [], []
    asyncio_peers: dict[str, list[peers.PeerRun]] = {peer.label: [] for peer in peers.PEERS}
    with RedisServer() as redis_server:
        url = redis_server.url
        client = redis_server.client()
        for r in range(sizes.runs):
            log(f"item 4, run {r + 1}/{sizes.runs}: lowkiq")
            lowkiq_runs.append(drain_blank(url, sizes, scheduler="lag", shards_count=5, batch_size=1).drain.seconds)
            if r < sizes.others_runs:
                simple.append(_rq(client, url, n, "rq.worker.SimpleWorker"))
                forking.append(_rq(client, url, fork_n, "rq.worker.Worker"))
                dramatiq.append(_dramatiq(client, url, n))
                for peer in peers.PEERS:
                    asyncio_peers[peer.label].append(peers.run(peer, client, url, n))
    low = median(lowkiq_runs) / sizes.jobs  # seconds per job
    result.row("lowkiq drain, jobs/s", f"{1 / low:,.0f}", "", None)
    rows = [("RQ SimpleWorker", simple, ">= 5×"), ("RQ forking Worker (extrapolated)", forking, ""),
            ("Dramatiq, 5 threads", dramatiq, ""), *((label, runs, "") for label, runs in asyncio_peers.items())]
    fastest = ("", float("inf"))  # (name, seconds per job)
    for name, runs, target in rows:
        per = median([o.drain / o.jobs for o in runs])
        ratio = per / low
        result.row(f"{name}: drain of {runs[0].jobs:,} jobs, s", spread([o.drain for o in runs]))
        result.row(f"{name}: jobs/s", f"{1 / per:,.0f}")
        result.row(f"lowkiq / {name} throughput", f"{ratio:.1f}×", target,
                   None if sizes.smoke or not target else ratio >= 5)
        result.row(f"{name}: enqueue, s", spread([o.enqueue for o in runs]))
        fastest = min(fastest, (name, per), key=lambda f: f[1])
    ratio = fastest[1] / low
    result.row(f"lowkiq / fastest peer ({fastest[0]}, {1 / fastest[1]:,.0f} jobs/s) throughput", f"{ratio:.2f}×",
               ">= 1× (not slower)", None if sizes.smoke else ratio >= 1)
    if forking:
        per_fork = median([o.drain / o.jobs for o in forking])
        result.note(f"RQ's default worker forks a work horse per job: {per_fork * 1e3:.1f} ms per job measured on "
                    f"{fork_n:,} jobs, so {n:,} jobs would take about {per_fork * n:,.0f} s (extrapolated linearly, "
                    "not measured).")
    result.note(f"Lowkiq's figure here is the median of {len(lowkiq_runs)} drain(s) of {sizes.jobs:,} jobs in this "
                f"item's own Redis; RQ and Dramatiq ran {sizes.others_runs} time(s) each at this size (one RQ "
                "SimpleWorker drain of 100,000 jobs takes minutes). RQ uses its defaults (results kept 500 s); "
                "Dramatiq's actor has max_retries=0 and no result backend.")
    result.note("The asyncio peers (bench/peers/) drain as many jobs as RQ's SimpleWorker, as often as RQ and "
                "Dramatiq, each job a blank coroutine recording the same two marks as Dramatiq's actor: "
                + "; ".join(f"**{peer.version}**: {peer.how}" for peer in peers.PEERS) + ". The last row compares "
                "lowkiq with the fastest of all the peers above.")
    return result


def _env(url: str, expected: int) -> dict[str, str]:
    env = {**os.environ, "BENCH_REDIS_URL": url, "BENCH_EXPECTED": str(expected)}
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def _rq(client: redis.Redis, url: str, n: int, worker_class: str) -> Other:
    from rq import Queue

    client.flushall()
    queue = Queue("bench", connection=client)
    started = time.perf_counter()
    for start in range(0, n, 10_000):
        with client.pipeline() as pipe:
            queue.enqueue_many([Queue.prepare_data("bench.blank_jobs.blank", args=(i, n - 1))
                                for i in range(start, min(n, start + 10_000))], pipeline=pipe)
            pipe.execute()
    enqueue = time.perf_counter() - started
    log(f"RQ {worker_class.rsplit('.', 1)[1]}: {n:,} jobs enqueued in {enqueue:.2f} s; draining")
    subprocess.run([str(BIN / "rq"), "worker", "--burst", "--worker-class", worker_class, "--url", url,
                    "--logging_level", "WARNING", "bench"], env=_env(url, n), cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)
    first, last = client.mget(MARK_FIRST, MARK_LAST)
    other = Other(enqueue, float(last) - float(first), n)
    log(f"RQ {worker_class.rsplit('.', 1)[1]}: drain {other.drain:.2f} s = {n / other.drain:,.0f} jobs/s")
    return other


def _dramatiq(client: redis.Redis, url: str, n: int) -> Other:
    client.flushall()
    env = _env(url, n)
    # The producer side, in a child process: the actor module configures its broker at import.
    produce = ("import time, bench.dramatiq_app as app\n"
               "t = time.perf_counter()\n"
               f"for i in range({n}): app.blank.send(i)\n"
               "print(time.perf_counter() - t)\n")
    out = subprocess.run([sys.executable, "-c", produce], env=env, cwd=ROOT, check=True, capture_output=True, text=True)
    enqueue = float(out.stdout.strip().splitlines()[-1])
    log(f"Dramatiq: {n:,} messages sent in {enqueue:.2f} s; draining")
    worker = subprocess.Popen([str(BIN / "dramatiq"), "bench.dramatiq_app", "--processes", "1", "--threads", "5"],
                              env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        def alive() -> None:
            if worker.poll() is not None:
                raise RuntimeError(f"dramatiq exited with {worker.returncode}")

        drain = wait_drained(client, timeout=900, alive=alive)
    finally:
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
            worker.wait()
    log(f"Dramatiq: drain {drain.seconds:.2f} s = {n / drain.seconds:,.0f} jobs/s")
    return Other(enqueue, drain.seconds, n)
