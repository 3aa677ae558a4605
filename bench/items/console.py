"""Item 6: console latency with 50 workers × 24 shards, 1,000,000 queued and 100,000 dead jobs.

Seeding uses the public core only: ``perform_async`` in slices of 10,000
for the queued jobs; for the dead ones, enqueue, take them into processing
(``Queue.ack_and_take``), fail them once (``Queue.fail``) and move every
failed job to the morgue (``Actions.kill_failed``), as an operator would.
The console is measured in-process (Flask's test client: the app and Redis,
no HTTP) and over HTTP through ``gunicorn "lowkiq.webui:served_app()"``
(one sync worker, a new connection per request, as a browser without
keep-alive would see it).
"""

from __future__ import annotations

import cProfile
import dataclasses
import http.client
import io
import os
import pstats
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import redis

import lowkiq
from lowkiq.store.metrics import queue_metrics

from ..common import ItemResult, Sizes, hold, log
from ..options import Options
from ..redis_server import RedisServer, free_port

ERROR = b"RuntimeError: the payment provider timed out (seeded by the benchmark)"


def console_workers(count: int, shards: int) -> list[type[lowkiq.Worker]]:
    return [type(f"ConsoleWorker{n:02d}", (lowkiq.Worker,), {"shards_count": shards, "__module__": __name__,
                                                              "perform": lambda self, payloads_by_id: None})
            for n in range(count)]


@dataclass
class Endpoint:
    label: str
    path: str
    target_ms: float | None


SHARED_ID = "order-42"
HISTORY_MINUTES = 2 * 24 * 60


def run(sizes: Sizes, options: Options) -> ItemResult:
    return _run(sizes, options, 6, "Console", _endpoints(console_workers(1, 1)[0].__name__))


