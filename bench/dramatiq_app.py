"""The Dramatiq side of the comparison: a blank actor on the Redis broker.

``dramatiq bench.dramatiq_app --processes 1 --threads 5`` runs it. Like the
lowkiq app, the actor only records the first start and the N-th end
(bench:first, bench:last) so that the bench can time the drain.
"""

import os
import threading
import time

import dramatiq
import redis
from dramatiq.brokers.redis import RedisBroker

URL = os.environ["BENCH_REDIS_URL"]
EXPECTED = int(os.environ.get("BENCH_EXPECTED", "0"))
dramatiq.set_broker(RedisBroker(url=URL))
_marks = redis.Redis.from_url(URL)
_lock = threading.Lock()
_done = 0


@dramatiq.actor(queue_name="bench", max_retries=0)
def blank(i):
    global _done
    with _lock:
        first = _done == 0
        _done += 1
        last = _done == EXPECTED
    if first:
        _marks.set("bench:first", repr(time.time()))
    if last:
        _marks.set("bench:last", repr(time.time()))
