"""Console latency at scale: 50 workers x 24 shards, 1,000,000 queued jobs, 100,000 dead.

    .venv/bin/python -m bench.console_latency [--requests 300] [--http]

Starts its own redis-server on a free port, seeds it through the ordinary
enqueue path (slices of 10,000), then times api/v1/stats, the dashboard and a
morgue page of 100 jobs, in process (Flask's test client: the console's own
work plus Redis) and, with --http, through gunicorn over loopback.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT))

from redis_server import RedisServer, free_port  # noqa: E402

import lowkiq  # noqa: E402
from bench.common import hold  # noqa: E402
from lowkiq.store.metrics import queue_metrics  # noqa: E402

WORKERS = 50
SHARDS = 24
QUEUED = 1_000_000
DEAD = 100_000
SLICE = 10_000


def make_workers() -> list[type[lowkiq.Worker]]:
    return [type(f"Worker{n:02d}", (lowkiq.Worker,), {"shards_count": SHARDS, "perform": lambda self,
                                                      p: None}) for n in range(WORKERS)]


def seed(runtime: lowkiq.runtime.Runtime, workers: list[type[lowkiq.Worker]]) -> None:
    started = time.perf_counter()
    dead_worker = workers[0]
    # The morgue first, in the first worker: take and fail everything, then kill the failed.
    for start in range(0, DEAD, SLICE):
        dead_worker.perform_async([{"id": f"dead-{i}", "payload": {"n": i, "note": "x" * 40}} for i in range(start,
                                                                                                             start + SLICE)])
    queue = runtime.queue(dead_worker)
    for shard in range(SHARDS):
        lease = hold(queue, shard, "bench-seed", ttl=600)
        while True:
            taken = queue.ack_and_take(None, (lease, 1000))
            if not taken or not taken.jobs:
                break
            queue.fail(lease, [(job.id, time.time() + 3600) for job in taken.jobs], b"RuntimeError: seeded failure", 25)
    runtime.actions(dead_worker).kill_failed()
    per_worker = QUEUED // WORKERS
    for worker in workers:
        for start in range(0, per_worker, SLICE):
            worker.perform_async([{"id": i, "payload": {"n": i}} for i in range(start, start + SLICE)])
    print(f"seeded in {time.perf_counter() - started:.1f} s", flush=True)


def timings(call: Callable[[], None], n: int) -> dict[str, float]:
    for _ in range(10):
        call()
    samples = []
    for _ in range(n):
        t = time.perf_counter()
        call()
        samples.append((time.perf_counter() - t) * 1000)
    samples.sort()
    return {
        "p50": statistics.median(samples),
        "p99": samples[min(len(samples) - 1, int(len(samples) * 0.99))],
        "max": samples[-1],
    }


def report(label: str, result: dict[str, float]) -> None:
    print(f"{label:<46} p50 {result['p50']:7.2f} ms   p99 {result['p99']:7.2f} ms   max {result['max']:7.2f} ms", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--http", action="store_true", help="also measure through gunicorn")
    options = parser.parse_args()

    server = RedisServer().start()
    try:
        workers = make_workers()
        runtime = lowkiq.configure(workers=workers, redis_url=server.url)
        seed(runtime, workers)
        metrics = queue_metrics(runtime.client, [w.keys() for w in workers])
        print(f"queued {sum(m.length for m in metrics):,}, dead {sum(m.morgue_length for m in metrics):,}, "
              f"shards {WORKERS * SHARDS}, redis {server.version()}", flush=True)

        # The standalone console, from the registry, as gunicorn would serve it.
        from lowkiq.webui import create_app

        client = create_app(environ={"LOWKIQ_REDIS_URL": server.url}).test_client()
        n = options.requests
        paths = {
            "api/v1/stats": "/api/v1/stats",
            "dashboard (page)": "/",
            "dashboard (live fragment)": "/_live",
            "morgue page, 100 jobs, by updated_at": "/workers/Worker00/morgue?limit=100",
            "morgue page, 100 jobs, by id desc": "/workers/Worker00/morgue?limit=100&order_by=id&desc=1",
            "api morgue, 100 jobs": "/api/v1/workers/Worker00/morgue?limit=100",
            "enqueued page, 100 jobs, by perform_in": "/workers/Worker01/enqueued?limit=100",
        }
        print("in process (Flask test client):")
        for label, path in paths.items():
            assert client.get(path).status_code == 200, path
            report(label, timings(lambda path=path: client.get(path), n))
        # Deep page: keyset paging costs the same at any depth.
        page = client.get("/api/v1/workers/Worker00/morgue?limit=100&order_by=id").get_json()
        for _ in range(200):
            page = client.get(f"/api/v1/workers/Worker00/morgue?limit=100&order_by=id&after={page['next']}").get_json()
        deep = f"/workers/Worker00/morgue?limit=100&order_by=id&after={page['next']}"
        report("morgue page 201 (20,000 rows deep)", timings(lambda: client.get(deep), n))

        if options.http:
            port = free_port()
            env = {**os.environ, "LOWKIQ_REDIS_URL": server.url}
            gunicorn = Path(sys.executable).parent / "gunicorn"
            # Outside the source tree: its lowkiq/ folder would shadow the installed package.
            proc = subprocess.Popen(
                cwd=tempfile.gettempdir(),
                args=[str(gunicorn), "-w", "1", "--threads", "4", "-b", f"127.0.0.1:{port}", "lowkiq.webui:create_app()"],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL if not os.environ.get("BENCH_VERBOSE") else None,
            )
            try:
                base = f"http://127.0.0.1:{port}"
                deadline = time.monotonic() + 15
                while True:
                    try:
                        urllib.request.urlopen(base + "/api/v1/stats").read()
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            raise
                        time.sleep(0.1)
                print("over HTTP (gunicorn, 1 worker, 4 threads, sequential requests):")
                for label, path in paths.items():
                    report(label, timings(lambda path=path: urllib.request.urlopen(base + path).read(), n))
            finally:
                proc.terminate()
                proc.wait(10)
    finally:
        server.stop()


if __name__ == "__main__":
    main()
