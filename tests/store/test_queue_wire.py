"""The hot path's own connection: one round trip per batch, and recovery from flushes and drops."""

import pytest
import redis
from queue_support import OrdersWorker, RoundTrips, held_lease, queries, queue

from lowkiq.store import lua


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OrdersWorker])


# the range script's arguments for "every id of the shard, by id"
RANGE_ALL = ("id", "0", "", "", "", "", 100)


def ids_in_shard(shard, n):
    return [str(i) for i in range(500) if queue().shard_of(str(i)) == shard][:n]


def test_one_round_trip_per_batch_on_one_connection(monkeypatch):
    ids = ids_in_shard(0, 4)
    OrdersWorker.perform_async([{"id": i} for i in ids])
    q = queue()
    wire = lua.Wire(q.client)
    wire.call("range", OrdersWorker.keys().shard(0), RANGE_ALL)  # connect and load scripts
    lease = held_lease(q, 0)
    trips = RoundTrips(monkeypatch)
    taken, ack = [], None
    for _ in range(4):
        t = q.ack_and_take(ack, (lease, 1), wire=wire)
        taken += [j.id for j in t.jobs]
        ack = (lease, [j.id for j in t.jobs])
    assert trips.count == 4
    assert sorted(taken) == sorted(ids)
    assert q.ack_and_take(ack, (lease, 1), wire=wire).jobs == []
    assert queries().busy() == []
    wire.close()


def test_scripts_flushed_from_redis_are_loaded_again(r):
    OrdersWorker.perform_async([{"id": i} for i in ids_in_shard(1, 2)])
    q = queue()
    wire = lua.Wire(q.client)
    lease = held_lease(q, 1)
    assert len(q.ack_and_take(None, (lease, 1), wire=wire).jobs) == 1
    r.script_flush()
    assert len(q.ack_and_take(None, (lease, 1), wire=wire).jobs) == 1
    r.script_flush()
    # both jobs of shard 1 are in processing now: none is left to list
    assert lua.run_many(q.client, [("range", OrdersWorker.keys().shard(1), RANGE_ALL)]) == [[]]
    wire.close()


def test_a_dropped_connection_is_reported_and_the_next_call_reconnects(r):
    ids = ids_in_shard(2, 2)
    OrdersWorker.perform_async([{"id": i} for i in ids])
    q = queue()
    wire = lua.Wire(q.client)
    lease = held_lease(q, 2)
    q.ack_and_take(None, (lease, 1), wire=wire)
    r.client_kill_filter(_type="normal", skipme=True)
    with pytest.raises(redis.ConnectionError):
        q.ack_and_take(None, (lease, 1), wire=wire)
    assert [j.id for j in q.ack_and_take(None, (lease, 1), wire=wire).jobs] == ids[1:]
    wire.close()


def test_script_errors_are_raised_not_swallowed():
    wire = lua.Wire(queue().client)
    with pytest.raises(redis.ResponseError):
        wire.call("ack_and_take", OrdersWorker.keys().shard(0), ("not-a-time", "x"))
    # the connection stays usable after an error reply
    assert wire.call("range", OrdersWorker.keys().shard(0), RANGE_ALL) == []
    wire.close()
