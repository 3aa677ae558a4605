"""A perform_async that Redis stops half-way (out of memory) says exactly which jobs it wrote."""

from __future__ import annotations

import pytest
import redis
from redis_server import RedisServer

import lowkiq


class Bulky(lowkiq.Worker):
    shards_count = 5

    def perform(self, payloads_by_id):
        pass


@pytest.fixture
def small_redis():
    server = RedisServer().start()
    yield server
    server.stop()


@pytest.mark.slow
def test_an_out_of_memory_half_way_names_the_written_and_the_unwritten_jobs(small_redis):
    lowkiq.configure(workers=[Bulky], redis_url=small_redis.url)
    client = redis.Redis.from_url(small_redis.url)
    Bulky.perform_async([{"id": "warm-up"}])  # the scripts are loaded: not counted against the limit below
    client.config_set("maxmemory", client.info("memory")["used_memory"] + 6_000_000)
    client.config_set("maxmemory-policy", "noeviction")
    jobs = [{"id": f"j{i}", "payload": "x" * 1000} for i in range(20_000)]
    with pytest.raises(lowkiq.PartialEnqueue) as caught:
        Bulky.perform_async(jobs)
    exc = caught.value
    # Redis 7 refuses the script before it runs; 6.2 refuses its first write (a script error quoting OOM).
    assert isinstance(exc.cause, redis.exceptions.OutOfMemoryError) or "OOM command not allowed" in str(exc.cause)
    assert exc.written and exc.not_written and not exc.uncertain
    assert sorted(exc.written + exc.not_written) == list(range(len(jobs)))
    assert f"wrote {len(exc.written):,} of 20,000 jobs" in str(exc)
    queries = lowkiq.current().queries(Bulky)
    assert all(queries.job(jobs[i]["id"]) is not None for i in exc.written[:: max(1, len(exc.written) // 200)])
    assert all(queries.job(jobs[i]["id"]) is None for i in exc.not_written[:: max(1, len(exc.not_written) // 200)])

    client.config_set("maxmemory", 0)
    Bulky.perform_async([jobs[i] for i in exc.not_written])
    pipe = client.pipeline()
    for shard in Bulky.keys().shards():
        pipe.hlen(shard.payloads_hash)
    assert sum(pipe.execute()) == 20_001
    lowkiq.runtime._current = None
