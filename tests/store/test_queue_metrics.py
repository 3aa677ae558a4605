"""Every metric, per queue and per shard, in one round trip."""

import pytest
from queue_support import OrdersWorker, RoundTrips, actions, fail, held_lease, queue

import lowkiq
from lowkiq.store.metrics import queue_metrics


class OtherWorker(lowkiq.Worker):
    shards_count = 2

    def perform(self, payloads_by_id):
        pass


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OrdersWorker, OtherWorker])


def metrics(clock):
    return queue_metrics(queue().client, [OrdersWorker.keys(), OtherWorker.keys()], now=clock.now)


def test_empty_queues(clock):
    for m in metrics(clock):
        assert (m.length, m.fresh, m.retries, m.morgue_length, m.busy, m.processed, m.failed, m.lag) == (0, 0, 0, 0, 0, 0, 0, 0.0)


def test_every_metric(clock, monkeypatch):
    q = queue()
    # Each state is set up while its job is the only ready one of its shard.
    take_only = lambda job_id: q.ack_and_take(None, (held_lease(q, q.shard_of(job_id)), 1)).jobs  # noqa: E731
    OrdersWorker.perform_async([{"id": "retry"}])
    take_only("retry")
    fail("retry", clock.now + 30)
    OrdersWorker.perform_async([{"id": "done"}])
    q.ack_and_take((held_lease(q, q.shard_of("done")), [j.id for j in take_only("done")]), None)
    OrdersWorker.perform_async([{"id": "dead"}])
    for _ in range(OrdersWorker.max_retry_count + 1):
        take_only("dead")
        fail("dead", clock.now)
    OrdersWorker.perform_async([{"id": "busy"}])
    take_only("busy")
    OrdersWorker.perform_async([{"id": i, "perform_in": clock.now - i} for i in range(1, 8)])
    OrdersWorker.perform_async([{"id": "later", "perform_in": clock.now + 100}])
    OtherWorker.perform_async([{"id": "o", "perform_in": clock.now - 500}])

    trips = RoundTrips(monkeypatch)
    orders, other = metrics(clock)
    assert trips.count == 1
    assert orders.length == 7 + 1 + 1  # fresh 1..7, later, and the retry
    assert orders.retries == 1
    assert orders.fresh == 8
    assert orders.morgue_length == 1
    assert orders.busy == 1
    assert orders.processed == 1
    assert orders.failed == 1 + OrdersWorker.max_retry_count + 1
    assert orders.lag == 7.0
    assert len(orders.shards) == 3
    assert sum(s.length for s in orders.shards) == orders.length
    assert max(s.lag(clock.now) for s in orders.shards) == orders.lag
    assert (other.length, other.fresh, other.lag) == (1, 1, 500.0)


def test_lag_is_zero_when_nothing_is_overdue(clock):
    OrdersWorker.perform_async([{"id": 1, "perform_in": clock.now + 60}])
    (orders, _) = metrics(clock)
    assert orders.lag == 0.0
    assert [s.oldest_perform_in for s in orders.shards if s.length] == [clock.now + 60]
    actions().perform_all_now()
    clock.advance(2.5)
    assert metrics(clock)[0].lag == 2.5
