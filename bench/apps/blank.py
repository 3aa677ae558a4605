"""Lowkiq's benchmark shape: an empty perform.

BENCH_SHARDS_COUNT, BENCH_BATCH_SIZE and BENCH_TAKE_AHEAD (the worker's take_ahead; unset: the default) shape
the worker; BENCH_ASYNC=1 makes its perform ``async def`` (an async worker on the server's event loop, its
``concurrency`` BENCH_CONCURRENCY, default the shards' count); BENCH_SUBSCRIBER=noop adds an
events subscriber that does nothing. The only work
done per batch is what the measurement needs: the first perform stores its
start time, and the perform that brings the count of ids to BENCH_EXPECTED
stores its end time (bench:first, bench:last in Redis).
"""

import os
import threading
import time

import redis
import redis.cluster

import lowkiq

EXPECTED = int(os.environ["BENCH_EXPECTED"])
# On a Redis Cluster (item 8) the two marks live on different nodes.
_marks = (redis.cluster.RedisCluster.from_url if os.environ.get("BENCH_CLUSTER") else redis.Redis.from_url)(
    os.environ["LOWKIQ_REDIS_URL"])
_lock = threading.Lock()
_done = 0


class BlankWorker(lowkiq.Worker):
    shards_count = int(os.environ.get("BENCH_SHARDS_COUNT", "5"))
    batch_size = int(os.environ.get("BENCH_BATCH_SIZE", "1"))
    if os.environ.get("BENCH_TAKE_AHEAD"):  # code from before take-ahead ignores the attribute
        take_ahead = int(os.environ["BENCH_TAKE_AHEAD"])

    if os.environ.get("BENCH_ASYNC") == "1":
        concurrency = int(os.environ.get("BENCH_CONCURRENCY", str(shards_count)))

        async def perform(self, payloads_by_id):
            _mark(len(payloads_by_id))
    else:
        def perform(self, payloads_by_id):
            _mark(len(payloads_by_id))


def _mark(performed):
    global _done
    with _lock:
        first = _done == 0
        _done += performed
        last = _done == EXPECTED
    if first:
        _marks.set("bench:first", repr(time.time()), nx=True)  # with --processes, the first of all
    if last:
        _marks.set("bench:last", repr(time.time()))


def _ignore(event):
    pass


# Item 9: the cost of the events interface with a subscriber that does nothing. Item 7 runs this app with
# code from before subscribers existed: the option is given only when asked for.
lowkiq.configure(workers=[BlankWorker], **({"subscribers": [_ignore]} if os.environ.get("BENCH_SUBSCRIBER") == "noop" else {}))
