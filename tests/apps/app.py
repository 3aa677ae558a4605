"""The app the end-to-end tests run with `lowkiq -r`; environment variables shape it."""

from __future__ import annotations

import os
import random
import time

from recorder import record

import lowkiq

SHARDS = int(os.environ.get("APP_SHARDS", "4"))
BATCH = int(os.environ.get("APP_BATCH_SIZE", "3"))
SLOW = float(os.environ.get("APP_SLOW_SECONDS", "2"))
FAIL_RATE = float(os.environ.get("APP_FAIL_RATE", "0"))
MAX_SLEEP = float(os.environ.get("APP_MAX_SLEEP", "0"))


class Recorder(lowkiq.Worker):
    """Records every perform: its ids, payloads in the order handed, start and end."""

    shards_count = SHARDS
    batch_size = BATCH
    max_retry_count = 1000

    def retry_in(self, retry_count: int) -> float:
        return 0

    def perform(self, payloads_by_id):
        start = time.time()
        if MAX_SLEEP:
            time.sleep(random.uniform(0, MAX_SLEEP))
        failed = FAIL_RATE and random.random() < FAIL_RATE
        record("perform", worker="Recorder", batch=payloads_by_id, start=start, end=time.time(), ok=not failed)
        if failed:
            raise RuntimeError("random failure")


class Other(lowkiq.Worker):
    shards_count = 3
    batch_size = 2

    def perform(self, payloads_by_id):
        record("perform", worker="Other", batch=payloads_by_id, start=time.time(), end=time.time(), ok=True)


class Flaky(lowkiq.Worker):
    """Always fails: 1 + max_retry_count attempts, retry_in(c) apart, then the morgue."""

    shards_count = 2
    max_retry_count = 3

    def retry_in(self, retry_count: int) -> float:
        return 0.3 * (retry_count + 1)

    def perform(self, payloads_by_id):
        record("attempt", worker="Flaky", batch=payloads_by_id)
        raise ValueError("boom " + ",".join(payloads_by_id))

    def retries_exhausted(self, batch):
        record("exhausted", ids=[job.id for job in batch], errors=[job.error for job in batch])


class Slow(lowkiq.Worker):
    """Sleeps in perform, so a test can signal or kill the server mid-batch."""

    shards_count = 2
    batch_size = 2

    def perform(self, payloads_by_id):
        record("start", worker="Slow", batch=payloads_by_id)
        time.sleep(SLOW)
        record("done", worker="Slow", batch=payloads_by_id)


class Exiting(lowkiq.Worker):
    """perform raises SystemExit: the batch is failed, the process stops."""

    shards_count = 1

    def perform(self, payloads_by_id):
        record("attempt", worker="Exiting", batch=payloads_by_id)
        raise SystemExit(3)


WORKERS = {w.__name__: w for w in (Recorder, Other, Flaky, Slow, Exiting)}
chosen = os.environ.get("APP_WORKERS", "Recorder,Other,Flaky,Slow").split(",")


def on_server_init():
    record("init")


lowkiq.configure(workers=[WORKERS[name] for name in chosen], on_server_init=on_server_init)
