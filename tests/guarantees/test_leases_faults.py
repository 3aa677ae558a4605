"""Shard leases under faults, with real `lowkiq -r` processes and a real redis-server.

Each test runs hot ids (rising versions, enqueued while the scenario runs) through several server
processes, breaks something (rolling restart, kill -9, SIGSTOP, a crashing job, twins), waits for the
queues to drain, and checks the execution log: nothing lost, nothing run twice beyond what the
guarantees allow, no id performed in two places at once, versions in order.
"""

from __future__ import annotations

import signal
import time

import pytest
from execution_checks import Producer, check
from fault_support import (
    drain,
    holdings,
    in_processing,
    kill_one_of_three,
    member_of,
    restored_by_takeover,
    server,
    settled,
    stop_all,
)
from server_support import records
from timing_support import wait_until

import lowkiq
from lowkiq.store.id_history import TAKEN_AHEAD, IdHistories

pytestmark = [pytest.mark.slow, pytest.mark.guarantee]

# Batches of two (the app's default), and batch_size 1 with quick performs: ids taken ahead (docs/take-ahead.md).
SHAPES = {"batches": {}, "take-ahead": {"APP_BATCH_SIZE": "1", "APP_PERFORM_SECONDS": "0.002"}}

@pytest.mark.parametrize("shape", SHAPES)
def test_a_rolling_restart_under_load_runs_nothing_twice_and_loses_nothing(shape, versions, r, redis_url, tmp_path):
    shards = versions.shards_count
    env = SHAPES[shape]
    running = [server(tmp_path, redis_url, f"s{n}", **env) for n in range(3)]
    everyone = list(running)
    try:
        wait_until(lambda: settled(r, {p.pid for p in running}, shards), timeout=15)
        producer = Producer(versions).start()
        backlog: set[tuple[str, int]] = set()
        for round_ in range(3):
            # A backlog of distinct ids for each hand-over to find: the hot ids alone seldom leave a shard more
            # than one due id at a time, so its thread would have nothing to take ahead.
            burst = {(f"backlog{round_}-{i}", 1) for i in range(240)}
            versions.perform_async([{"id": job_id, "payload": {"v": v}} for job_id, v in sorted(burst)])
            backlog |= burst
            new = server(tmp_path, redis_url, f"new{round_}", **env)
            everyone.append(new)
            running.append(new)
            wait_until(lambda new=new: holdings(r).get(new.pid), timeout=15)  # it holds shards: it is serving
            time.sleep(0.5)
            oldest = running.pop(0)
            assert oldest.stop() == 0
            wait_until(lambda: settled(r, {p.pid for p in running}, shards), timeout=15)
        enqueued = producer.stop() | backlog
        drain(r, versions, enqueued, tmp_path)
        report = check(tmp_path, enqueued)
        assert report.performs > 100, report
        assert (report.lost, report.duplicates, report.overlaps, report.order) == (set(), set(), set(), set()), report
        assert restored_by_takeover(everyone) == []  # every shard was handed over, none taken over
        assert taken_ahead(r, versions, enqueued) == (shape == "take-ahead")
    finally:
        stop_all(everyone)


@pytest.mark.parametrize("shape", SHAPES)
def test_kill_9_of_one_of_three_costs_only_its_in_flight_batches(shape, versions, r, redis_url, tmp_path):
    env = {"APP_PERFORM_SECONDS": "0.05", **SHAPES[shape]}
    processes = [server(tmp_path, redis_url, f"s{n}", **env) for n in range(3)]
    try:
        kill_one_of_three(r, versions, processes, tmp_path)
    finally:
        stop_all(processes)


def taken_ahead(r, worker, enqueued) -> bool:
    """Whether the histories of the enqueued ids show a take-ahead run."""
    histories = IdHistories(r, worker.keys())
    return any(e.reason == TAKEN_AHEAD for job_id in sorted({i for i, _ in enqueued})
               for e in histories.of(job_id).events)


