"""The async workers' test app (`lowkiq -r`): async def performs beside a sync worker; the environment shapes it."""

from __future__ import annotations

import asyncio
import os
import random
import time

from recorder import record

import lowkiq

SHARDS = int(os.environ.get("APP_SHARDS", "8"))
BATCH = int(os.environ.get("APP_BATCH_SIZE", "3"))
CONCURRENCY = int(os.environ.get("APP_CONCURRENCY", "20"))
MAX_SLEEP = float(os.environ.get("APP_MAX_SLEEP", "0"))
FAIL_RATE = float(os.environ.get("APP_FAIL_RATE", "0"))


class AsyncRecorder(lowkiq.Worker):
    """Records every perform (ids, payloads in the order handed, start, end, fencing token)."""

    shards_count = SHARDS
    batch_size = BATCH
    max_retry_count = 1000
    concurrency = CONCURRENCY

    def retry_in(self, retry_count: int) -> float:
        return 0

    async def perform(self, payloads_by_id):
        start = time.time()
        token = list(lowkiq.context().fencing_token)
        if MAX_SLEEP:
            await asyncio.sleep(random.uniform(0, MAX_SLEEP))
        failed = FAIL_RATE and random.random() < FAIL_RATE
        record("perform", worker="AsyncRecorder", batch=payloads_by_id, start=start, end=time.time(),
               ok=not failed, token=token)
        if failed:
            raise RuntimeError("random failure")


class Waiting(lowkiq.Worker):
    """Each id awaits half a second: I/O-bound work that threads_per_node threads could not keep up with."""

    shards_count = 100
    batch_size = 1
    concurrency = 50

    async def perform(self, payloads_by_id):
        start = time.time()
        await asyncio.sleep(0.5)
        record("perform", worker="Waiting", batch=payloads_by_id, start=start, end=time.time())


class Hanging(lowkiq.Worker):
    """`hang` awaits 100 s (cancelled at its time limit of 1 s); `swallow` suppresses the cancellation."""

    shards_count = 1
    batch_size = 1
    time_limit = 1
    max_retry_count = 1

    def retry_in(self, retry_count: int) -> float:
        return 600  # the failure stays to be seen
    concurrency = 4

    async def perform(self, payloads_by_id):
        (job_id, payloads), = payloads_by_id.items()
        record("start", worker="Hanging", batch=payloads_by_id)
        if payloads[-1] == "swallow":
            try:
                await asyncio.sleep(100)
            except asyncio.CancelledError:
                record("cancelled", worker="Hanging", batch=payloads_by_id)
            await asyncio.sleep(float(os.environ.get("APP_SWALLOW_FOR", "6")))
        elif payloads[-1] == "hang":
            await asyncio.sleep(100)
        record("done", worker="Hanging", batch=payloads_by_id)


class AsyncFlaky(lowkiq.Worker):
    """Always fails: 1 + max_retry_count attempts, then the morgue and an awaited async retries_exhausted."""

    shards_count = 2
    max_retry_count = 2

    def retry_in(self, retry_count: int) -> float:
        return 0.2

    async def perform(self, payloads_by_id):
        record("attempt", worker="AsyncFlaky", batch=payloads_by_id, token=list(lowkiq.context().fencing_token))
        await asyncio.sleep(0)
        raise ValueError("boom " + ",".join(payloads_by_id))

    async def retries_exhausted(self, batch):
        await asyncio.sleep(0.01)
        record("exhausted", ids=[job.id for job in batch], errors=[job.error for job in batch])


class Blocking(lowkiq.Worker):
    """Blocks the event loop with sync code for 1.5 s."""

    shards_count = 1

    async def perform(self, payloads_by_id):
        time.sleep(1.5)
        record("perform", worker="Blocking", batch=payloads_by_id)


class SyncRecorder(lowkiq.Worker):
    """A plain worker beside the async ones."""

    shards_count = 3
    batch_size = 2

    def perform(self, payloads_by_id):
        record("perform", worker="SyncRecorder", batch=payloads_by_id, start=time.time(), end=time.time())


lowkiq.configure(workers=[AsyncRecorder, Waiting, Hanging, AsyncFlaky, Blocking, SyncRecorder],
                 threads_per_node=int(os.environ.get("APP_THREADS", "2")))
