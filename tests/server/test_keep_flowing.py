"""Keeping ordered work flowing, with real `lowkiq -r` processes, a real redis-server and an execution log:
time limits (thread and process isolation), a child that dies, kill -9 of a server whose child performs,
PartialFailure and the whole_id morgue policy."""

from __future__ import annotations

import itertools
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from server_support import APPS, records, start_server
from timing_support import wait_until

import lowkiq

APP = APPS / "flow_app.py"
pytestmark = pytest.mark.slow


def flow_worker(**attrs: Any) -> type[lowkiq.Worker]:
    """The app's worker as the enqueuing side declares it (same queue; morgue_policy matters to push)."""
    return type("Flow", (lowkiq.Worker,), {"shards_count": 1, "__module__": __name__,
                                           "perform": lambda self, payloads_by_id: None, **attrs})


def starts(tmp: Path, job_id: str) -> list[dict[str, Any]]:
    return sorted((r for r in records(tmp, "start") if job_id in r["batch"]), key=lambda r: r["t"])


def performed(tmp: Path) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for rec in records(tmp, "perform"):
        for job_id in rec["batch"]:
            out.setdefault(job_id, []).append(rec)
    return out


def no_overlap(tmp: Path) -> None:
    """No two recorded perform intervals of one id intersect (a start without an end runs until the
    next start of the same id at the earliest: that next start must come after it was stopped)."""
    spans: dict[str, list[tuple[float, float]]] = {}
    for rec in records(tmp, "perform"):
        for job_id in rec["batch"]:
            spans.setdefault(job_id, []).append((rec["start"], rec["end"]))
    for job_id, intervals in spans.items():
        intervals.sort()
        for (_, end), (start, _) in itertools.pairwise(intervals):
            assert start >= end, f"id {job_id} ran twice at once"


@pytest.mark.guarantee
def test_thread_time_limit_interrupts_a_pure_python_loop_and_its_shard_goes_on(tmp_path, redis_url, runtime_of):
    worker = flow_worker()
    rt = runtime_of(worker)
    worker.perform_async([{"id": "loop", "payload": {"loop": True}}])
    enqueued = time.time()
    worker.perform_async([{"id": f"ok{i}", "payload": {"v": i}} for i in range(5)])
    server = start_server(tmp_path, redis_url, "--threads", "1", app=APP,
                          env={"APP_TIME_LIMIT": "1", "APP_MAX_RETRY": "3", "APP_RETRY_IN": "0.3"})
    try:
        wait_until(lambda: {f"ok{i}" for i in range(5)} <= set(performed(tmp_path)), timeout=8 - (time.time() - enqueued))
        wait_until(lambda: len(starts(tmp_path, "loop")) >= 2, timeout=10)  # failed, then retried
        wait_until(lambda: "TimeLimitExceeded" in server.log(), timeout=5)
        assert "loop" not in performed(tmp_path)
        assert server.process.poll() is None
        q = rt.queries(worker)
        job = q.job("loop") or q.busy_job("loop") or q.morgue_job("loop")
        assert job is not None and job.error is not None and job.error.startswith("TimeLimitExceeded")
    finally:
        assert server.stop() == 0, server.log()
    no_overlap(tmp_path)


@pytest.mark.guarantee
def test_process_time_limit_kills_and_reaps_the_child_before_the_id_runs_again(tmp_path, redis_url, runtime_of):
    worker = flow_worker(isolation="process")
    runtime_of(worker)
    worker.perform_async([{"id": "hang", "payload": {"sleep": 3600}}])
    enqueued = time.time()
    worker.perform_async([{"id": f"ok{i}", "payload": {"v": i}} for i in range(5)])
    server = start_server(tmp_path, redis_url, "--threads", "1", app=APP,
                          env={"APP_ISOLATION": "process", "APP_TIME_LIMIT": "1", "APP_GRACE": "1",
                               "APP_RETRY_IN": "0.3", "APP_MAX_RETRY": "3"})
    try:
        wait_until(lambda: {f"ok{i}" for i in range(5)} <= set(performed(tmp_path)), timeout=8 - (time.time() - enqueued))
        wait_until(lambda: len(starts(tmp_path, "hang")) >= 2, timeout=10)
        first, second = starts(tmp_path, "hang")[:2]
        assert first["pid"] != server.pid and second["pid"] != first["pid"]
        # the killed child was gone (reaped) before the id's next perform started
        assert second["previous_alive"] == {"hang": False}
        with pytest.raises(ProcessLookupError):
            os.kill(first["pid"], 0)
        assert server.process.poll() is None
        wait_until(lambda: "TimeLimitExceeded" in server.log(), timeout=5)
    finally:
        assert server.stop() == 0, server.log()
    no_overlap(tmp_path)