def run_at_10x(sizes: Sizes, options: Options) -> ItemResult:
    """Item 11: item 6 with ten times the jobs (10,000,000 queued, 1,000,000 dead), every listing order timed."""
    bigger = dataclasses.replace(sizes, console_queued=sizes.console_queued * 10, console_dead=sizes.console_dead * 10,
                                 console_requests=max(20, sizes.console_requests // 2))
    first = console_workers(1, 1)[0].__name__
    endpoints = [
        Endpoint("GET api/v1/stats", "/api/v1/stats", 20.0),
        Endpoint("GET / (dashboard page)", "/", None),
        Endpoint("GET morgue page (default: 25 rows by updated_at)", f"/workers/{first}/morgue", 100.0),
        Endpoint("GET morgue page, 25 rows by id", f"/workers/{first}/morgue?order_by=id", 100.0),
        Endpoint("GET morgue page, 100 rows by id descending", f"/workers/{first}/morgue?order_by=id&desc=1&limit=100",
                 100.0),
    ] + [Endpoint(f"GET enqueued page, 25 rows by {order}{' descending' if desc else ''}",
                  f"/workers/{first}/enqueued?order_by={order}&desc={int(desc)}", 100.0)
         for order in ("perform_in", "id", "retry_count") for desc in (False, True)]
    return _run(bigger, options, 11, "Console at 10× scale", endpoints)


def _endpoints(first: str) -> list[Endpoint]:
    return [
        Endpoint("GET api/v1/stats", "/api/v1/stats", 20.0),
        Endpoint("GET / (dashboard page)", "/", None),
        Endpoint("GET morgue page (default: 25 rows by updated_at)", f"/workers/{first}/morgue", 100.0),
        Endpoint("GET morgue page, 100 rows by id", f"/workers/{first}/morgue?order_by=id&limit=100", 100.0),
        Endpoint("GET enqueued page (default: 25 rows by perform_in)", f"/workers/{first}/enqueued", None),
        Endpoint("GET search for an id held by two workers (looks in every worker)", f"/search?id={SHARED_ID}", None),
        Endpoint("GET the dashboard's history panel, 48 hours (loaded after the page)", "/_history?hours=48", None),
        Endpoint("GET the dashboard's history panel, 1 hour", "/_history?hours=1", None),
        Endpoint("GET a worker's tab counts with its last hour", f"/workers/{first}/_counts", None),
        Endpoint("GET api/v1/history?hours=48", "/api/v1/history?hours=48", None),
    ]


def _run(sizes: Sizes, options: Options, number: int, title: str, endpoints: list[Endpoint]) -> ItemResult:
    workers = console_workers(sizes.console_workers, sizes.console_shards)
    result = ItemResult(number, title, f"{len(workers)} workers × {sizes.console_shards} shards, "
                        f"{sizes.console_queued:,} queued jobs and {sizes.console_dead:,} dead ones; "
                        f"{sizes.console_requests} sequential requests per endpoint after 5 warm-up requests; "
                        "in-process = Flask test client (the app and Redis, no HTTP); HTTP = gunicorn, one sync worker")
    with RedisServer() as redis_server:
        url, client = redis_server.url, redis_server.client()
        seconds = _seed(url, workers, sizes)
        retried = RETRIED_SMOKE if sizes.smoke else RETRIED_FULL
        retried_seconds = _seed_retried(url, retried)
        history_seconds = _seed_history(url, client, workers, sizes)
        result.note(f"History: {HISTORY_MINUTES if not sizes.smoke else 60:,} minutes of totals per worker (the two "
                    f"days kept), written in {history_seconds:.1f} s; the id {SHARED_ID} is queued in the first and "
                    "the last worker.")
        result.note(f"Retried worker: {retried:,} jobs failed once or more (retry counts 0..9) in its one shard, "
                    f"seeded through perform_async, ack_and_take and fail in {retried_seconds:.1f} s.")
        used = int(client.info("memory")["used_memory"])
        result.note(f"Seeding took {seconds:.1f} s; Redis used_memory {used / 2**20:,.0f} MiB.")
        in_process = _in_process(url)
        over_http = _gunicorn(url) if options.console_http else None
        sources = [("in-process", in_process)] + ([("HTTP", over_http)] if over_http else [])
        misses: list[Endpoint] = []
        for ep in endpoints:
            for label, get in sources:
                times = _measure(get, ep.path, sizes.console_requests)
                p50, p99 = _percentile(times, 50), _percentile(times, 99)
                target = f"p99 < {ep.target_ms:.0f} ms" if ep.target_ms else ""
                ok = None if sizes.smoke or not ep.target_ms else p99 < ep.target_ms
                result.row(f"{ep.label}, {label}", f"p50 {p50:.1f} ms, p99 {p99:.1f} ms", target, ok)
                if ok is False and ep not in misses:
                    misses.append(ep)
        for desc in ("0", "1"):
            path = f"/workers/{RetriedOne.__name__}/enqueued?order_by=retry_count&desc={desc}&limit=25"
            times = _measure(in_process, path, sizes.console_requests)
            p50, p99 = _percentile(times, 50), _percentile(times, 99)
            direction = "descending" if desc == "1" else "ascending (the column header's first click)"
            ok = None if sizes.smoke else p99 < RETRIED_TARGET_MS
            result.row(f"GET enqueued page by retry_count {direction}, {retried:,} retried jobs in one shard, "
                       "in-process", f"p50 {p50:.1f} ms, p99 {p99:.1f} ms", f"p99 < {RETRIED_TARGET_MS:.0f} ms", ok)
        if over_http:
            over_http.close()
        wanted = misses if options.profile == "auto" else endpoints if options.profile == "always" else []
        for ep in wanted:
            result.note(_profile(client, in_process, ep, sizes.console_requests))
    return result


def _seed_history(url: str, client: redis.Redis, workers: list[type[lowkiq.Worker]], sizes: Sizes) -> float:
    """Every worker's per-minute stream full (two days of minutes), and one id held by two workers."""
    from lowkiq.store.minute_totals import MinuteTotalsKeys

    started = time.perf_counter()
    minutes = 60 if sizes.smoke else HISTORY_MINUTES
    now = int(time.time() // 60 * 60)
    for worker in workers:
        pipe = client.pipeline(transaction=False)
        for m in range(minutes):
            minute = now - (minutes - m) * 60
            pipe.xadd(MinuteTotalsKeys.stream(worker.queue_name), {"at": (minute + 5) * 1000, "processed": m * 1000,
                      "failed": m, "lag": m % 30, "length": 5000, "dead": 100}, id=f"{minute * 1000}-0")
        pipe.execute()
    runtime = lowkiq.configure(workers=[workers[0], workers[-1]], redis_url=url)
    try:
        for worker in (workers[0], workers[-1]):
            worker.perform_async([{"id": SHARED_ID, "payload": "x"}])
    finally:
        runtime.close()
    return time.perf_counter() - started


def _seed(url: str, workers: list[type[lowkiq.Worker]], sizes: Sizes) -> float:
    started = time.perf_counter()
    runtime = lowkiq.configure(workers=workers, redis_url=url)
    try:
        dead_each = sizes.console_dead // len(workers)
        queued_each = sizes.console_queued // len(workers)
        for worker in workers:
            # The dead first: a take only finds them while nothing else is ready.
            for start in range(0, dead_each, 10_000):
                worker.perform_async([{"id": f"dead-{i}", "payload": {"order": i, "status": "paid", "amount": i % 977}}
                                      for i in range(start, min(dead_each, start + 10_000))])
            queue = runtime.queue(worker)
            now = time.time()
            for shard in range(worker.shards_count):
                lease = hold(queue, shard, "bench-seed", ttl=60)
                taken = queue.ack_and_take(None, (lease, dead_each))
                if taken and taken.jobs:
                    queue.fail(lease, [(job.id, now + 3600) for job in taken.jobs], ERROR, worker.max_retry_count)
            runtime.actions(worker).kill_failed()
            for start in range(0, queued_each, 10_000):
                worker.perform_async([{"id": i, "payload": {"order": i, "status": "paid", "amount": i % 977}}
                                      for i in range(start, min(queued_each, start + 10_000))])
        stats = queue_metrics(runtime.client, [w.keys() for w in workers])
        queued, dead = sum(m.length for m in stats), sum(m.morgue_length for m in stats)
    finally:
        runtime.close()
    if queued != queued_each * len(workers) or dead != dead_each * len(workers):
        raise RuntimeError(f"seeding went wrong: {queued:,} queued, {dead:,} dead")
    elapsed = time.perf_counter() - started
    log(f"console: seeded {queued:,} queued and {dead:,} dead jobs over {len(workers)} workers in {elapsed:.1f} s")
    return elapsed


# A queue whose one shard holds many jobs that failed: a listing by retry count once walked them all.
RETRIED_FULL, RETRIED_SMOKE = 200_000, 2_000
RETRIED_TARGET_MS = 50.0


class RetriedOne(lowkiq.Worker):
    shards_count = 1
    max_retry_count = 25

    def perform(self, payloads_by_id: object) -> None:
        pass


def _seed_retried(url: str, count: int) -> float:
    """``count`` jobs in RetriedOne's shard, each failed 1..10 times, through the product's own scripts."""
    started = time.perf_counter()
    runtime = lowkiq.configure(workers=[RetriedOne], redis_url=url)
    try:
        runtime.register([RetriedOne])
        queue = runtime.queue(RetriedOne)
        lease = hold(queue, 0, "bench-seed", ttl=600)
        for start in range(0, count, 10_000):
            RetriedOne.perform_async([{"id": f"r{i}", "payload": {"order": i}}
                                      for i in range(start, min(count, start + 10_000))])
        for attempt in range(10):
            # Each round fails a shrinking share again: retry counts spread over 0..9.
            due = time.time() - 1
            taken = queue.ack_and_take(None, (lease, count))
            assert taken is not None
            later = time.time() + 86_400
            queue.fail(lease, [(job.id, due if int(job.id[1:]) % 10 > attempt else later) for job in taken.jobs],
                       ERROR, RetriedOne.max_retry_count)
        [metrics] = queue_metrics(runtime.client, [RetriedOne.keys()])
        if metrics.retries != count:
            raise RuntimeError(f"seeding went wrong: {metrics.retries:,} retried of {count:,}")
    finally:
        runtime.close()
    return time.perf_counter() - started


Get = Callable[[str], tuple[int, bytes]]


class _InProcess:
    def __init__(self, url: str) -> None:
        from lowkiq.webui import served_app

        # as `lowkiq web` builds it; the objects the bench made before stay out of collections too
        self.app = served_app(environ={"LOWKIQ_REDIS_URL": url})
        self.client = self.app.test_client()

    def __call__(self, path: str) -> tuple[int, bytes]:
        response = self.client.get(path)
        return response.status_code, response.get_data()


def _in_process(url: str) -> _InProcess:
    return _InProcess(url)


class _Gunicorn:
    def __init__(self, url: str) -> None:
        self.port = free_port()
        binary = Path(sys.executable).parent / "gunicorn"
        env = {**os.environ, "LOWKIQ_REDIS_URL": url}
        env.pop("REDIS_URL", None)
        # cwd elsewhere: gunicorn puts its cwd on sys.path, and the repository's lowkiq/ lacks webui/.
        self.process = subprocess.Popen([str(binary), "-w", "1", "-b", f"127.0.0.1:{self.port}", "--log-level",
                                         "warning", "lowkiq.webui:served_app()"], env=env, cwd=tempfile.gettempdir(),
                                        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while True:
            try:
                self("/api/v1/stats")
                return
            except OSError:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"gunicorn did not start: {self.process.stderr.read().decode()[-500:]}") from None
                time.sleep(0.1)

    def __call__(self, path: str) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            connection.request("GET", path)
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _gunicorn(url: str) -> _Gunicorn:
    return _Gunicorn(url)


def _measure(get: Get, path: str, requests: int) -> list[float]:
    for _ in range(5):
        _check(get(path), path)
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        status, body = get(path)
        times.append((time.perf_counter() - started) * 1000)
        _check((status, body), path)
    return times


def _check(reply: tuple[int, bytes], path: str) -> None:
    status, body = reply
    if status != 200:
        raise RuntimeError(f"GET {path} answered {status}: {body[:300]!r}")


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[rank]


def _profile(client: redis.Redis, get: _InProcess, ep: Endpoint, requests: int) -> str:
    """cProfile of the in-process requests, plus what Redis did for them."""
    n = max(10, requests // 4)
    client.config_resetstat()
    profiler = cProfile.Profile()
    started = time.perf_counter()
    profiler.enable()
    for _ in range(n):
        get(ep.path)
    profiler.disable()
    wall = (time.perf_counter() - started) / n * 1000
    stats = client.info("commandstats")
    redis_rows = sorted(((k.removeprefix("cmdstat_"), v) for k, v in stats.items() if "config" not in k),
                        key=lambda kv: -kv[1]["usec"])[:6]
    redis_ms = sum(v["usec"] for _, v in stats.items()) / n / 1000
    text = io.StringIO()
    stats_ = pstats.Stats(profiler, stream=text)
    stats_.sort_stats("cumulative").print_stats(r"lowkiq/", 12)
    stats_.sort_stats("tottime").print_stats(10)
    body = "\n".join(_short_path(line) for line in text.getvalue().splitlines()
                     if line.strip() and not line.lstrip().startswith(("List reduced", "Ordered by")))
    parts = ", ".join(f"{name} {v['calls'] / n:,.1f}×{v['usec_per_call']:.0f} µs" for name, v in redis_rows)
    return (f"Profile of `{ep.path}` ({n} in-process requests, {wall:.1f} ms each under cProfile): Redis spent "
            f"{redis_ms:.1f} ms per request inside commands (per request: {parts}).\n\n```\n{body[-3500:]}\n```")


def _short_path(line: str) -> str:
    marker = "site-packages/"
    return line.replace(line[line.find("/"):line.find(marker) + len(marker)], "") if marker in line else line
