"""`lowkiq -r app.py` as a subprocess against a real Redis: what a user of the server relies on."""

from __future__ import annotations

import itertools
import re
import signal
import time

import pytest
from server_support import FAST_LEASES, busy_count, ids_per_shard, performed_ids, queue_empty, records, start_server
from timing_support import wait_until

from lowkiq.store import membership
from lowkiq.store.codec import shard_of

pytestmark = [pytest.mark.slow, pytest.mark.guarantee]



def counter(r, worker, name: str) -> int:
    return sum(int(r.hget(s.counters_hash, name) or 0) for s in worker.keys().shards())


def test_jobs_are_processed_in_score_order_in_batches_then_sigterm_exits_0(app, r, redis_url, tmp_path):
    versions = [3, 1, 2, 5, 4]  # enqueued out of order: perform must see them by score
    app.Recorder.perform_async([{"id": i, "payload": {"v": v}, "score": v} for v in versions for i in range(40)])
    app.Other.perform_async([{"id": f"o{i}"} for i in range(10)])
    server = start_server(tmp_path, redis_url, "--poll-interval", "0.2",
                          env={"APP_WORKERS": "Recorder,Other", "APP_BATCH_SIZE": "3"})
    try:
        wait_until(lambda: len(performed_ids(tmp_path, "Recorder")) == 40 and len(performed_ids(tmp_path, "Other")) == 10)
        done = performed_ids(tmp_path, "Recorder")
        assert all(done[str(i)] == [[{"v": v} for v in sorted(versions)]] for i in range(40))
        sizes = [len(rec["batch"]) for rec in records(tmp_path, "perform") if rec["worker"] == "Recorder"]
        assert max(sizes) == 3 and sum(sizes) == 40
        assert records(tmp_path)[0]["kind"] == "init"  # on_server_init ran before any perform
        # A job enqueued while the server idles is picked up within the poll interval.
        app.Recorder.perform_async([{"id": "late", "payload": "x"}])
        wait_until(lambda: "late" in performed_ids(tmp_path, "Recorder"), timeout=5)
        wait_until(lambda: queue_empty(r, app.Recorder) and queue_empty(r, app.Other))
        assert counter(r, app.Recorder, "processed") == 41
        started = time.monotonic()
        assert server.stop() == 0
        assert time.monotonic() - started < 3
        assert "SIGTERM: stopping" in server.log()
    finally:
        server.kill()


def test_failures_retry_after_retry_in_then_reach_the_morgue(app, r, redis_url, tmp_path):
    app.Flaky.perform_async([{"id": "f1", "payload": "p"}])
    server = start_server(tmp_path, redis_url, "--poll-interval", "0.1", env={"APP_WORKERS": "Flaky"})
    try:
        wait_until(lambda: records(tmp_path, "exhausted"))
        attempts = [rec["t"] for rec in records(tmp_path, "attempt")]
        assert len(attempts) == 1 + app.Flaky.max_retry_count
        for count, (before, after) in enumerate(itertools.pairwise(attempts)):
            expected = 0.3 * (count + 1)  # Flaky.retry_in(retry_count) for retry_count 0, 1, 2
            assert expected - 0.02 <= after - before <= expected + 0.5
        exhausted = records(tmp_path, "exhausted")
        assert [(e["ids"], e["errors"]) for e in exhausted] == [(["f1"], ["ValueError: boom f1"])]
        dead = app.lowkiq.current().queries(app.Flaky).morgue_job("f1")
        assert dead.error == "ValueError: boom f1" and [p for p, _ in dead.payloads] == ["p"]
        assert "in perform" in dead.traceback and dead.traceback.rstrip().endswith("ValueError: boom f1")
        assert queue_empty(r, app.Flaky)
        assert counter(r, app.Flaky, "failed") == 4
        assert "Flaky shard" in server.log() and "ids [f1] failed: ValueError: boom f1" in server.log()
    finally:
        server.kill()


