"""A full Redis (maxmemory reached, noeviction) refusing perform_async reaches the producer as
lowkiq.RedisOutOfMemory: the queue named, the jobs not written listed by position, the refusing node named."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from redis_server import RedisServer

import lowkiq


class Orders(lowkiq.Worker):
    shards_count = 5

    def perform(self, payloads_by_id):
        pass


@pytest.fixture
def small_redis() -> Iterator[RedisServer]:
    server = RedisServer().start()
    yield server
    server.stop()


def stored(client: redis.Redis) -> int:
    pipe = client.pipeline(transaction=False)  # a MULTI is refused by a full Redis, even for reads
    for shard in Orders.keys().shards():
        pipe.hlen(shard.payloads_hash)
    return sum(pipe.execute())


def fill(client: redis.Redis) -> None:
    """Full: any write that may grow memory is refused (reads still answer)."""
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", 1)


@pytest.mark.slow
@pytest.mark.parametrize("durable", [False, True], ids=["plain", "durable_enqueue"])
def test_a_full_redis_refuses_every_job_and_says_so(small_redis, durable):
    lowkiq.configure(workers=[Orders], redis_url=small_redis.url, durable_enqueue=durable, replica_wait=0.1)
    client = redis.Redis.from_url(small_redis.url)
    try:
        # Registered, scripts loaded: the calls below meet the full Redis in their push scripts.
        if durable:
            with pytest.raises(lowkiq.NotDurable):  # written, but no replica here to confirm it
                Orders.perform_async([{"id": "warm-up"}])
        else:
            Orders.perform_async([{"id": "warm-up"}])
        fill(client)
        jobs = [{"id": f"j{i}", "payload": i} for i in range(30)]
        with pytest.raises(lowkiq.RedisOutOfMemory) as caught:
            Orders.perform_async(jobs)
        exc = caught.value
        assert (exc.queue_name, exc.written, exc.uncertain) == ("Orders", [], [])
        assert exc.not_written == list(range(30))
        assert exc.nodes == [f"127.0.0.1:{small_redis.port}"]
        text = str(exc)
        assert "queue 'Orders' wrote 0 of 30 jobs" in text and "out of memory" in text
        assert "30 were not written" in text
        assert f"127.0.0.1:{small_redis.port}" in text
        # What Redis said stays reachable, and code that caught either class before still does.
        assert "command not allowed when used memory > 'maxmemory'" in str(exc.cause)
        assert isinstance(exc, lowkiq.PartialEnqueue) and isinstance(exc, redis.exceptions.OutOfMemoryError)
        assert stored(client) == 1

        with pytest.raises(lowkiq.RedisOutOfMemory) as one:  # one job, one script: the same
            Orders.perform_async([{"id": "alone", "payload": 1}])
        assert (one.value.written, one.value.not_written) == ([], [0])

        client.config_set("maxmemory", 0)
        if durable:
            with pytest.raises(lowkiq.NotDurable):
                Orders.perform_async([jobs[i] for i in exc.not_written])
        else:
            assert Orders.perform_async([jobs[i] for i in exc.not_written]) == 30
        assert stored(client) == 31
    finally:
        client.config_set("maxmemory", 0)
        client.close()
        lowkiq.runtime._current = None


@pytest.mark.slow
def test_one_full_primary_of_a_cluster_the_jobs_of_its_shards_are_named_not_written(cluster):
    lowkiq.configure(workers=[Orders], redis_url=cluster.url)
    Orders.perform_async([{"id": "warm-up"}])
    full_port = cluster.owner(cluster.keyslot(Orders.keys().shard(0).tag))
    full = cluster.client(full_port)
    try:
        fill(full)
        jobs = [{"id": f"j{i}", "payload": i} for i in range(60)]
        with pytest.raises(lowkiq.RedisOutOfMemory) as caught:
            Orders.perform_async(jobs)
        exc = caught.value
        q = lowkiq.current().queue(Orders)
        on_full = [i for i, job in enumerate(jobs)
                   if cluster.owner(cluster.keyslot(Orders.keys().shard(q.shard_of(job["id"])).tag)) == full_port]
        assert on_full and exc.not_written == on_full
        assert exc.written == [i for i in range(60) if i not in on_full] and exc.uncertain == []
        assert exc.nodes == [f"127.0.0.1:{full_port}"]
        assert f"wrote {60 - len(on_full)} of 60 jobs" in str(exc) and f"{len(on_full)} were not written" in str(exc)
        queries = lowkiq.current().queries(Orders)
        assert all(queries.job(jobs[i]["id"]) is not None for i in exc.written)
        full.config_set("maxmemory", 0)
        assert Orders.perform_async([jobs[i] for i in exc.not_written]) == len(on_full)
        assert all(queries.job(job["id"]) is not None for job in jobs)
    finally:
        full.config_set("maxmemory", 0)
        lowkiq.runtime._current = None