def test_a_process_paused_past_its_lease_is_fenced_when_it_resumes(versions, r, redis_url, tmp_path):
    shards = versions.shards_count
    paused = server(tmp_path, redis_url, "paused", APP_HANG="1")
    other = server(tmp_path, redis_url, "other")
    processes = [paused, other]
    try:
        wait_until(lambda: settled(r, {paused.pid, other.pid}, shards), timeout=15)
        q = lowkiq.current().queue(versions)
        slow_id = next(f"slow{i}" for i in range(1000) if q.shard_of(f"slow{i}") in holdings(r)[paused.pid])
        producer = Producer(versions).start()
        versions.perform_async([{"id": slow_id, "payload": {"v": 1, "hang": 3}, "score": 1}])
        wait_until(lambda: any(rec["pid"] == paused.pid and slow_id in rec["batch"]
                               for rec in records(tmp_path, "start")), timeout=10)
        owner = member_of(r, paused.pid)
        paused.signal(signal.SIGSTOP)
        stopped_at = time.time()
        allowed = in_processing(r, versions, owner)  # frozen now: what it had in flight
        try:
            # The other process takes the paused one's shards over and runs the hung batch again.
            wait_until(lambda: any(rec["pid"] == other.pid and slow_id in rec["batch"]
                                   for rec in records(tmp_path, "perform")), timeout=10)
            assert time.time() - stopped_at < 10
            time.sleep(max(0.0, stopped_at + 4 - time.time()))  # paused for 2 x lease_ttl
        finally:
            paused.signal(signal.SIGCONT)
        # It finishes the perform it was in, and its acknowledgement is refused.
        wait_until(lambda: "lost the lease" in paused.log(), timeout=10)
        wait_until(lambda: any(rec["pid"] == paused.pid and slow_id in rec["batch"]
                               for rec in records(tmp_path, "perform")), timeout=10)
        enqueued = producer.stop() | {(slow_id, 1)}
        drain(r, versions, enqueued, tmp_path)
        report = check(tmp_path, enqueued)
        assert (report.lost, report.order) == (set(), set()), report
        allowed_ids = {job_id for job_id, _ in allowed}
        assert report.duplicates <= allowed, (report, allowed)
        assert report.overlaps <= allowed_ids, (report, allowed_ids)
        assert (slow_id, 1) in report.duplicates  # ran on both: once paused, once taken over
    finally:
        paused.signal(signal.SIGCONT)
        stop_all(processes)


@pytest.mark.parametrize("hints", [(("2", "0"), ("2", "0")), (("2", "0"), ("3", "1"))],
                         ids=["same-node-number", "different-nodes"])
def test_misconfigured_node_numbers_never_overlap_nor_leave_a_shard_unserved(versions, r, redis_url, tmp_path, hints):
    shards = versions.shards_count
    processes = [server(tmp_path, redis_url, f"s{n}", "--nodes", nodes, "--node-number", number)
                 for n, (nodes, number) in enumerate(hints)]
    try:
        wait_until(lambda: settled(r, {p.pid for p in processes}, shards), timeout=15)
        producer = Producer(versions).start()
        time.sleep(3)
        enqueued = producer.stop()
        drain(r, versions, enqueued, tmp_path)
        report = check(tmp_path, enqueued)
        assert (report.lost, report.duplicates, report.overlaps, report.order) == (set(), set(), set(), set()), report
        assert all(holdings(r)[p.pid] for p in processes)  # both serve
        if hints[0] == hints[1]:
            assert any("also started with --nodes 2 --node-number 0" in p.log() for p in processes)
    finally:
        stop_all(processes)


def test_a_job_that_kills_its_server_reaches_the_morgue_after_the_crash_limit(versions, r, redis_url, tmp_path):
    env = {"APP_BATCH_SIZE": "1", "LOWKIQ_CRASH_LIMIT": "3"}
    processes = [server(tmp_path, redis_url, f"s{n}", **env) for n in range(2)]
    everyone = list(processes)
    try:
        wait_until(lambda: settled(r, {p.pid for p in processes}, versions.shards_count), timeout=15)
        others = {(f"ok{i}", 1) for i in range(40)}
        versions.perform_async([{"id": "bomb", "payload": {"v": 1, "crash": True}, "score": 1}])
        versions.perform_async([{"id": job_id, "payload": {"v": v}, "score": v} for job_id, v in others])
        queries = lowkiq.current().queries(versions)
        deadline = time.monotonic() + 45
        while queries.morgue_job("bomb") is None:
            assert time.monotonic() < deadline, "the job never reached the morgue"
            for n, p in enumerate(processes):  # a supervisor restarts what died
                if p.process.poll() is not None:
                    processes[n] = server(tmp_path, redis_url, f"restart{len(everyone)}", **env)
                    everyone.append(processes[n])
            time.sleep(0.2)
        dead = queries.morgue_job("bomb")
        assert "died while performing this job 3 times" in dead.error
        crashes = sum(1 for p in everyone if p.process.poll() == -signal.SIGKILL)
        assert crashes == 3
        # Its neighbours in flight on the other thread at the first crash ran alone after it, not beside it again.
        assert [job_id for job_id, _ in sorted(others) if queries.morgue_job(job_id) is not None] == []
        # The last process killed is not restarted: its shards wait out its lease before a survivor takes them.
        drain(r, versions, others, tmp_path, timeout=60)
        report = check(tmp_path, others)
        assert (report.lost, report.overlaps) == (set(), set()), report
    finally:
        stop_all(everyone)