@pytest.mark.guarantee
def test_kill_9_of_the_server_kills_its_child_and_the_shard_is_taken_over(tmp_path, redis_url, runtime_of):
    worker = flow_worker(isolation="process")
    runtime_of(worker)
    worker.perform_async([{"id": "slow", "payload": {"sleep": 30}}])
    env = {"APP_ISOLATION": "process", "APP_RETRY_IN": "0.3"}
    first = start_server(tmp_path, redis_url, "--threads", "1", app=APP, env=env, name="first")
    second = None
    try:
        wait_until(lambda: len(starts(tmp_path, "slow")) >= 1, timeout=15)
        child = starts(tmp_path, "slow")[0]["pid"]
        assert child != first.pid
        first.signal(signal.SIGKILL)
        first.wait(10)

        def gone() -> bool:
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                return True
            return False

        wait_until(gone, timeout=3)  # the child does not outlive its server
        second = start_server(tmp_path, redis_url, "--threads", "1", app=APP, env=env, name="second")
        wait_until(lambda: len(starts(tmp_path, "slow")) >= 2, timeout=20)  # taken over: runs again
        again = starts(tmp_path, "slow")[1]
        assert again["pid"] != child and again["previous_alive"] == {"slow": False}
    finally:
        first.kill()
        if second is not None:
            second.kill()


@pytest.mark.guarantee
def test_a_child_that_exits_fails_its_batch_with_worker_crashed_and_reaches_the_morgue(tmp_path, redis_url, runtime_of):
    worker = flow_worker(isolation="process")
    rt = runtime_of(worker)
    worker.perform_async([{"id": "die", "payload": {"exit": True}}])
    worker.perform_async([{"id": f"ok{i}", "payload": {"v": i}} for i in range(5)])
    server = start_server(tmp_path, redis_url, "--threads", "1", app=APP,
                          env={"APP_ISOLATION": "process", "APP_MAX_RETRY": "10", "APP_RETRY_IN": "0.2"})
    try:
        wait_until(lambda: rt.queries(worker).morgue_job("die") is not None, timeout=20)
        dead = rt.queries(worker).morgue_job("die")
        assert dead is not None and dead.error is not None and dead.error.startswith("WorkerCrashed")
        assert len(starts(tmp_path, "die")) == 3  # the crash cap (crash_limit 3), not max_retry_count 10
        worker.perform_async([{"id": "after", "payload": {"v": 1}}])
        wait_until(lambda: {"after", *(f"ok{i}" for i in range(5))} <= set(performed(tmp_path)), timeout=10)
        assert server.process.poll() is None
        assert all(len(v) == 1 for v in performed(tmp_path).values())
    finally:
        assert server.stop() == 0, server.log()


@pytest.mark.parametrize("isolation", ["thread", "process"])
def test_partial_failure_acknowledges_the_others_and_retries_the_one(tmp_path, redis_url, runtime_of, isolation):
    worker = flow_worker()
    rt = runtime_of(worker)
    ids = [f"id{i}" for i in range(10)]
    worker.perform_async([{"id": job_id, "payload": {"partial": ["id3", "nowhere"]} if job_id == "id0" else {"v": 1}}
                          for job_id in ids])
    server = start_server(tmp_path, redis_url, "--threads", "1", app=APP,
                          env={"APP_BATCH_SIZE": "10", "APP_RETRY_IN": "1", "APP_ISOLATION": isolation})
    try:
        wait_until(lambda: "id3" in performed(tmp_path), timeout=15)
        batches = [r for r in records(tmp_path, "start")]
        assert sorted(batches[0]["batch"]) == sorted(ids)  # one batch of 10
        assert [sorted(b["batch"]) for b in batches[1:]] == [["id3"]]  # only id3 ran again
        done = performed(tmp_path)
        assert set(done) == {"id3"}  # the first perform raised: only the retry of id3 returned
        assert "KeyError: 'id3'" in server.log() and "nowhere" in server.log()
        counters = rt.queries(worker)
        assert counters is not None
    finally:
        assert server.stop() == 0, server.log()


@pytest.mark.guarantee
def test_whole_id_holds_every_version_in_the_morgue_until_requeue(tmp_path, redis_url, runtime_of):
    worker = flow_worker(morgue_policy="whole_id")
    rt = runtime_of(worker)
    (tmp_path / "records").mkdir()
    (tmp_path / "records" / "FAIL").touch()
    worker.perform_async([{"id": "w", "score": 1, "payload": {"v": 1, "fail_file": "FAIL"}},
                          {"id": "w", "score": 2, "payload": {"v": 2}}])
    server = start_server(tmp_path, redis_url, "--threads", "1", app=APP,
                          env={"APP_MORGUE": "whole_id", "APP_MAX_RETRY": "2", "APP_RETRY_IN": "0.2"})
    try:
        wait_until(lambda: rt.queries(worker).morgue_job("w") is not None, timeout=15)
        dead = rt.queries(worker).morgue_job("w")
        assert dead is not None and [p["v"] for p, _ in dead.payloads] == [1, 2]
        assert worker.perform_async([{"id": "w", "score": 3, "payload": {"v": 3}}]) == 1  # held, returns normally
        time.sleep(1.5)
        held = rt.queries(worker).morgue_job("w")
        assert held is not None and [p["v"] for p, _ in held.payloads] == [1, 2, 3]
        assert rt.queries(worker).job("w") is None
        assert not performed(tmp_path)
        (tmp_path / "records" / "FAIL").unlink()
        assert rt.actions(worker).morgue_requeue(["w"]) == 1
        wait_until(lambda: "w" in performed(tmp_path), timeout=10)
        batch = performed(tmp_path)["w"]
        assert len(batch) == 1 and [p["v"] for p in batch[0]["batch"]["w"]] == [1, 2, 3]
    finally:
        assert server.stop() == 0, server.log()
