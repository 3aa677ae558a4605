"""Stopping a server whose performs run in child processes, and a thread-isolated perform that outlives its
time limit, with real `lowkiq -r` processes, a real redis-server and an execution log.

- one signal: the child finishes its batch, which is acknowledged, then exits; the server exits 0;
- a second signal: every child is killed (SIGKILL) and reaped before the server exits, and its batch is
  back in the queue at once (not when the lease expires), to run again whole;
- a perform that ignores TimeLimitExceeded: the log says so, the server's metrics count it, and the
  console (from the registry alone) flags it as over its time limit while it runs.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import urllib.request
from typing import Any

import pytest
from server_support import start_server
from test_keep_flowing import APP, flow_worker, performed, starts
from timing_support import wait_until

from lowkiq.console import Console
from lowkiq.console.busy import busy_jobs

pytestmark = pytest.mark.slow
PROCESS = {"APP_ISOLATION": "process", "LOWKIQ_SHUTDOWN_TIMEOUT": "60", "LOWKIQ_LEASE_TTL": "30"}


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_one_signal_lets_the_child_finish_its_batch_then_it_exits(tmp_path, redis_url, runtime_of):
    worker = flow_worker(isolation="process")
    rt = runtime_of(worker)
    worker.perform_async([{"id": "slow", "payload": {"sleep": 2}}])
    server = start_server(tmp_path, redis_url, "--threads", "1", app=APP, env=PROCESS)
    try:
        wait_until(lambda: starts(tmp_path, "slow"), timeout=15)
        child = starts(tmp_path, "slow")[0]["pid"]
        assert child != server.pid
        server.signal(signal.SIGTERM)
        assert server.wait(20) == 0, server.log()
        assert set(performed(tmp_path)) == {"slow"}  # it finished, once
        assert not alive(child)
        q = rt.queries(worker)
        assert (q.job("slow"), q.busy_job("slow"), q.morgue_job("slow")) == (None, None, None)  # acknowledged
        assert "killed" not in server.log()
    finally:
        server.kill()


@pytest.mark.guarantee
def test_a_second_signal_kills_and_reaps_every_child_and_its_batch_goes_back_to_the_queue(tmp_path, redis_url,
                                                                                          runtime_of):
    worker = flow_worker(isolation="process")
    rt = runtime_of(worker)
    worker.perform_async([{"id": "hung", "payload": {"sleep": 3600}}])
    server = start_server(tmp_path, redis_url, "--threads", "1", app=APP, env=PROCESS)
    try:
        wait_until(lambda: starts(tmp_path, "hung"), timeout=15)
        child = starts(tmp_path, "hung")[0]["pid"]
        server.signal(signal.SIGTERM)
        time.sleep(1.5)
        # The first signal waits for the perform (shutdown_timeout 60 s): both still run.
        assert server.process.poll() is None and alive(child)
        second = time.monotonic()
        server.signal(signal.SIGTERM)
        assert server.wait(15) == 0, server.log()
        assert time.monotonic() - second < 8
        assert not alive(child)
        log = server.log()
        assert f"child process {child} killed (signal SIGKILL) as the server exits" in log, log
        # Killed and reaped before the server handed its shard back: the batch is queued again now, not
        # in processing until its lease (30 s) expires.
        q = rt.queries(worker)
        assert q.busy_job("hung") is None and q.job("hung") is not None
        assert q.job("hung").retry_count == -1  # not failed: the server stopped, the job did not crash
        assert "hung" not in performed(tmp_path)
    finally:
        server.kill()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        return reply.read().decode()


@pytest.mark.guarantee
def test_a_perform_past_its_time_limit_is_flagged_in_the_log_the_metrics_and_the_console(tmp_path, redis_url,
                                                                                          runtime_of):
    worker = flow_worker(time_limit=1)
    runtime_of(worker)
    # time.sleep is C code: TimeLimitExceeded waits for it to return, 4 s later.
    worker.perform_async([{"id": "sleepy", "payload": {"sleep": 4}}])
    port = free_port()
    server = start_server(tmp_path, redis_url, "--threads", "1", "--metrics-port", str(port), app=APP,
                          env={"APP_TIME_LIMIT": "1", "APP_RETRY_IN": "30"})
    try:
        wait_until(lambda: "still running" in server.log(), timeout=15)
        assert 'lowkiq_time_limit_ignored_total{worker="Flow"} 1.0' in scrape(port)
        # A console without the app's code: the registry the server wrote says the worker's time_limit.
        c = Console.from_url(redis_url, redis_timeout=5)
        view = c.worker("Flow")
        assert view.info.time_limit == 1
        _, jobs = busy_jobs(c, view, c.queries(view).busy())
        flags: list[Any] = [(b.job.id, b.over_time_limit) for b in jobs]
        assert flags == [("sleepy", True)], flags
        wait_until(lambda: "TimeLimitExceeded" in server.log().split("still running", 1)[1], timeout=10)
        assert server.process.poll() is None
    finally:
        assert server.stop() == 0, server.log()