def test_joins_and_leaves_balance_the_shards_and_lose_nothing(versions, r, redis_url, tmp_path):
    env = {"APP_SHARDS": "24"}
    first = server(tmp_path, redis_url, "first", **env)
    processes = [first]
    try:
        # The test enqueues with a 24-shard worker, as the servers run it.
        wide = type("Versions", (lowkiq.Worker,), {"shards_count": 24, "queue_name": "Versions",
                                                    "perform": lambda self, batch: None})
        wait_until(lambda: len(holdings(r).get(first.pid, ())) == 24, timeout=15)
        producer = Producer(wide).start()
        processes += [server(tmp_path, redis_url, f"join{n}", **env) for n in range(2)]
        wait_until(lambda: settled(r, {p.pid for p in processes}, 24)
                   and all(7 <= len(s) <= 9 for s in holdings(r).values()), timeout=15)
        assert processes[1].stop() == 0
        left = [processes[0], processes[2]]
        wait_until(lambda: settled(r, {p.pid for p in left}, 24)
                   and all(11 <= len(s) <= 13 for s in holdings(r).values()), timeout=15)
        enqueued = producer.stop()
        drain(r, wide, enqueued, tmp_path)
        report = check(tmp_path, enqueued)
        assert (report.lost, report.duplicates, report.overlaps, report.order) == (set(), set(), set(), set()), report
    finally:
        stop_all(processes)


def test_a_hung_perform_delays_a_stop_at_most_shutdown_timeout_and_a_second_signal_not_at_all(
        versions, r, redis_url, tmp_path):
    hung = server(tmp_path, redis_url, "hung", APP_HANG="1", LOWKIQ_SHUTDOWN_TIMEOUT="30")
    processes = [hung]
    try:
        wait_until(lambda: settled(r, {hung.pid}, versions.shards_count), timeout=15)
        versions.perform_async([{"id": "stuck", "payload": {"v": 1, "hang": 60}, "score": 1}])
        wait_until(lambda: any("stuck" in rec["batch"] for rec in records(tmp_path, "start")), timeout=10)
        rescuer = server(tmp_path, redis_url, "rescuer")
        processes.append(rescuer)
        hung.signal(signal.SIGTERM)
        time.sleep(1)
        assert hung.process.poll() is None  # waiting for the hung perform
        started = time.monotonic()
        hung.signal(signal.SIGTERM)
        assert hung.wait(10) == 0
        assert time.monotonic() - started < 3
        # The hung batch's shard is taken over when its lease expires, and the batch runs there.
        wait_until(lambda: any(rec["pid"] == rescuer.pid and "stuck" in rec["batch"]
                               for rec in records(tmp_path, "perform")), timeout=15)
        # Every other shard was released at once, not left to expire.
        assert "exiting with 1 performs still running" in hung.log()

        short = server(tmp_path, redis_url, "short", APP_HANG="1", LOWKIQ_SHUTDOWN_TIMEOUT="2")
        processes.append(short)
        wait_until(lambda: holdings(r).get(short.pid), timeout=15)
        q = lowkiq.current().queue(versions)
        stuck_id = next(f"stuck{i}" for i in range(1000) if q.shard_of(f"stuck{i}") in holdings(r)[short.pid])
        versions.perform_async([{"id": stuck_id, "payload": {"v": 1, "hang": 60}, "score": 1}])
        wait_until(lambda: any(rec["pid"] == short.pid and stuck_id in rec["batch"]
                               for rec in records(tmp_path, "start")), timeout=10)
        started = time.monotonic()
        short.signal(signal.SIGTERM)
        assert short.wait(15) == 0
        assert 1.5 < time.monotonic() - started < 6
    finally:
        stop_all(processes)
