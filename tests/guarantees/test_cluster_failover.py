"""Failovers on a real Redis Cluster: a manual one under a held connection, and kill -9 of a
primary under a running server."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis
from cluster_support import covering_worker
from queue_support import held_lease
from timing_support import wait_until

import lowkiq
from lowkiq.server import Server
from lowkiq.store import codec, lua
from lowkiq.store.metrics import queue_metrics
from lowkiq.transport import keyset_slot


def port_of(node_name: str) -> int:
    return int(node_name.rpartition(":")[2])


@pytest.mark.slow
def test_a_manual_failover_is_followed_by_a_held_wire(cluster):
    worker = covering_worker(cluster, "manual", 6)
    runtime = lowkiq.configure(redis_url=cluster.url, workers=[worker])
    try:
        worker.perform_async([{"id": f"j{i}"} for i in range(60)])
        q = runtime.queue(worker)
        shard = worker.keys().shard(0)
        slot = keyset_slot(shard)
        primary = cluster.owner(slot)
        wire = lua.Wire(runtime.new_client(2))  # a server thread's connection, held across the failover
        lease = held_lease(q, 0)
        first = q.ack_and_take(None, (lease, 1), wire=wire).jobs
        runtime.client.client_for(shard.tag).execute_command("WAIT", 1, 2000)
        replica = cluster.replica_of(primary)
        cluster.client(replica).execute_command("CLUSTER FAILOVER")
        wait_until(lambda: cluster.client(replica).execute_command("ROLE")[0] == b"master", 15)
        cluster.wait_ok()
        # MOVED from the demoted primary, then NOSCRIPT on the promoted replica: neither reaches the caller
        taken = q.ack_and_take((lease, [j.id for j in first]), (lease, 1), wire=wire)
        assert taken.jobs
        assert port_of(wire.transport.topology().node_for(slot).name) == replica
        [m] = queue_metrics(runtime.client, [worker.keys()])
        assert (m.length, m.busy, m.processed) == (58, 1, 1)
        wire.close()
    finally:
        runtime.close()
        lowkiq.runtime._current = None


class Recorder:
    """What every perform did: (id, payload versions, start, end) per call, across threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.calls: list[tuple[str, tuple[Any, ...], float, float]] = []

    def record(self, payloads_by_id: dict[str, list[Any]], start: float) -> None:
        end = time.monotonic()
        with self.lock:
            for job_id, payloads in payloads_by_id.items():
                self.calls.append((job_id, tuple(payloads), start, end))

    def performed(self) -> set[tuple[str, Any]]:
        with self.lock:
            return {(job_id, p) for job_id, payloads, _, _ in self.calls for p in payloads}

    def overlaps(self) -> list[str]:
        by_id: dict[str, list[tuple[float, float]]] = {}
        with self.lock:
            for job_id, _, start, end in self.calls:
                by_id.setdefault(job_id, []).append((start, end))
        return [i for i, spans in by_id.items()
                if any(a[1] > b[0] for a, b in zip(sorted(spans), sorted(spans)[1:], strict=False))]


def recording_worker(cluster, prefix: str, shards_count: int, recorder: Recorder) -> type[lowkiq.Worker]:
    """A worker whose shards cover every primary and whose perform only records what it got."""

    def perform(self: Any, payloads_by_id: dict[str, list[Any]]) -> None:
        start = time.monotonic()
        time.sleep(0.001)
        recorder.record(payloads_by_id, start)

    return covering_worker(cluster, prefix, shards_count, perform=perform, batch_size=4)


@contextmanager
def serving(url: str, worker: type[lowkiq.Worker], threads: int) -> Iterator[list[int]]:
    """A lowkiq server running in this process; yields its exit codes (empty while it runs)."""
    runtime = lowkiq.configure(redis_url=url, workers=[worker], threads_per_node=threads, poll_interval=0.05,
                               heartbeat_interval=0.2, settle=0.2, lease_ttl=3)
    server = Server(runtime)
    exits: list[int] = []
    thread = threading.Thread(target=lambda: exits.append(server.run(handle_signals=False)), daemon=True)
    thread.start()
    try:
        yield exits
    finally:
        server.shutdown()
        thread.join(20)
        runtime.close()
        lowkiq.runtime._current = None


