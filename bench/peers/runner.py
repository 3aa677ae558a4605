"""Run one asyncio peer of item 4: enqueue N blank jobs from a producer process, then drain them.

Like the RQ and Dramatiq runs of bench/items/others.py: everything queued
first, then one worker process started; drain = first job start to last job
end, from the marks the jobs leave in Redis. The worker runs in its own
process group (taskiq's CLI forks its worker), killed with its whole group
on the way out whatever happened, and every wait is bounded.
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
    label: str                           # the item's rows
    dists: tuple[str, ...]               # what the note names the versions of
    module: str
    python: Callable[[], str]
    worker: Callable[[str], list[str]]   # the worker's command, given the interpreter
    how: str                             # for the item's note

    @property
    def version(self) -> str:
        return " + ".join(f"{dist} {_version(dist)}" for dist in self.dists)


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:  # arq: only in its own virtualenv
        return next((pin.split("==")[1] for pin in arq_env.PINS if pin.split("==")[0] == dist), "?")


def _api(module: str) -> Callable[[str], list[str]]:
    return lambda python: [python, "-c", f"import {module} as app; app.work()"]


PEERS = (
    Peer("saq", "saq", ("saq",), "bench.peers.saq_app", lambda: sys.executable,
         lambda _: [str(BIN / "saq"), "bench.peers.saq_app.settings", "--workers", "1"],
         "`saq bench.peers.saq_app.settings --workers 1`, concurrency 5, Redis queue; enqueue one by one "
         "(`await queue.enqueue`: saq has no bulk enqueue); saq's defaults otherwise (results kept 600 s)"),
    Peer("streaq", "streaq", ("streaq",), "bench.peers.streaq_app", lambda: sys.executable, _api("bench.peers.streaq_app"),
         "`Worker(concurrency=5).run_sync()` in one process (its CLI `streaq run` logs every task at INFO); "
         "enqueue with `worker.enqueue_many`, 10,000 tasks per pipeline; streaq's defaults otherwise"),
    Peer("arq", "arq", ("arq",), "bench.peers.arq_app", arq_env.python, _api("bench.peers.arq_app"),
         "`arq.run_worker` in one process (its CLI logs every job at INFO), `max_jobs=5`, `poll_delay=0` "
         "(the default 0.5 s, with at most 100 job ids read per poll, held it to about 220 jobs/s); enqueue one "
         "by one (`await enqueue_job`: arq has no bulk enqueue); results kept 3,600 s (default). arq 0.28.0 "
         "requires redis<6, so it runs in its own virtualenv with redis-py 5.3.1"),
    Peer("taskiq", "taskiq + taskiq-redis", ("taskiq", "taskiq-redis"), "bench.peers.taskiq_app", lambda: sys.executable,
         lambda _: [str(BIN / "taskiq"), "worker", "bench.peers.taskiq_app:broker", "--workers", "1",
                    "--max-async-tasks", "5", "--log-level", "WARNING"],
         "`taskiq worker --workers 1 --max-async-tasks 5` on taskiq-redis's `RedisStreamBroker` (acknowledged "
         "messages), no result backend; enqueue one by one (`await task.kiq`: taskiq has no bulk send)"),
)


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
    produced = subprocess.run([python, "-c", f"import {peer.module} as app; app.produce({n})"], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
    if produced.returncode != 0:
        raise RuntimeError(f"{peer.name}'s producer exited with {produced.returncode}:\n{produced.stderr[-3000:]}")
    enqueue = float(produced.stdout.strip().splitlines()[-1])
    log(f"{peer.name}: {n:,} jobs enqueued in {enqueue:.2f} s; draining")
    with tempfile.TemporaryFile() as stderr:
        worker = subprocess.Popen(peer.worker(python), env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=stderr,
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
