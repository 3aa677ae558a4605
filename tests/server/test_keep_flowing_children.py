"""Process isolation's children, with real `lowkiq -r` processes, a real redis-server and an execution log:
a spare child takes the next batch at once after a kill, a killed child takes every process it started
along (one ignoring SIGTERM, one holding its reply pipe, a fork), a grandchild holding the reply pipe
never hides a child's death, a perform's subprocesses get default signal handling, and an operator stops
a process-isolated perform from the API and the CLI."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from server_support import records, run_cli, start_server
from test_keep_flowing import APP, flow_worker, performed, starts
from timing_support import wait_until
from webui_support import host_app

from lowkiq.store import audit

pytestmark = pytest.mark.slow
PROCESS = {"APP_ISOLATION": "process", "APP_RETRY_IN": "60", "APP_MAX_RETRY": "5"}


def pids_record(tmp: Path) -> dict[str, bool]:
    [rec] = records(tmp, "pids")
    running: dict[str, bool] = rec["running"]
    return running


def still_running(tmp: Path, name: str) -> list[int]:
    """Of the pids a perform wrote to ``name``, those that run now (not gone, not a zombie)."""
    running = []
    for pid in json.loads((tmp / "records" / name).read_text()):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                if stat.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                    running.append(pid)
        except OSError:
            pass
    return running


def test_after_a_kill_a_spare_child_performs_the_next_id_and_nothing_the_killed_one_started_survives(
        tmp_path, redis_url, runtime_of):
    worker = flow_worker(isolation="process")
    rt = runtime_of(worker)
    worker.perform_async([{"id": "warm", "payload": {"v": 1}}])
    # A child takes 4 s to load the app, as one with heavy imports: a new interpreter after the kill would
    # start the next id 2 + 4 s after the hung one.
    env = {**PROCESS, "APP_TIME_LIMIT": "1", "APP_GRACE": "1", "APP_CHILD_IMPORT_SECONDS": "4"}
    server = start_server(tmp_path, redis_url, "--threads", "1", app=APP, env=env)
    try:
        wait_until(lambda: "warm" in performed(tmp_path), timeout=20)
        # The spare warms meanwhile (its log line); a server without one is judged by the timing below.
        until = time.monotonic() + 10
        while server.log().count("Flow: child process") < 2 and time.monotonic() < until:
            time.sleep(0.1)
        worker.perform_async([{"id": "hang", "payload": {"hang_with_children": "hang-pids"}}])
        worker.perform_async([{"id": "next", "payload": {"check_pids": "hang-pids"}}])  # due after it
        wait_until(lambda: "next" in performed(tmp_path), timeout=15)
        hung, following = starts(tmp_path, "hang")[0], starts(tmp_path, "next")[0]
        waited = following["start"] - hung["start"]
        assert waited < 5, f"the next id started {waited:.1f} s after the hung one"
        print(f"next id started {waited - 2:.2f} s after the hung child's kill at time_limit + grace")
        # The hung child and each process it started (a subprocess ignoring SIGTERM, one holding the reply
        # pipe, a fork) were gone when the next id started.
        running = pids_record(tmp_path)
        assert len(running) == 4 and str(hung["pid"]) in running
        assert not any(running.values()), running
        assert following["pid"] != hung["pid"]
        job = rt.queries(worker).job("hang")
        assert job is not None and job.error is not None and job.error.startswith("TimeLimitExceeded"), job
    finally:
        assert server.stop() == 0, server.log()


def test_a_recycled_child_is_replaced_by_the_spare_at_once(tmp_path, redis_url, runtime_of):
    worker = flow_worker(isolation="process")
    runtime_of(worker)
    worker.perform_async([{"id": "warm", "payload": {"v": 1}}])
    env = {**PROCESS, "APP_MAX_BATCHES": "2", "APP_CHILD_IMPORT_SECONDS": "3"}
    server = start_server(tmp_path, redis_url, "--threads", "1", app=APP, env=env)
    try:
        wait_until(lambda: "warm" in performed(tmp_path), timeout=20)
        until = time.monotonic() + 10  # the spare warms meanwhile; the timing below judges
        while server.log().count("Flow: child process") < 2 and time.monotonic() < until:
            time.sleep(0.1)
        for job_id in ("r1", "r2", "r3"):
            worker.perform_async([{"id": job_id, "payload": {"v": 1}}])
        wait_until(lambda: "r3" in performed(tmp_path), timeout=15)
        first, second, third = (starts(tmp_path, job_id)[0] for job_id in ("r1", "r2", "r3"))
        assert first["pid"] == starts(tmp_path, "warm")[0]["pid"]  # its second batch: then recycled
        assert second["pid"] != first["pid"] and third["pid"] == second["pid"]
        # The spare took r2 at once: no wait for a new interpreter (3 s) nor for the old child's exit.
        assert second["start"] - first["start"] < 1.5, second["start"] - first["start"]
        wait_until(lambda: not Path(f"/proc/{first['pid']}").exists(), timeout=5)  # it exited, and was reaped
    finally:
        assert server.stop() == 0, server.log()


def test_a_grandchild_holding_the_reply_pipe_does_not_hide_the_childs_death(tmp_path, redis_url, runtime_of):
    worker = flow_worker(isolation="process")
    rt = runtime_of(worker)
    worker.perform_async([{"id": "leaver", "payload": {"exit_leaving_pipe": "leaver-pids"}}])
    worker.perform_async([{"id": "after", "payload": {"check_pids": "leaver-pids"}}])  # due after it
    server = start_server(tmp_path, redis_url, "--threads", "1", app=APP, env=PROCESS)  # no time_limit
    try:
        wait_until(lambda: "after" in performed(tmp_path), timeout=15)
        left, following = starts(tmp_path, "leaver")[0], starts(tmp_path, "after")[0]
        assert following["start"] - left["start"] < 3  # seen by its pid, at once, not at an EOF that never comes
        assert not any(pids_record(tmp_path).values()), pids_record(tmp_path)
        job = rt.queries(worker).job("leaver")
        assert job is not None and job.error is not None and job.error.startswith("WorkerCrashed"), job
        assert "exit code 3" in job.error
    finally:
        assert server.stop() == 0, server.log()


def test_a_performs_subprocesses_get_default_signal_handling_while_the_child_ignores_stop_signals(
        tmp_path, redis_url, runtime_of):
    worker = flow_worker(isolation="process")
    runtime_of(worker)
    worker.perform_async([{"id": "probe", "payload": {"signals_probe": True}}])
    worker.perform_async([{"id": "slow", "payload": {"sleep": 1.5}}])
    server = start_server(tmp_path, redis_url, "--threads", "1", app=APP, env=PROCESS)
    try:
        wait_until(lambda: starts(tmp_path, "slow"), timeout=15)
        child = starts(tmp_path, "slow")[0]["pid"]
        # A stop signal sent to the child itself (systemd signals every process of a unit) is for its
        # server: the batch it performs goes on.
        os.kill(child, signal.SIGTERM)
        os.kill(child, signal.SIGINT)
        wait_until(lambda: "slow" in performed(tmp_path), timeout=10)
        [probe] = records(tmp_path, "signals")
        assert probe["command_ignores"] == []  # neither SIGINT nor SIGTERM, as a shell's command would have
        assert probe["fork_defaults"] == {"SIGTERM": True, "SIGINT": True}
        assert starts(tmp_path, "slow")[0]["pid"] == probe["pid"]  # one child, alive throughout
    finally:
        assert server.stop() == 0, server.log()


def stop_api(client: Any, worker: str, job_id: Any) -> Any:
    return client.post(f"/lowkiq/api/v1/workers/{worker}/busy/stop", json={"id": job_id})


def test_an_operator_stops_a_process_perform_from_the_api_and_the_cli(tmp_path, redis_url, runtime_of):
    worker = flow_worker(isolation="process")
    rt = runtime_of(worker)
    worker.perform_async([{"id": "long", "payload": {"sleep": 60}}])
    worker.perform_async([{"id": "after", "payload": {"v": 1}}])
    server = start_server(tmp_path, redis_url, "--threads", "1", app=APP,
                          env={**PROCESS, "APP_RETRY_IN": "0.3", "APP_MAX_RETRY": "1"})
    q = rt.queries(worker)
    try:
        wait_until(lambda: starts(tmp_path, "long"), timeout=15)
        child = starts(tmp_path, "long")[0]["pid"]
        client = host_app().test_client()
        assert stop_api(client, "Flow", "after").status_code == 404  # queued, not busy: nothing recorded
        asked = time.monotonic()
        answer = stop_api(client, "Flow", "long")
        assert answer.status_code == 202, answer.get_data(as_text=True)
        assert answer.get_json()["stop"] == "requested"

        def stopped() -> Any:
            job = q.job("long") or q.busy_job("long")
            return job if job is not None and (job.error or "").startswith("PerformStopped") else None

        job = wait_until(stopped, timeout=3)
        print(f"stopped {time.monotonic() - asked:.2f} s after the request")
        assert "(api)" in job.error and job.retry_count == 0
        assert "after" in performed(tmp_path) or wait_until(lambda: "after" in performed(tmp_path), timeout=5)
        assert not Path(f"/proc/{child}").exists()
        [entry] = [e for e in audit.read(rt.client) if e.action == "busy/stop"]
        assert (entry.source, entry.worker, entry.ids, entry.count) == ("api", "Flow", ["long"], 1)

        # Its retry runs (retry rules: a failure like another); the CLI stops that one.
        wait_until(lambda: len(starts(tmp_path, "long")) == 2, timeout=10)
        done = run_cli(tmp_path, "jobs", "stop", "Flow", "long", "--yes", "--redis-url", redis_url)
        assert done.returncode == 0, done.stderr
        assert "stopping job long of Flow" in done.stdout
        dead = wait_until(lambda: q.morgue_job("long"), timeout=3)  # max_retry_count 1: its retries are over
        assert dead.error.startswith("PerformStopped") and "(cli)" in dead.error
        assert [e.source for e in audit.read(rt.client) if e.action == "busy/stop"] == ["cli", "api"]
        missing = run_cli(tmp_path, "jobs", "stop", "Flow", "nope", "--yes", "--redis-url", redis_url)
        assert missing.returncode == 1 and "no busy job 'nope'" in missing.stderr
        assert server.process.poll() is None
    finally:
        assert server.stop() == 0, server.log()
