"""A Sentinel-managed primary: found through the sentinels, followed across a failover without a restart."""

from __future__ import annotations

import time

import pytest
import redis
from queue_support import held_lease

import lowkiq
from lowkiq.store import lua
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
