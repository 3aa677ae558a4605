"""The console reads its numbers in one round trip, and survives a bad key."""

from __future__ import annotations

import pytest
import redis
from queue_support import RoundTrips, held_lease
from webui_support import MailerWorker, OrdersWorker, fail, make_dead

from lowkiq.store.metrics import FULL, STATS, MetricsReader, queue_metrics


def seed(runtime, clock) -> None:
    make_dead(runtime, OrdersWorker, [{"id": f"d{i}"} for i in range(5)])
    OrdersWorker.perform_async([{"id": i, "perform_in": clock() - i} for i in range(20)])
    fail(runtime, OrdersWorker, ["3"])
    q = runtime.queue(OrdersWorker)
    taken = q.ack_and_take(None, (held_lease(q, q.shard_of("5")), 2))  # busy
    other = q.ack_and_take(None, (held_lease(q, q.shard_of("7")), 1))
    q.ack_and_take((held_lease(q, q.shard_of("7")), [j.id for j in other.jobs]), None)  # processed
    MailerWorker.perform_async([{"id": "m", "perform_in": clock() + 50}])
    assert taken.jobs


def test_full_read_comes_with_redis_info(runtime, clock):
    seed(runtime, clock)
    queues = [OrdersWorker.keys(), MailerWorker.keys()]
    mine, info = MetricsReader(runtime.client).read(queues, clock(), kind=FULL, with_info=True)
    assert mine == queue_metrics(runtime.client, queues, now=clock())
    # fail() retried every job of the shard of "3"; the busy and processed ones came after
    assert (mine[0].busy, mine[0].processed, mine[0].retries, mine[0].morgue_length) == (2, 1, 6, 5)
    assert info["redis_version"] == runtime.client.info()["redis_version"]


def test_stats_metrics_equal_the_core_ones_where_stats_look(runtime, clock):
    seed(runtime, clock)
    queues = [OrdersWorker.keys(), MailerWorker.keys()]
    mine, info = MetricsReader(runtime.client).read(queues, clock(), kind=STATS)
    core = queue_metrics(runtime.client, queues, now=clock())
    assert info is None
    assert [(m.length, m.morgue_length, m.lag) for m in mine] == [(m.length, m.morgue_length, m.lag) for m in core]


def test_dashboard_is_one_round_trip(client, runtime, monkeypatch):
    client.get("/lowkiq/_live")
    trips = RoundTrips(monkeypatch)
    assert client.get("/lowkiq/_live").status_code == 200
    assert trips.count == 1


def test_a_wrong_type_key_is_an_error_and_the_connection_stays_usable(runtime, r, clock):
    r.set(OrdersWorker.keys().shard(0).processing_hash, "not a hash")
    reader = MetricsReader(runtime.client)
    with pytest.raises(redis.ResponseError):
        reader.read([OrdersWorker.keys()], clock())
    r.delete(OrdersWorker.keys().shard(0).processing_hash)
    [m], _ = reader.read([OrdersWorker.keys()], clock())
    assert m.length == 0
    assert runtime.client.ping()
