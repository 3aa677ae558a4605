"""Run one peer of item 4: enqueue N blank jobs from a producer process, then drain them.

Everything queued first, then one worker started (a process, or the process
manager the peer's CLI starts); drain = first job start to last job end, from
the marks the jobs leave in Redis. The worker runs in its own process group
(taskiq's CLI forks its worker, RQ's worker-pool and Dramatiq's CLI start
several), killed with its whole group on the way out whatever happened, and
every wait is bounded. Each peer is set up for throughput as its own
documentation describes (docs/benchmarks.md says how and where, per peer).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

import redis

from .. import ROOT
from ..common import log, wait_drained
from . import arq_env

BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Peer:
    name: str
    label: str                                # the item's rows
    dists: tuple[str, ...]                    # what the note names the versions of
    module: str
    python: Callable[[], str]
    worker: Callable[[str, str], list[str]]   # the worker's command, given the interpreter and the Redis URL
    how: str                                  # for the item's note
    produce: str = "app.produce({n})"
    few: bool = False                         # drains sizes.rq_fork_jobs, not sizes.rq_jobs (RQ's forking worker)

    @property
    def version(self) -> str:
        return " + ".join(f"{dist} {_version(dist)}" for dist in self.dists)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:  # arq: only in its own virtualenv
        return next((pin.split("==")[1] for pin in arq_env.PINS if pin.split("==")[0] == dist), "?")


def _api(module: str) -> Callable[[str, str], list[str]]:
    return lambda python, _: [python, "-c", f"import {module} as app; app.work()"]


def _rq(*options: str) -> Callable[[str, str], list[str]]:
    return lambda _, url: [str(BIN / "rq"), *options, "--url", url, "bench"]


RQ_QUIET = ("--logging_level", "WARNING", "--quiet", "--disable-job-desc-logging")
RQ = (
    Peer("RQ SimpleWorker", "RQ SimpleWorker", ("rq",), "bench.peers.rq_jobs", lambda: sys.executable,
         _rq("worker", "--worker-class", "rq.worker.SimpleWorker", *RQ_QUIET),
         "`rq worker --worker-class rq.worker.SimpleWorker --logging_level WARNING --quiet "
         "--disable-job-desc-logging`: the worker RQ's performance notes (docs/benchmark.md) name for jobs of a few "
         "milliseconds, no fork per job; jobs enqueued with `result_ttl=0` (no result kept; the default keeps it "
         "500 s) by `Queue.enqueue_many` in pipelines of 10,000"),
    Peer("RQ SimpleWorker × 2", "RQ worker-pool, 2 SimpleWorkers", ("rq",), "bench.peers.rq_jobs", lambda: sys.executable,
         _rq("worker-pool", "--num-workers", "2", "--worker-class", "rq.worker.SimpleWorker", "--logging-level",
             "WARNING", "--quiet"),
         "`rq worker-pool --num-workers 2 --worker-class rq.worker.SimpleWorker`, one worker per core (RQ's way of "
         "running several workers from one command); the jobs count themselves in Redis (one INCR each)",
         produce="app.produce({n}, counted=True)"),
    Peer("RQ forking Worker", "RQ forking Worker (extrapolated)", ("rq",), "bench.peers.rq_jobs", lambda: sys.executable,
         _rq("worker", "--worker-class", "rq.worker.Worker", *RQ_QUIET),
         "RQ's default `Worker`, a fork per job, for scale", few=True),
)
DRAMATIQ = (
    Peer("Dramatiq 1×5", "Dramatiq, 1 process × 5 threads", ("dramatiq",), "bench.peers.dramatiq_app",
         lambda: sys.executable,
         lambda _, __: [str(BIN / "dramatiq"), "bench.peers.dramatiq_app", "--processes", "1", "--threads", "5"],
         "`dramatiq bench.peers.dramatiq_app --processes 1 --threads 5`, the same concurrency as lowkiq's 5 threads"),
    Peer("Dramatiq 2×8", "Dramatiq, CLI defaults (2 processes × 8 threads)", ("dramatiq",), "bench.peers.dramatiq_app",
         lambda: sys.executable, lambda _, __: [str(BIN / "dramatiq"), "bench.peers.dramatiq_app"],
         "`dramatiq bench.peers.dramatiq_app`: the CLI's defaults, one process per core (2 here) × 8 threads, "
         "each thread prefetching 2 messages; the jobs count themselves in Redis (one INCR each)",
         produce="app.produce({n}, counted=True)"),
)
ASYNCIO = (
    Peer("saq", "saq", ("saq",), "bench.peers.saq_app", lambda: sys.executable,
         lambda _, __: [str(BIN / "saq"), "bench.peers.saq_app.settings", "--workers", "1"],
         "`saq bench.peers.saq_app.settings --workers 1`, concurrency 5, Redis queue; jobs enqueued one by one "
         "(`await queue.enqueue`: saq has no bulk enqueue) with `ttl=-1` (the finished job is deleted; the "
         "default keeps it and its result 600 s)"),
    Peer("streaq", "streaq", ("streaq",), "bench.peers.streaq_app", lambda: sys.executable, _api("bench.peers.streaq_app"),
         "`Worker(concurrency=5).run_sync()` in one process (its CLI `streaq run` logs every task at INFO), "
         "tasks declared with `ttl=0` (no result stored; the default keeps each 5 minutes); enqueue with "
         "`worker.enqueue_many`, 10,000 tasks per pipeline"),
    Peer("arq", "arq", ("arq",), "bench.peers.arq_app", arq_env.python, _api("bench.peers.arq_app"),
         "`arq.run_worker` in one process (its CLI logs every job at INFO), `max_jobs=5`, `poll_delay=0` "
         "(the default 0.5 s, with at most 100 job ids read per poll, held it to about 220 jobs/s), "
         "`keep_result=0` (no result written; the default keeps each 3,600 s); enqueue one by one "
         "(`await enqueue_job`: arq has no bulk enqueue). arq 0.28.0 requires redis<6, so it runs in its own "
         "virtualenv with redis-py 5.3.1"),
    Peer("taskiq", "taskiq + taskiq-redis", ("taskiq", "taskiq-redis"), "bench.peers.taskiq_app", lambda: sys.executable,
         lambda _, __: [str(BIN / "taskiq"), "worker", "bench.peers.taskiq_app:broker", "--workers", "1",
                        "--max-async-tasks", "5", "--log-level", "WARNING"],
         "`taskiq worker --workers 1 --max-async-tasks 5 --log-level WARNING` (at INFO it logs every task) on "
         "taskiq-redis's `RedisStreamBroker` (acknowledged messages), no result backend (taskiq's default); "
         "enqueue one by one (`await task.kiq`: taskiq has no bulk send)"),
)
PEERS = (*RQ, *DRAMATIQ, *ASYNCIO)


@dataclass
class PeerRun:
    enqueue: float
    drain: float
    jobs: int


def run(peer: Peer, client: redis.Redis, url: str, n: int) -> PeerRun:
    client.flushall()
    env = {**os.environ, "BENCH_REDIS_URL": url, "BENCH_EXPECTED": str(n)}
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    python = peer.python()
    produced = subprocess.run([python, "-c", f"import {peer.module} as app; {peer.produce.format(n=n)}"], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
    if produced.returncode != 0:
        raise RuntimeError(f"{peer.name}'s producer exited with {produced.returncode}:\n{produced.stderr[-3000:]}")
    enqueue = float(produced.stdout.strip().splitlines()[-1])
    log(f"{peer.name}: {n:,} jobs enqueued in {enqueue:.2f} s; draining")
    with tempfile.TemporaryFile() as stderr:
        worker = subprocess.Popen(peer.worker(python, url), env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr,
                                  start_new_session=True)
        try:
            def alive() -> None:
                if worker.poll() is not None:
                    stderr.seek(0)
                    tail = stderr.read().decode(errors="replace")[-3000:]
                    raise RuntimeError(f"{peer.name}'s worker exited with {worker.returncode}:\n{tail}")

            drain = wait_drained(client, timeout=min(900, 60 + n / 100), alive=alive)
        finally:
            _stop(worker)
    log(f"{peer.name}: drain {drain.seconds:.2f} s = {n / drain.seconds:,.0f} jobs/s")
    return PeerRun(enqueue, drain.seconds, n)


def _stop(worker: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the worker, then SIGKILL to its whole group: taskiq's process manager outlives a SIGTERM."""
    if worker.poll() is None:
        worker.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            worker.wait(5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(worker.pid, signal.SIGKILL)
    worker.wait()
