"""What a peer's job records in Redis: the drain's marks (item 4) and the versions applied (bench.ordering).

``mark()`` is the blank job's body in a one-process worker: the first job to
run sets bench:first, the N-th to finish sets bench:last (N = BENCH_EXPECTED),
counted in the process. ``mark_counted()`` is the same for a worker of several
processes (Dramatiq's default, RQ's worker-pool): the count is an INCR in
Redis, one more round trip per job. ``apply_version()`` is the ordering
workload's job body once its work is done. A plain synchronous client: it keeps
the marks free of each library's own Redis client.
"""

from __future__ import annotations

import functools
import json
import os
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import redis

# Set for every worker and producer; the bench process imports this module only for the key names.
URL = os.environ.get("BENCH_REDIS_URL", "")
EXPECTED = int(os.environ.get("BENCH_EXPECTED", "0"))
# The ordering workload's keys: apply_version() writes them, bench.ordering reads them.
STATE, OUT_OF_ORDER, APPLIED, LAST = "bench:state", "bench:out_of_order", "bench:applied", "bench:last"
READY = "ready"  # the id of the job a producer sends first, to know the worker is taking jobs
# bench.async_io --batch N: the producer sends the versions N at a time (1: one by one, awaiting each)
BATCH = int(os.environ.get("BENCH_PRODUCER_BATCH", "1"))
_lock = threading.Lock()
_done = 0

# KEYS[1] = bench:state (hash: id -> the version applied last), KEYS[2] = bench:out_of_order (counter),
# KEYS[3] = bench:applied (counter), KEYS[4] = bench:last (the latest apply, unix seconds)
# ARGV[1] = id, ARGV[2] = version, ARGV[3] = now
# A version older than the one the id holds was applied out of order; it is written anyway (last writer
# wins, as a job writing its id's state would), so an id can end at an older version than its newest.
_APPLY = """
local held = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '0')
if tonumber(ARGV[2]) < held then redis.call('INCR', KEYS[2]) end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('INCR', KEYS[3])
if tonumber(ARGV[3]) > tonumber(redis.call('GET', KEYS[4]) or '0') then redis.call('SET', KEYS[4], ARGV[3]) end
"""


@functools.cache
def client() -> redis.Redis:
    return redis.Redis.from_url(URL)


@functools.cache
def _apply() -> Any:
    return client().register_script(_APPLY)


def mark() -> None:
    global _done
    with _lock:
        first = _done == 0
        _done += 1
        last = _done == EXPECTED
    if first:
        client().set("bench:first", repr(time.time()))
    if last:
        client().set("bench:last", repr(time.time()))


def mark_counted() -> None:
    done = client().incr("bench:done")
    if done == 1:
        client().set("bench:first", repr(time.time()))
    if done == EXPECTED:
        client().set("bench:last", repr(time.time()))


def apply_version(job_id: str, version: int) -> None:
    _apply()(keys=[STATE, OUT_OF_ORDER, APPLIED, LAST], args=[job_id, version, repr(time.time())])


def versions(path: str) -> list[tuple[str, int, float]]:
    """The (id, version, work in ms) a producer sends, in order, from bench.ordering's file."""
    return [(job_id, version, work) for job_id, version, work in json.loads(Path(path).read_text())]


def _ready() -> bool:
    return int(client().get(APPLIED) or 0) >= 1


def _wait_ready() -> None:
    deadline = time.monotonic() + 120
    while not _ready():
        if time.monotonic() > deadline:
            raise TimeoutError("the worker did not apply the first job in 120 s")
        time.sleep(0.01)


def send_versions(send: Callable[[str, int, float], object], path: str,
                  send_many: Callable[[list[tuple[str, int, float]]], object] | None = None) -> None:
    """One job first (id READY), then, once a worker has applied it, every version one by one; with BATCH > 1,
    BATCH versions per ``send_many`` call (a library's bulk enqueue, in order).

    Prints the unix time the versions started and the seconds the sending took: bench.ordering reads them.
    """
    send(READY, 1, 0.0)
    _wait_ready()
    sent = versions(path)
    started, clock = time.time(), time.perf_counter()
    if BATCH > 1 and send_many is not None:
        for start in range(0, len(sent), BATCH):
            send_many(sent[start : start + BATCH])
    else:
        for job_id, version, work in sent:
            send(job_id, version, work)
    print(started, time.perf_counter() - clock)


async def send_versions_async(send: Callable[[str, int, float], Awaitable[object]], path: str) -> None:
    """``send_versions`` for an asyncio client."""
    import asyncio

    await send(READY, 1, 0.0)
    deadline = time.monotonic() + 120
    while not _ready():
        if time.monotonic() > deadline:
            raise TimeoutError("the worker did not apply the first job in 120 s")
        await asyncio.sleep(0.01)
    sent = versions(path)
    started, clock = time.time(), time.perf_counter()
    if BATCH > 1:
        # No bulk enqueue in these libraries: BATCH sends at once on the client's pool, as asyncio code
        # would send a burst. They may reach Redis in any order: so may a burst's versions of one id.
        for start in range(0, len(sent), BATCH):
            await asyncio.gather(*(send(job_id, version, work) for job_id, version, work in sent[start : start + BATCH]))
    else:
        for job_id, version, work in sent:
            await send(job_id, version, work)
    print(started, time.perf_counter() - clock)
