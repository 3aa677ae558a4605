"""Waking idle servers: a push that gives a shard work earlier than its head publishes on the wake
channel, and a real `lowkiq -r` process sleeping out a long poll starts the job at once."""

from __future__ import annotations

import time

import pytest
from server_support import import_app, records, start_server
from timing_support import wait_until

import lowkiq
from lowkiq.store.keys import WAKE_CHANNEL


@pytest.fixture
def app(configure):
    module = import_app()
    configure(workers=list(module.WORKERS.values()))
    lowkiq.current().clock = time.time
    return module


def heard(pubsub) -> list[str]:
    out = []
    while (message := pubsub.get_message(timeout=0.2)) is not None:
        if message["type"] == "message":
            out.append(message["data"].decode())
    return out


@pytest.mark.slow
def test_a_push_publishes_only_when_it_makes_the_shard_s_earliest_job_earlier(app, r):
    pubsub = r.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(WAKE_CHANNEL)
    heard(pubsub)
    queue = lowkiq.current().queue(app.Recorder)
    shard = queue.shard_of("a")
    later = time.time() + 3600
    app.Recorder.perform_async([{"id": "a", "payload": 1, "perform_in": later}])
    assert heard(pubsub) == [f"Recorder:{shard}"]  # an empty shard got work
    app.Recorder.perform_async([{"id": "a", "payload": 2, "perform_in": later - 60}])
    assert heard(pubsub) == []  # a merge into a queued job keeps its schedule
    b = next(f"b{i}" for i in range(100) if queue.shard_of(f"b{i}") == shard)
    app.Recorder.perform_async([{"id": b, "payload": 1}])
    assert heard(pubsub) == [f"Recorder:{shard}"]  # due now, before the head due in an hour
    c = next(f"c{i}" for i in range(100) if queue.shard_of(f"c{i}") == shard)
    app.Recorder.perform_async([{"id": c, "payload": 1}])
    assert heard(pubsub) == []  # the shard already had work due: its server is busy with it
    pubsub.close()


def started_within(tmp_path, job_id: str, sent: float) -> float:
    wait_until(lambda: any(job_id in rec["batch"] for rec in records(tmp_path, "perform")), timeout=10)
    return next(rec["start"] for rec in records(tmp_path, "perform") if job_id in rec["batch"]) - sent


@pytest.mark.slow
def test_an_idle_server_starts_a_pushed_job_at_once_not_a_poll_later(app, r, redis_url, tmp_path):
    server = start_server(tmp_path, redis_url, "--poll-interval", "30", env={"APP_WORKERS": "Recorder"})
    try:
        wait_until(lambda: r.pubsub_numsub(WAKE_CHANNEL)[0][1] == 1, timeout=15)
        wait_until(lambda: "serves shards Recorder" in server.log(), timeout=15)
        time.sleep(1.0)  # every thread has polled its empty shards and sleeps for 30 s
        for n in range(4):
            sent = time.time()
            app.Recorder.perform_async([{"id": f"quiet{n}", "payload": n}])
            assert started_within(tmp_path, f"quiet{n}", sent) < 3.0
        # The listening connection cut: it comes back and pushes wake the threads again.
        killed = r.client_kill_filter(_type="pubsub")
        assert killed >= 1
        wait_until(lambda: r.pubsub_numsub(WAKE_CHANNEL)[0][1] == 1, timeout=10)
        time.sleep(0.5)
        sent = time.time()
        app.Recorder.perform_async([{"id": "after-cut", "payload": 1}])
        assert started_within(tmp_path, "after-cut", sent) < 3.0
    finally:
        server.kill()


@pytest.mark.slow
def test_operators_actions_that_make_jobs_due_wake_the_idle_server(app, r, redis_url, tmp_path):
    """Perform now and a requeue from the morgue: the job starts at once, not at the server's next poll."""
    server = start_server(tmp_path, redis_url, "--poll-interval", "30", env={"APP_WORKERS": "Recorder"})
    actions = lowkiq.current().actions(app.Recorder)
    pubsub = r.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(WAKE_CHANNEL)
    heard(pubsub)
    try:
        wait_until(lambda: r.pubsub_numsub(WAKE_CHANNEL)[0][1] == 2, timeout=15)
        wait_until(lambda: "serves shards Recorder" in server.log(), timeout=15)
        later = time.time() + 3600
        app.Recorder.perform_async([{"id": "scheduled", "payload": 1, "perform_in": later},
                                    {"id": "buried", "payload": 1, "perform_in": later}])
        assert actions.kill(["buried"]) == 1
        time.sleep(1.0)  # every thread has looked at its shards and sleeps for 30 s
        heard(pubsub)
        sent = time.time()
        assert actions.perform_now(["scheduled"]) == 1
        assert started_within(tmp_path, "scheduled", sent) < 3.0
        assert heard(pubsub) == [f"Recorder:{lowkiq.current().queue(app.Recorder).shard_of('scheduled')}"]
        time.sleep(1.0)
        sent = time.time()
        assert actions.morgue_requeue_all() == 1
        assert started_within(tmp_path, "buried", sent) < 3.0
        # the server of the shard that got work is told; shards that held no dead job are not visited
        assert heard(pubsub) == [f"Recorder:{lowkiq.current().queue(app.Recorder).shard_of('buried')}"]
    finally:
        pubsub.close()
        server.kill()


@pytest.mark.slow
def test_on_a_cluster_a_push_to_any_primary_wakes_the_idle_server(cluster):
    import threading

    from cluster_support import covering_worker

    from lowkiq.server import Server

    started: dict[str, float] = {}

    def perform(self, payloads_by_id):
        for job_id in payloads_by_id:
            started[job_id] = time.time()

    worker = covering_worker(cluster, "wake", 6, perform=perform, batch_size=1)
    runtime = lowkiq.configure(redis_url=cluster.url, workers=[worker], threads_per_node=2, poll_interval=30,
                               heartbeat_interval=0.2, settle=0.2, lease_ttl=3)
    server = Server(runtime)
    thread = threading.Thread(target=lambda: server.run(handle_signals=False), daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.waker is not None and server.waker.subscribed.is_set(), timeout=15)
        queue = runtime.queue(worker)
        wait_until(lambda: server.keeper is not None and server.keeper.pool is not None
                   and len(server.keeper.pool.shards() or ()) == worker.shards_count, timeout=15)
        time.sleep(1.0)  # every thread has found its shards empty and sleeps for 30 s
        for shard in range(worker.shards_count):  # the shards live on every primary
            job_id = next(f"j{i}" for i in range(1000) if queue.shard_of(f"j{i}") == shard)
            sent = time.time()
            worker.perform_async([{"id": job_id, "payload": shard}])
            wait_until(lambda job_id=job_id: job_id in started, timeout=10)
            assert started[job_id] - sent < 3.0, shard
    finally:
        server.shutdown()
        thread.join(20)
        runtime.close()
        lowkiq.runtime._current = None
