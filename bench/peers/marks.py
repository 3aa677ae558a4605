"""The blank job's body for the asyncio peers, the same marks as Dramatiq's actor.

The first job to run sets bench:first, the N-th to finish sets bench:last
(N = BENCH_EXPECTED). A plain synchronous client: it is called twice per
drain, and it keeps the marks free of each library's own Redis client.
"""

import os
import threading
import time

import redis

URL = os.environ["BENCH_REDIS_URL"]
EXPECTED = int(os.environ.get("BENCH_EXPECTED", "0"))
_client = redis.Redis.from_url(URL)
_lock = threading.Lock()
_done = 0


def mark() -> None:
    global _done
    with _lock:
        first = _done == 0
        _done += 1
        last = _done == EXPECTED
    if first:
        _client.set("bench:first", repr(time.time()))
    if last:
        _client.set("bench:last", repr(time.time()))
