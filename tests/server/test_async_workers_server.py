"""Async workers (async def perform) with real `lowkiq -r` processes, a real redis-server and an execution log.

The guarantees of the threads hold on the event loop: every payload once, per-id order, no same-id overlap
across processes, merges, takeover after kill -9; plus what only a loop gives: many I/O-bound performs in
flight on two threads, and time limits that cancel an await.
"""

from __future__ import annotations

import importlib
import sys
import time
from typing import Any

import pytest
from execution_checks import Producer, check
from fault_support import FAST, drain, kill_one_of_three, settled, stop_all
from server_support import APPS, ServerProcess, performed_ids, queue_empty, records, start_server
from timing_support import wait_until

import lowkiq
from lowkiq.console import Console
from lowkiq.console.busy import busy_jobs
from lowkiq.store import membership
from lowkiq.store.id_history import TAKEN_AHEAD, IdHistories

pytestmark = [pytest.mark.slow]

ASYNC_APP = APPS / "async_app.py"
VERSIONS_APP = APPS / "async_versions_app.py"


def app_module(name: str) -> Any:
    if str(APPS) not in sys.path:
        sys.path.insert(0, str(APPS))
    return importlib.import_module(name)


@pytest.fixture
def app(configure: Any) -> Any:
    module = app_module("async_app")
    configure(workers=[module.AsyncRecorder, module.Waiting, module.Hanging, module.AsyncFlaky, module.Blocking,
                       module.SyncRecorder])
    lowkiq.current().clock = time.time
    return module


@pytest.fixture
def versions(configure: Any) -> Any:
    module = app_module("async_versions_app")
    configure(workers=[module.Versions, module.SyncSide])
    lowkiq.current().clock = time.time
    return module


def versions_server(tmp: Any, url: str, name: str, **env: str) -> ServerProcess:
    return start_server(tmp, url, "--threads", "2", app=VERSIONS_APP, env={**FAST, **env}, name=name)


def test_an_async_worker_over_two_processes_performs_every_payload_once_in_order_with_merges(versions, r, redis_url,
                                                                                             tmp_path):
    worker = versions.Versions
    processes = [versions_server(tmp_path, redis_url, f"s{n}", APP_PERFORM_SECONDS="0.03") for n in range(2)]
    try:
        wait_until(lambda: settled(r, {p.pid for p in processes}, worker.shards_count), timeout=20)
        producer = Producer(worker, ids=20, every=0.003).start()
        versions.SyncSide.perform_async([{"id": f"s{i}", "payload": {"v": i}} for i in range(10)])
        time.sleep(4)
        enqueued = producer.stop()
        drain(r, worker, enqueued, tmp_path)
        report = check(tmp_path, enqueued)
        assert (report.lost, report.duplicates, report.overlaps, report.order) == (set(), set(), set(), set()), report
        # Versions that arrived while their id was queued were merged: performed together, in order.
        assert report.performs < len(enqueued), report
        assert any(len(payloads) > 1 for rec in records(tmp_path, "perform") if rec["worker"] == "Versions"
                   for payloads in rec["batch"].values())
        # Both processes performed async batches, and the sync worker beside them ran too.
        assert len({rec["pid"] for rec in records(tmp_path, "perform") if rec["worker"] == "Versions"}) == 2
        wait_until(lambda: len(performed_ids(tmp_path, "SyncSide")) == 10, timeout=10)
    finally:
        stop_all(processes)


def test_quick_async_performs_take_ids_ahead_and_await_them_one_by_one_in_order_over_two_processes(
        versions, r, redis_url, tmp_path):
    worker = versions.Versions
    # A backlog of distinct ids, queued before the servers start, leaves every shard many due ids at once.
    backlog = {(f"backlog-{i}", 1) for i in range(600)}
    worker.perform_async([{"id": job_id, "payload": {"v": v}, "score": v} for job_id, v in sorted(backlog)])
    processes = [versions_server(tmp_path, redis_url, f"s{n}", APP_BATCH_SIZE="1", APP_PERFORM_SECONDS="0.0005")
                 for n in range(2)]
    try:
        wait_until(lambda: settled(r, {p.pid for p in processes}, worker.shards_count), timeout=20)
        producer = Producer(worker, ids=20, every=0.003).start()
        time.sleep(3)
        enqueued = producer.stop() | backlog
        drain(r, worker, enqueued, tmp_path)
        report = check(tmp_path, enqueued)
        assert (report.lost, report.duplicates, report.overlaps, report.order) == (set(), set(), set(), set()), report
        # One id per perform, whatever was taken ahead with it
        assert all(len(rec["batch"]) == 1 for rec in records(tmp_path, "perform") if rec["worker"] == "Versions")
        histories = IdHistories(r, worker.keys())
        runs = [e for job_id, _ in sorted(backlog) for e in histories.of(job_id).events if e.reason == TAKEN_AHEAD]
        assert runs and max(e.batch_size for e in runs) >= 4, runs[:3]
    finally:
        stop_all(processes)