def test_kill_9_in_the_middle_of_perform_loses_nothing(app, r, redis_url, tmp_path):
    ids = [f"s{i}" for i in range(6)]
    app.Slow.perform_async([{"id": i, "payload": i} for i in ids])
    env = {"APP_WORKERS": "Slow", "APP_SLOW_SECONDS": "1.5", **FAST_LEASES}
    first = start_server(tmp_path, redis_url, "--poll-interval", "0.1", env=env, name="first")
    wait_until(lambda: records(tmp_path, "start"))
    first.process.send_signal(signal.SIGKILL)
    first.wait()
    in_flight = {i for rec in records(tmp_path, "start") for i in rec["batch"]}
    # Threads may have taken batches whose perform had not written its record yet.
    left_in_processing = busy_count(r, app.Slow)
    assert left_in_processing >= len(in_flight) > 0
    assert not records(tmp_path, "done")

    second = start_server(tmp_path, redis_url, "--poll-interval", "0.1", env=env, name="second")
    try:
        wait_until(lambda: {i for rec in records(tmp_path, "done") for i in rec["batch"]} == set(ids), timeout=20)
        wait_until(lambda: queue_empty(r, app.Slow))
        # The dead process's leases expired: the new one took its shards over with their batches.
        restored = re.findall(r"(\d+) jobs of its in-flight batch went back to the queue", second.log())
        assert sum(map(int, restored)) == left_in_processing
        assert second.stop() == 0
    finally:
        second.kill()


def test_sigterm_finishes_the_in_flight_batch_acknowledges_it_and_releases_the_shards(app, r, redis_url, tmp_path):
    app.Slow.perform_async([{"id": i} for i in ids_per_shard(app.Slow, 1)])
    server = start_server(tmp_path, redis_url, env={"APP_WORKERS": "Slow", "APP_SLOW_SECONDS": "1"})
    try:
        wait_until(lambda: records(tmp_path, "start"))
        server.signal(signal.SIGTERM)
        assert server.wait() == 0
        # Threads finish in any order: compare the batches, not the order of their records.
        started = sorted(sorted(rec["batch"]) for rec in records(tmp_path, "start"))
        done = sorted(sorted(rec["batch"]) for rec in records(tmp_path, "done"))
        assert started and started == done  # every batch that began also finished
        assert busy_count(r, app.Slow) == 0  # and was acknowledged before exit
        assert counter(r, app.Slow, "processed") == sum(map(len, done))
        leases = [r.hgetall(s.lease_hash) for s in app.Slow.keys().shards()]
        assert {lease[b"state"] for lease in leases} == {b"released"}  # handed over, not left to expire
        assert membership.live(r) == []
    finally:
        server.kill()


def test_idle_server_stops_at_once_and_sigttin_dumps_every_thread(app, redis_url, tmp_path):
    server = start_server(tmp_path, redis_url, "--poll-interval", "5", "--threads", "3",
                          env={"APP_WORKERS": "Recorder"})
    try:
        wait_until(lambda: all(f"thread {n} started" in server.log() for n in range(3)))
        server.signal(signal.SIGTTIN)
        dump = tmp_path / "ttin.txt"
        wait_until(lambda: dump.exists() and "lowkiq-2" in dump.read_text())
        text = dump.read_text()
        assert all(f"thread lowkiq-{n}" in text for n in range(3)) and "MainThread" in text
        assert "in run" in text  # real stacks, not just names
        wait_until(lambda: "thread dump" in server.log())
        started = time.monotonic()
        server.signal(signal.SIGTERM)
        assert server.wait() == 0
        assert time.monotonic() - started < 2  # far below the 5 s poll interval
    finally:
        server.kill()