@pytest.mark.slow
def test_kill_9_of_a_primary_under_load_processing_resumes_on_every_shard():
    from redis_cluster import RedisCluster

    cluster = RedisCluster().start()
    recorder = Recorder()
    worker = recording_worker(cluster, "killed", 6, recorder)
    ids = [f"id{i}" for i in range(120)]

    def enqueue(version: int) -> set[tuple[str, Any]]:
        """Every id with this payload version, retried until Redis took all of them."""
        pending = list(ids)
        deadline = time.monotonic() + 30
        while pending:
            try:
                worker.perform_async([{"id": i, "payload": version} for i in pending])
                pending = []
            except lowkiq.PartialEnqueue as exc:
                pending = [pending[n] for n in exc.not_written + exc.uncertain]
            except (redis.ConnectionError, redis.ResponseError):
                pass
            if pending:
                assert time.monotonic() < deadline, f"{len(pending)} jobs not enqueued in 30 s"
                time.sleep(0.1)
        return {(i, version) for i in ids}

    try:
        with serving(cluster.url, worker, threads=3) as exits:
            expected = enqueue(1)
            wait_until(lambda: expected <= recorder.performed(), 20)
            victim = cluster.owner(keyset_slot(worker.keys().shard(0)))
            stop_producing = threading.Event()

            def produce() -> None:
                version = 2
                while not stop_producing.is_set():
                    enqueue(version)
                    version += 1
                    time.sleep(0.05)

            producer = threading.Thread(target=produce, daemon=True)
            producer.start()
            time.sleep(0.5)
            killed_at = time.monotonic()
            cluster.kill(victim)
            cluster.wait_ok(20)  # the replica took over
            stop_producing.set()
            producer.join(30)
            after = enqueue(1000)  # enqueued after the failover: none may be lost
            wait_until(lambda: after <= recorder.performed(), max(1.0, killed_at + 30 - time.monotonic()))
            served_again = {codec.shard_of(i, worker.shards_count) for i, v in recorder.performed() if v == 1000}
            assert served_again == set(range(worker.shards_count))
            assert recorder.overlaps() == []
            assert not exits, "the server stopped"
    finally:
        cluster.stop()


@pytest.mark.slow
def test_a_busy_shards_slot_migrates_with_no_error_no_loss_no_duplicate(cluster, caplog):
    from cluster_support import move_slot, other_primary

    recorder = Recorder()
    worker = recording_worker(cluster, "migrating", 4, recorder)
    ids = [i for i in (f"m{n}" for n in range(400)) if codec.shard_of(i, worker.shards_count) == 0][:40]
    slot = keyset_slot(worker.keys().shard(0))
    source = cluster.owner(slot)
    versions = range(1, 31)

    def produce() -> None:
        for version in versions:
            worker.perform_async([{"id": i, "payload": version} for i in ids])
            time.sleep(0.02)

    with serving(cluster.url, worker, threads=2) as exits:
        caplog.set_level("WARNING", logger="lowkiq")
        producer = threading.Thread(target=produce, daemon=True)
        producer.start()
        time.sleep(0.2)
        move_slot(cluster, slot, other_primary(cluster, source))
        time.sleep(0.2)
        move_slot(cluster, slot, source)
        producer.join(30)
        expected = {(i, v) for i in ids for v in versions}
        wait_until(lambda: expected <= recorder.performed(), 20)
        performed = [(job_id, p) for job_id, payloads, _, _ in recorder.calls for p in payloads]
        assert len(performed) == len(set(performed)), "a version ran twice"
        assert recorder.overlaps() == []
        assert [r.getMessage() for r in caplog.records if "Redis error" in r.getMessage()] == []
        assert not exits
