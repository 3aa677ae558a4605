"""The lease fault tests' app with an async worker: versions of hot ids, each perform recorded with its interval.

``Versions`` is an async worker (what execution_checks reads); ``SyncSide`` a plain one beside it. Environment:
APP_SHARDS, APP_BATCH_SIZE, APP_PERFORM_SECONDS (mean await per perform), APP_CONCURRENCY. A payload
{"crash": true} SIGKILLs the process.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import time

from recorder import record

import lowkiq

SHARDS = int(os.environ.get("APP_SHARDS", "12"))
BATCH = int(os.environ.get("APP_BATCH_SIZE", "2"))
SLEEP = float(os.environ.get("APP_PERFORM_SECONDS", "0.02"))


class Versions(lowkiq.Worker):
    shards_count = SHARDS
    batch_size = BATCH
    max_retry_count = 1000
    concurrency = int(os.environ.get("APP_CONCURRENCY", "8"))

    def retry_in(self, retry_count: int) -> float:
        return 0.1

    async def perform(self, payloads_by_id):
        start = time.time()
        record("start", worker="Versions", batch=payloads_by_id, start=start)
        for payloads in payloads_by_id.values():
            for payload in payloads:
                if payload.get("crash"):
                    os.kill(os.getpid(), signal.SIGKILL)
        await asyncio.sleep(SLEEP * 2 * random.random())
        record("perform", worker="Versions", batch=payloads_by_id, start=start, end=time.time(),
               token=list(lowkiq.context().fencing_token), parent=os.getppid())


class SyncSide(lowkiq.Worker):
    shards_count = 3

    def perform(self, payloads_by_id):
        record("perform", worker="SyncSide", batch=payloads_by_id, start=time.time(), end=time.time())


lowkiq.configure(workers=[Versions, SyncSide])