def test_by_node_over_two_processes_covers_every_shard_exactly_once(app, r, redis_url, tmp_path):
    recorder_ids = ids_per_shard(app.Recorder, 3)
    other_ids = [f"o{i}" for i in ids_per_shard(app.Other, 3)]
    env = {"APP_WORKERS": "Recorder,Other"}
    nodes = [start_server(tmp_path, redis_url, "--nodes", "2", "--node-number", str(n), "--threads", "2",
                          "--poll-interval", "0.1", env=env, name=f"node{n}") for n in range(2)]
    every_shard = [f"Recorder{s}" for s in range(4)] + [f"Other{s}" for s in range(3)]
    # Once settled, the leases follow the hint: each process holds its Lowkiq part (shards dealt
    # round-robin to the two nodes), together every shard exactly once.
    parts = {n.pid: set(every_shard[number::2]) for number, n in enumerate(nodes)}

    def holdings():
        return {m.pid: {f"{q}{i}" for q, indexes in m.shards.items() for i in indexes} for m in membership.live(r)}

    try:
        wait_until(lambda: holdings() == parts, timeout=15)
        app.Recorder.perform_async([{"id": i} for i in recorder_ids])
        app.Other.perform_async([{"id": i} for i in other_ids])
        wait_until(lambda: len(performed_ids(tmp_path, "Recorder")) == len(recorder_ids)
                   and len(performed_ids(tmp_path, "Other")) == len(other_ids))
        owners: dict[str, set[int]] = {}
        for rec in records(tmp_path, "perform"):
            worker = app.WORKERS[rec["worker"]]
            for job_id in rec["batch"]:
                owners.setdefault(f"{worker.__name__}{shard_of(job_id, worker.shards_count)}", set()).add(rec["pid"])
        assert sorted(owners) == sorted(every_shard)
        # each shard's jobs ran in the one process whose part it is
        assert {shard: pids for shard, pids in owners.items()} == {
            shard: {pid} for pid, part in parts.items() for shard in part}
        assert all(n.stop() == 0 for n in nodes)
    finally:
        for n in nodes:
            n.kill()


def test_system_exit_in_perform_fails_the_batch_and_stops_the_process(app, r, redis_url, tmp_path):
    app.Exiting.perform_async([{"id": "x", "payload": "keep"}])
    server = start_server(tmp_path, redis_url, env={"APP_WORKERS": "Exiting"})
    try:
        assert server.wait() == 1
        job = app.lowkiq.current().queries(app.Exiting).job("x")
        assert job.retry_count == 0 and [p for p, _ in job.payloads] == ["keep"]
        assert "SystemExit" in server.log()
    finally:
        server.kill()


@pytest.mark.slow
def test_a_lone_server_serves_at_its_first_heartbeat_and_a_leaving_one_is_taken_over_at_once(app, r, redis_url,
                                                                                             tmp_path):
    """Only arrivals wait for the membership to settle: a first view and a departure are acted on at once,
    and a member that comes or leaves tells the others (Pub/Sub), so they do not wait for their next beat.
    With settle and heartbeats of 10 s, anything that waited for them would miss these bounds."""
    slow = {"APP_WORKERS": "Recorder", "LOWKIQ_SETTLE": "10", "LOWKIQ_HEARTBEAT_INTERVAL": "10",
            "LOWKIQ_LEASE_TTL": "60"}
    app.Recorder.perform_async([{"id": "first"}])
    started = time.monotonic()
    a = start_server(tmp_path, redis_url, "--poll-interval", "0.1", env=slow, name="a")
    b = None
    try:
        wait_until(lambda: "first" in performed_ids(tmp_path, "Recorder"), timeout=8)
        assert time.monotonic() - started < 8  # not after a settle of 10 s
        b = start_server(tmp_path, redis_url, "--poll-interval", "0.1", env=slow, name="b")
        wait_until(lambda: {m.pid for m in membership.live(r)} == {a.pid, b.pid}, timeout=8)
        assert a.stop() == 0  # a graceful stop: its shards released, the others told
        app.Recorder.perform_async([{"id": f"after{i}"} for i in range(20)])  # in every shard
        left = time.monotonic()
        wait_until(lambda: len([i for i in performed_ids(tmp_path, "Recorder") if i.startswith("after")]) == 20,
                   timeout=8)
        assert time.monotonic() - left < 8  # not after b's next heartbeat, 10 s away
        assert {rec["pid"] for rec in records(tmp_path, "perform") if any(i.startswith("after") for i in rec["batch"])} \
            == {b.pid}
    finally:
        a.kill()
        if b is not None:
            b.kill()