def test_fifty_batches_in_flight_on_two_threads_finish_200_half_second_performs_within_12_s(app, r, redis_url,
                                                                                            tmp_path):
    server = start_server(tmp_path, redis_url, "--threads", "2", app=ASYNC_APP, env=FAST, name="waiting")
    try:
        wait_until(lambda: any(m.pid == server.pid and len(m.shards.get("Waiting", ())) == 100
                               for m in membership.live(r)), timeout=20)
        started = time.time()
        assert app.Waiting.perform_async([{"id": str(i), "payload": i} for i in range(200)]) == 200
        wait_until(lambda: len(performed_ids(tmp_path, "Waiting")) == 200, timeout=30, interval=0.1)
        finished = max(rec["end"] for rec in records(tmp_path, "perform") if rec["worker"] == "Waiting")
        assert finished - started <= 12, finished - started
        # Many in flight at once: 200 half-second performs one at a time would take 100 s.
        spans = sorted((rec["start"], rec["end"]) for rec in records(tmp_path, "perform") if rec["worker"] == "Waiting")
        most = max(sum(1 for s, e in spans if s <= at < e) for at, _ in spans)
        assert most >= 20, most
    finally:
        server.stop()


def test_a_time_limit_cancels_an_await_and_the_shard_goes_on_and_a_swallowed_cancel_is_flagged_busy(app, r,
                                                                                                   redis_url, tmp_path):
    server = start_server(tmp_path, redis_url, "--threads", "2", app=ASYNC_APP, env=FAST, name="hanging")
    try:
        wait_until(lambda: any(m.pid == server.pid and m.shards.get("Hanging") for m in membership.live(r)),
                   timeout=20)
        app.Hanging.perform_async([{"id": "hang", "payload": "hang", "score": 1},
                                   {"id": "next", "payload": "fine", "score": 2}])
        wait_until(lambda: records(tmp_path, "start"), timeout=10)
        started = records(tmp_path, "start")[0]["t"]
        queries = lowkiq.current().queries(app.Hanging)

        def failed() -> bool:
            job = queries.job("hang")
            return job is not None and job.error is not None

        wait_until(failed, timeout=5, interval=0.05)
        failed_at = time.time()
        assert failed_at - started < 3, failed_at - started
        job = queries.job("hang")
        assert job is not None and "TimeLimitExceeded" in (job.error or ""), job
        # The shard's other id goes on after the cancelled one.
        wait_until(lambda: performed_ids(tmp_path, "Hanging", "done").get("next"), timeout=5)

        # A perform that suppresses the cancellation keeps its shard and is flagged over its limit.
        # (the shard takes ids due at the same time in the order of their names)
        app.Hanging.perform_async([{"id": "held", "payload": "swallow"}, {"id": "later", "payload": "fine"}])
        wait_until(lambda: performed_ids(tmp_path, "Hanging", "cancelled").get("held"), timeout=5)
        console = Console.from_url(redis_url, redis_timeout=5)
        view = console.worker("Hanging")

        def flagged() -> bool:
            _, jobs = busy_jobs(console, view, console.queries(view).busy())
            return any(b.job.id == "held" and b.over_time_limit for b in jobs)

        wait_until(flagged, timeout=5, interval=0.1)
        # Never an overlap: the next id of that shard waits for it.
        assert "later" not in performed_ids(tmp_path, "Hanging", "start")
        wait_until(lambda: performed_ids(tmp_path, "Hanging", "done").get("later"), timeout=15)
        done = {next(iter(rec["batch"])): rec["t"] for rec in records(tmp_path, "done")}
        started_at = {next(iter(rec["batch"])): rec["t"] for rec in records(tmp_path, "start")}
        assert started_at["later"] >= done["held"]
        assert "suppresses asyncio.CancelledError" in server.log()
    finally:
        server.stop()


