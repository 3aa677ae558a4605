"""A Sentinel-managed primary: found through the sentinels, followed across a failover without a restart."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
import redis
from queue_support import held_lease
from timing_support import wait_until

import lowkiq
from lowkiq.server import group_limits
from lowkiq.server.keeper import Keeper
from lowkiq.server.processor import Processor
from lowkiq.store import lua
from lowkiq.store.keys import GroupKeys
from lowkiq.store.metrics import queue_metrics
from lowkiq.transport import Transport
from lowkiq.transport.sentinel import SentinelTarget, parse

# A Redis Cluster or Sentinels of its own: minutes of setup the fast run leaves out.
pytestmark = pytest.mark.slow


class Mail(lowkiq.Worker):
    queue_name = "sentinel-mail"
    shards_count = 4

    def perform(self, payloads_by_id):
        pass


PERFORMED: list[str] = []


class Limited(lowkiq.Worker):
    queue_name = "sentinel-limited"
    shards_count = 1
    group_concurrency = 1

    def perform(self, payloads_by_id):
        PERFORMED.extend(payloads_by_id)


def test_sentinel_urls_name_the_sentinels_the_service_the_database_and_the_passwords():
    assert parse("redis+sentinel://:pw@h1:26379,h2:26380/mymaster/3?sentinel_password=s%40cret") == SentinelTarget(
        sentinels=(("h1", 26379), ("h2", 26380)), service="mymaster", db=3, password="pw", sentinel_password="s@cret")
    assert parse("redis+sentinel://user:pw@[::1]:5000,h2/svc") == SentinelTarget(
        sentinels=(("::1", 5000), ("h2", 26379)), service="svc", username="user", password="pw")
    target = parse("redis+sentinel://h1/svc/2")
    assert (target.password, target.db) == (None, 2)
    assert target.primary_url("10.0.0.1", 6380) == "redis://10.0.0.1:6380/2"
    assert parse("redis+sentinel://:p%2Fw@h1/svc").primary_url("::1", 1) == "redis://:p%2Fw@[::1]:1/0"
    for bad in ("redis+sentinel://h1", "redis+sentinel://h1/a/b/c", "redis+sentinel://h1/svc/x",
                "redis+sentinel://h1:port/svc", "redis+sentinel://h1/svc?timeout=1"):
        with pytest.raises(ValueError):
            parse(bad)
    assert "pw" not in parse("redis+sentinel://:pw@h1/svc").describe()


@pytest.fixture
def runtime(sentinel, clock):
    rt = lowkiq.configure(redis_url=sentinel.url, workers=[Mail])
    rt.clock = clock
    yield rt
    rt.close()
    lowkiq.runtime._current = None


@pytest.mark.slow
def test_the_primary_is_found_through_the_sentinels(runtime, sentinel):
    transport = runtime.client
    assert transport.mode == "sentinel"
    assert transport.topology().primaries[0].name == f"127.0.0.1:{sentinel.primary()}"
    assert "Sentinel service 'lowkiq-primary'" in transport.describe() and "data-secret" not in transport.describe()
    Mail.perform_async([{"id": i} for i in range(20)])
    assert queue_metrics(transport, [Mail.keys()])[0].length == 20
    assert sentinel.data(sentinel.primary()).hlen(Mail.keys().shard(0).payloads_hash) > 0


def test_a_wrong_service_is_a_connection_error_naming_it(sentinel):
    t = Transport(sentinel.url.replace("lowkiq-primary", "nobody"))
    with pytest.raises(redis.ConnectionError, match="nobody"):
        t.topology()


@pytest.mark.slow
def test_a_failover_is_followed_without_a_restart(runtime, sentinel, clock):
    Mail.perform_async([{"id": f"before{i}"} for i in range(12)])
    transport = runtime.client
    q = runtime.queue(Mail)
    wire = lua.Wire(runtime.new_client(2))  # a server thread's own connection, held across the failover
    lease = held_lease(q, 0)
    first = q.ack_and_take(None, (lease, 1), wire=wire).jobs
    transport.client_for().execute_command("WAIT", 1, 2000)  # the replica has all of it
    _, new = sentinel.failover()

    def eventually(call, seconds: float = 15.0):
        """The call succeeds after at most a short outage (what a server thread backs off from)."""
        errors = []
        deadline = time.monotonic() + seconds
        while True:
            try:
                return call(), errors
            except (redis.ConnectionError, redis.ResponseError) as exc:
                errors.append(exc)
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    # the held connection's next write meets READONLY (or a closed connection): the new primary takes it
    taken, errors = eventually(lambda: q.ack_and_take((lease, [j.id for j in first]), (lease, 1), wire=wire))
    assert len(errors) <= 1, errors
    assert taken.jobs and taken.jobs[0].id.startswith("before")
    assert wire.transport.topology().primaries[0].name == f"127.0.0.1:{new}"
    _, errors = eventually(lambda: Mail.perform_async([{"id": f"after{i}"} for i in range(10)]))
    assert len(errors) <= 1, errors
    assert transport.topology().primaries[0].name == f"127.0.0.1:{new}"
    [m] = queue_metrics(transport, [Mail.keys()])
    assert (m.length, m.busy, m.processed) == (22 - 2, 1, 1)
    assert sentinel.data(new).execute_command("ROLE")[0] == b"master"
    wire.close()


@pytest.mark.slow
def test_what_the_old_primary_took_after_the_promotion_is_put_back_by_the_thread_that_follows(sentinel):
    """SENTINEL FAILOVER promotes the replica while the old primary still takes writes, until it follows the
    new one (a second or so): a server thread's writes there meanwhile are lost. Here the untake of an id
    refused a permit: on the new primary the id stays in processing, under the lease the thread still holds,
    and no take reaches it. No call of the thread fails (READONLY is followed), and an idle thread writes
    nothing: the keeper's beat follows the new primary and tells it. The thread then puts back what its shards
    hold in processing before its next take, and the id is performed."""
    runtime = lowkiq.configure(redis_url=sentinel.url, workers=[Limited], lease_ttl=30, poll_interval=0.1)
    group_limits._blocked.clear()
    group_limits._held.clear()
    PERFORMED.clear()
    sentinel.wait_ready()
    thread = Processor(0, runtime, threading.Event(), lambda exc, in_perform: None)
    keeper = Keeper(runtime, [thread], member_id=uuid.uuid4().hex)
    try:
        old = sentinel.primary()
        new = next(port for port in sentinel.data_ports if port != old)
        Limited.perform_async([{"id": "x", "group": "A"}])
        permits = GroupKeys(Limited.queue_name, "A").permits_zset
        sentinel.data(old).zadd(permits, {"elsewhere:0:grant:y": 2 ** 50})  # A is at its limit
        keeper.beat()
        keeper.holdings.replicas = runtime.client.replica_counts()
        keeper.rebalance()
        thread._read_inbox()
        [handler] = thread.handlers
        assert handler.limits is not None
        processing = handler.lease.keys.processing_hash
        ask = handler.limits.run

        def promoted_meanwhile(calls):
            # After the take, which the replica has: the replica is promoted; the old primary takes the
            # permit's refusal and the untake, as it would any write until it follows the new primary.
            if calls[0][0] == "permit_take":
                sentinel.data(old).execute_command("WAIT", 1, 2000)
                sentinel.ask_failover()
                wait_until(lambda: sentinel.data(new).execute_command("ROLE")[0] == b"master", 10)
            return ask(calls)

        handler.limits.run = promoted_meanwhile
        thread.step()
        handler.limits.run = ask
        assert PERFORMED == [] and not sentinel.data(old).hexists(processing, "x")  # given back there...
        sentinel.wait_new_primary(old)
        assert sentinel.data(new).hexists(processing, "x")  # ...not on the new primary: the untake is lost
        sentinel.data(new).zrem(permits, "elsewhere:0:grant:y")  # A's permit is free
        # The thread is idle (what it reads, the old primary answers as a replica); the keeper's next beat
        # follows the new primary and tells it.
        keeper.tick()
        deadline = time.monotonic() + 5
        while PERFORMED == [] and time.monotonic() < deadline:
            thread.step()
        assert PERFORMED == ["x"], "the id was left in processing, never performed"
        assert thread.wire.transport.topology().primaries[0].name == f"127.0.0.1:{new}"
        thread._flush()
        assert not sentinel.data(new).hexists(processing, "x")
    finally:
        for closing in (thread.wire, keeper.wire):
            closing.close(disconnect=True)
        runtime.close()
        lowkiq.runtime._current = None
        sentinel.wait_ready()  # the old primary is the replica now: ready for the next failover


@pytest.mark.slow
def test_kill_9_of_the_primary_is_followed_without_a_restart():
    from redis_sentinel import RedisSentinel

    group = RedisSentinel().start()
    runtime = lowkiq.configure(redis_url=group.url, workers=[Mail])
    try:
        Mail.perform_async([{"id": f"before{i}"} for i in range(10)])
        runtime.client.client_for().execute_command("WAIT", 1, 2000)
        q = runtime.queue(Mail)
        wire = lua.Wire(runtime.new_client(2))
        lease = held_lease(q, 2)
        assert q.ack_and_take(None, (lease, 1), wire=wire).jobs
        old = group.primary()
        killed_at = time.monotonic()
        group.kill(old)
        new = group.wait_new_primary(old, 30)
        # a server thread's next calls: an outage first, then the new primary, with the same objects
        deadline = killed_at + 30
        while True:
            try:
                taken = q.ack_and_take(None, (lease, 100), wire=wire)
                break
            except (redis.ConnectionError, redis.ResponseError):
                assert time.monotonic() < deadline, "not followed within 30 s"
                time.sleep(0.2)
        assert wire.transport.topology().primaries[0].name == f"127.0.0.1:{new}"
        assert all(j.id.startswith("before") for j in taken.jobs)
        Mail.perform_async([{"id": "after"}])
        assert runtime.queries(Mail).job("after") is not None
        wire.close()
    finally:
        runtime.close()
        lowkiq.runtime._current = None
        group.stop()
