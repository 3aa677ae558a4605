"""A runaway beside ordinary work: ``Runaway``'s perform catches ``TimeLimitExceeded`` and runs on for
APP_RUNAWAY_SECONDS (default 60), as a report that swallows every exception does; ``Orders`` records each
perform with the time its job was enqueued (its payload), so a test sees how long every job waited."""

from __future__ import annotations

import os
import time

from recorder import record

import lowkiq

RUNAWAY_SECONDS = float(os.environ.get("APP_RUNAWAY_SECONDS", "60"))


class Runaway(lowkiq.Worker):
    shards_count = 1
    time_limit = 1.0
    max_retry_count = 1

    def perform(self, payloads_by_id):
        record("runaway", batch=payloads_by_id)
        end = time.monotonic() + RUNAWAY_SECONDS
        while time.monotonic() < end:
            try:
                time.sleep(0.05)
            except lowkiq.TimeLimitExceeded:
                continue


class Slow(lowkiq.Worker):
    """No time limit: a suspect batch of it is waited for suspect_wait seconds at most."""

    shards_count = 1

    def perform(self, payloads_by_id):
        record("slow", batch=payloads_by_id)
        time.sleep(float(os.environ.get("APP_SLOW_SECONDS", "4")))


class Orders(lowkiq.Worker):
    shards_count = 10

    def perform(self, payloads_by_id):
        now = time.time()
        for job_id, payloads in payloads_by_id.items():
            record("order", id=job_id, enqueued=min(p["at"] for p in payloads), performed=now)


lowkiq.configure(workers=[Runaway, Slow, Orders])
