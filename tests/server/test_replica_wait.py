"""Writes a failover must not undo: lease grants wait for a replica (WAIT), and so does durable_enqueue."""

from __future__ import annotations

import contextlib
import signal
import threading
import uuid
from collections.abc import Iterator

import pytest

import lowkiq
from lowkiq.server.keeper import Keeper
from lowkiq.server.processor import Processor
from lowkiq.store.metrics import queue_metrics

# A Redis Cluster or Sentinels of its own: minutes of setup the fast run leaves out.
pytestmark = pytest.mark.slow


class Mail(lowkiq.Worker):
    queue_name = "wait-mail"
    shards_count = 3

    def perform(self, payloads_by_id):
        pass


@contextlib.contextmanager
def replica_paused(group) -> Iterator[None]:
    """The replica stops reading its primary's stream (SIGSTOP), briefly: the sentinels see nothing to fail over."""
    replica = next(p for p in group.data_ports if p != group.primary())
    group.processes[replica].send_signal(signal.SIGSTOP)
    try:
        yield
    finally:
        group.processes[replica].send_signal(signal.SIGCONT)


@pytest.fixture
def on_sentinel(sentinel):
    runtime = lowkiq.configure(redis_url=sentinel.url, workers=[Mail], durable_enqueue=True, replica_wait=0.3)
    yield runtime
    runtime.close()
    lowkiq.runtime._current = None


def test_without_a_replica_durable_enqueue_raises_naming_the_jobs_it_wrote(configure):
    runtime = configure(workers=[Mail], durable_enqueue=True, replica_wait=0.05)
    jobs = [{"id": f"id-{i}", "payload": i} for i in range(10)]
    with pytest.raises(lowkiq.NotDurable) as raised:
        Mail.perform_async(jobs)
    assert raised.value.unconfirmed == list(range(10))
    assert "no replica of" in str(raised.value) and "10 of 10 jobs" in str(raised.value)
    assert queue_metrics(runtime.client, [Mail.keys()])[0].length == 10  # written to the primary all the same
    assert runtime.client.replica_counts() == {next(iter(runtime.client.replica_counts())): 0}


@pytest.mark.slow
def test_with_a_replica_durable_enqueue_returns_once_it_holds_the_jobs(on_sentinel, sentinel):
    assert on_sentinel.client.replica_counts() == {f"127.0.0.1:{sentinel.primary()}": 1}
    assert Mail.perform_async([{"id": f"id-{i}", "payload": i} for i in range(30)]) == 30
    with replica_paused(sentinel), pytest.raises(lowkiq.NotDurable) as raised:
        Mail.perform_async([{"id": "late", "payload": 1}])
    assert raised.value.unconfirmed == [0]


@pytest.mark.slow
def test_a_grant_no_replica_confirmed_is_released_not_served(on_sentinel, sentinel):
    stop = threading.Event()
    given: list[str] = []
    threads = [Processor(0, on_sentinel, stop, lambda exc, in_perform: None)]
    keeper = Keeper(on_sentinel, threads, member_id=uuid.uuid4().hex)
    threads[0].keeper = keeper
    threads[0].give = lambda lease: given.append(str(lease.shard))  # what the thread would serve
    try:
        keeper.beat()
        keeper.holdings.replicas = on_sentinel.client.replica_counts()
        shards = [(Mail.queue_name, i) for i in range(Mail.shards_count)]
        with replica_paused(sentinel):
            keeper.acquire(shards)
        assert given == [] and keeper.holdings.held() == {}
        lease_hashes = [Mail.keys().shard(i).lease_hash for i in range(Mail.shards_count)]
        primary = sentinel.data(sentinel.primary())
        assert [primary.hget(key, "state") for key in lease_hashes] == [b"released"] * 3

        keeper.acquire(shards)  # the replica follows again: the grants are confirmed
        assert sorted(given) == sorted(str(lease.shard) for lease in keeper.holdings.held().values()) and len(given) == 3
    finally:
        keeper.wire.close(disconnect=True)
        threads[0].wire.close(disconnect=True)


@pytest.mark.slow
def test_durable_enqueue_on_a_cluster_waits_on_every_primary(cluster):
    runtime = lowkiq.configure(redis_url=cluster.url, workers=[Mail], durable_enqueue=True)
    try:
        assert Mail.perform_async([{"id": f"id-{i}", "payload": i} for i in range(60)]) == 60
        assert set(runtime.client.replica_counts().values()) == {1}
    finally:
        runtime.close()
        lowkiq.runtime._current = None
