"""How soon a server serves after it starts: ``python -m bench.startup [--runs N]``.

On a private redis-server, one job is enqueued, then ``lowkiq -r bench/apps/startup_app.py`` is started as
a real process; the job's perform writes the time it began. Reported: seconds from the process's start
to the first perform (the whole start: Python, imports, the app, the first heartbeat, the leases, the
take), median and range of ``--runs``; then the same for a rolling restart: a second server is started,
the first is stopped with SIGTERM, and a job enqueued when the first has exited is timed until it runs
on the second (how long its shards went unserved).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import lowkiq

from . import ROOT
from .redis_server import RedisServer

APP = Path(ROOT) / "bench" / "apps" / "startup_app.py"


def start(url: str, marks: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LOWKIQ_REDIS_URL": url, "STARTUP_MARKS": str(marks)}
    return subprocess.Popen([sys.executable, "-m", "lowkiq.cli", "-r", str(APP)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_mark(marks: Path, job_id: str, timeout: float = 30) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if marks.exists():
            for line in marks.read_text().splitlines():
                name, _, at = line.partition(" ")
                if name == job_id:
                    return float(at)
        time.sleep(0.002)
    raise RuntimeError(f"job {job_id} did not run within {timeout} s")


def stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    process.wait(30)


def measure(runs: int) -> tuple[list[float], list[float]]:
    """Seconds from a server's start to its first job, and of a rolling restart's gap, one of each per run."""
    sys.path.insert(0, str(APP.parent))
    import startup_app  # the bench process enqueues with the app's own worker

    first_job, handover = [], []
    with RedisServer() as server, tempfile.TemporaryDirectory() as tmp:
        client = server.client()
        runtime = lowkiq.configure(redis_url=server.url, workers=[startup_app.Startup])
        try:
            for run in range(runs):
                client.flushall()
                marks = Path(tmp) / f"marks{run}"
                startup_app.Startup.perform_async([{"id": "first"}])
                started = time.time()
                one = start(server.url, marks)
                first_job.append(wait_mark(marks, "first") - started)
                two = start(server.url, marks)
                time.sleep(2)  # the second settles in beside the first
                stop(one)
                startup_app.Startup.perform_async([{"id": f"after{i}"} for i in range(20)])  # every shard
                enqueued = time.time()
                last = max(wait_mark(marks, f"after{i}") for i in range(20))
                handover.append(last - enqueued)
                stop(two)
        finally:
            runtime.close()
    return first_job, handover


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    first_job, handover = measure(args.runs)
    for name, values in (("start to first job", first_job), ("rolling restart: enqueue to run on the next", handover)):
        print(f"{name}: median {statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f}; "
              f"{len(values)} runs)")


if __name__ == "__main__":
    main()