def test_failures_retry_and_reach_the_morgue_awaiting_an_async_retries_exhausted_with_fencing_tokens(app, r,
                                                                                                   redis_url,
                                                                                                   tmp_path):
    server = start_server(tmp_path, redis_url, "--threads", "2", app=ASYNC_APP, env=FAST, name="flaky")
    try:
        app.AsyncFlaky.perform_async([{"id": "f1", "payload": 1}, {"id": "f2", "payload": 2}])
        wait_until(lambda: len(records(tmp_path, "exhausted")) >= 1
                   and {i for rec in records(tmp_path, "exhausted") for i in rec["ids"]} == {"f1", "f2"}, timeout=20)
        attempts = [rec for rec in records(tmp_path, "attempt") if rec["worker"] == "AsyncFlaky"]
        assert sorted(i for rec in attempts for i in rec["batch"]) == ["f1"] * 3 + ["f2"] * 3
        assert all(len(rec["token"]) == 2 and rec["token"][1] > 0 for rec in attempts)
        errors = [e for rec in records(tmp_path, "exhausted") for e in rec["errors"]]
        assert all("boom" in e for e in errors), errors
        assert {i for chunk in lowkiq.current().queries(app.AsyncFlaky).morgue_ids() for i in chunk} == {"f1", "f2"}
    finally:
        server.stop()


def test_a_sync_and_an_async_worker_of_one_app_both_run_and_a_blocked_loop_is_logged_with_its_worker(app, r,
                                                                                                    redis_url,
                                                                                                    tmp_path):
    server = start_server(tmp_path, redis_url, "--threads", "2", app=ASYNC_APP, env=FAST, name="both")
    try:
        app.SyncRecorder.perform_async([{"id": f"s{i}", "payload": i} for i in range(6)])
        app.AsyncRecorder.perform_async([{"id": f"a{i}", "payload": i} for i in range(30)])
        app.Blocking.perform_async([{"id": "block", "payload": 1}])
        wait_until(lambda: len(performed_ids(tmp_path, "SyncRecorder")) == 6
                   and len(performed_ids(tmp_path, "AsyncRecorder")) == 30
                   and performed_ids(tmp_path, "Blocking"), timeout=20)
        assert {rec["thread"] for rec in records(tmp_path, "perform") if rec["worker"] == "AsyncRecorder"} == \
            {"lowkiq-async"}
        wait_until(lambda: "event loop has been blocked" in server.log(), timeout=5)
        [line] = [line for line in server.log().splitlines() if "event loop has been blocked" in line]
        assert "Blocking shard 0" in line
        # (a batch is acknowledged with its slot's next take: a moment after its perform's record)
        wait_until(lambda: queue_empty(r, app.AsyncRecorder) and queue_empty(r, app.SyncRecorder), timeout=5)
        assert server.stop() == 0
    finally:
        server.kill()


@pytest.mark.parametrize("shape", [{"APP_PERFORM_SECONDS": "0.05"},
                                   {"APP_PERFORM_SECONDS": "0.001", "APP_BATCH_SIZE": "1"}],
                         ids=["batches", "take-ahead"])
def test_kill_9_with_an_async_worker_in_the_mix_costs_only_its_in_flight_batches(versions, r, redis_url, tmp_path,
                                                                                  shape):
    processes = [versions_server(tmp_path, redis_url, f"s{n}", **shape) for n in range(3)]
    try:
        kill_one_of_three(r, versions.Versions, processes, tmp_path, settle=20)
    finally:
        stop_all(processes)


def test_an_async_worker_serves_a_redis_cluster(cluster: Any, tmp_path: Any) -> None:
    module = app_module("async_versions_app")
    lowkiq.configure(redis_url=cluster.url, workers=[module.Versions, module.SyncSide])
    worker = module.Versions
    server = versions_server(tmp_path, cluster.url, "clustered")
    try:
        producer = Producer(worker, ids=20, every=0.005).start()
        time.sleep(3)
        enqueued = producer.stop()
        wait_until(lambda: {(i, p["v"]) for rec in records(tmp_path, "perform") for i, ps in rec["batch"].items()
                            for p in ps} >= enqueued, timeout=30, interval=0.2)
        report = check(tmp_path, enqueued)
        assert (report.lost, report.duplicates, report.overlaps, report.order) == (set(), set(), set(), set()), report
    finally:
        server.stop()
        lowkiq.runtime._current = None
