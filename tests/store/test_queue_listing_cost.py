"""No console listing makes Redis walk the queue: a page costs O(log n + page) per shard, measured on
the Redis side (INFO commandstats) at 10,000 and 200,000 retried jobs in one shard."""

from __future__ import annotations

import pytest
from queue_support import OrdersWorker, queries

import lowkiq
from lowkiq.store.codec import shard_of

pytestmark = pytest.mark.slow

# Fills one shard with ``n`` retried jobs (retry counts 0..9) and ``n // 10`` fresh ones, the way
# the scripts lay them out, inside Redis: building 200,000 through the client would dominate the test.
FILL = """
local n = tonumber(ARGV[1])
local blob = cmsgpack.pack({'"p"', 1.0})
for i = 1, n do
  local id = 'r' .. i
  redis.call('ZADD', KEYS[1], 1000 + i, id)
  redis.call('ZADD', KEYS[3], i % 10, id)
  redis.call('ZADD', KEYS[14], 0, id)
  redis.call('HSET', KEYS[4], id, blob)
end
for i = 1, math.floor(n / 10) do
  local id = 'f' .. i
  redis.call('ZADD', KEYS[1], 1000 + i, id)
  redis.call('ZADD', KEYS[2], 0, id)
  redis.call('HSET', KEYS[4], id, blob)
end
return n
"""


class Single(lowkiq.Worker):
    shards_count = 1

    def perform(self, payloads_by_id):
        pass


def slowest_script_usec(r, n: int) -> float:
    r.flushall()
    keys = Single.keys().shard(0).all()
    r.eval(FILL, len(keys), *keys, n)
    q = lowkiq.current().queries(Single)
    q.enqueued("id", limit=1)  # loads the scripts
    r.config_resetstat()
    pages = []
    for order in ("retry_count", "id", "perform_in"):
        for desc in (False, True):
            first = q.enqueued(order, desc=desc, limit=100)
            second = q.enqueued(order, desc=desc, limit=100, after=first.last)
            pages += [first, second]
    deep = q.enqueued("retry_count", limit=100, min=5)  # the middle of the index
    pages.append(q.enqueued("retry_count", limit=100, min=5, after=deep.last))
    assert all(len(p.rows) == 100 for p in pages)
    stats = r.info("commandstats")
    calls = stats["cmdstat_evalsha"]["calls"]
    assert calls >= len(pages)
    slowlog_free = stats["cmdstat_evalsha"]["usec_per_call"]
    return float(slowlog_free)


def test_a_page_sorted_by_retry_count_costs_the_same_at_10k_and_200k_retried_jobs(configure, r):
    configure(workers=[Single])
    small = slowest_script_usec(r, 10_000)
    large = slowest_script_usec(r, 200_000)
    # Before, one ascending page walked every retried job: 4.3 s of Redis at 100,000.
    assert large < 2_000, f"{large:.0f} µs per listing script at 200,000 retried jobs"
    assert large < 3 * small + 200, (small, large)


def test_listing_by_retry_count_shows_fresh_first_then_retried_by_count_then_id(configure, r):
    configure(workers=[OrdersWorker])
    OrdersWorker.perform_async([{"id": f"f{i}"} for i in range(3)])
    keys = OrdersWorker.keys()
    # retried jobs as the fail script leaves them
    for count in range(3):
        job_id = f"r{count}"
        shard = keys.shard(shard_of(job_id, keys.shards_count))
        r.zadd(shard.ids_by_retry_count_zset, {job_id: count})
        r.zadd(shard.retried_ids_lex_zset, {job_id: 0})
        r.zadd(shard.ids_by_perform_in_zset, {job_id: 1})
        r.hset(shard.payloads_hash, job_id, b"\x92\xa3\"p\"\x01")
    ascending = [j.id for j in queries().enqueued("retry_count", limit=100).rows]
    assert ascending == ["f0", "f1", "f2", "r0", "r1", "r2"]
    descending = [j.id for j in queries().enqueued("retry_count", desc=True, limit=100).rows]
    assert descending == ["r2", "r1", "r0", "f2", "f1", "f0"]
    by_id = [j.id for j in queries().enqueued("id", limit=4).rows]
    assert by_id == ["f0", "f1", "f2", "r0"]
