"""The app of the fairness tests (docs/fairness.md), run with `lowkiq -r`; environment variables shape it."""

from __future__ import annotations

import os
import time

from recorder import record

import lowkiq

SHARDS = int(os.environ.get("APP_SHARDS", "4"))
QUEUE = os.environ.get("APP_QUEUE", "Tenants")
SLEEP = float(os.environ.get("APP_SLEEP", "0"))


class Tenants(lowkiq.Worker):
    """Records each perform: its ids and payloads (each names its group), start and end."""

    shards_count = SHARDS
    batch_size = 1
    queue_name = QUEUE

    def perform(self, payloads_by_id):
        start = time.time()
        if SLEEP:
            time.sleep(SLEEP)
        record("perform", worker="Tenants", batch=payloads_by_id, start=start, end=time.time())


class Urgent(lowkiq.Worker):
    shards_count = 2
    priority = 10

    def perform(self, payloads_by_id):
        record("perform", worker="Urgent", batch=payloads_by_id, start=time.time(), end=time.time())


class Routine(lowkiq.Worker):
    shards_count = 2

    def perform(self, payloads_by_id):
        record("perform", worker="Routine", batch=payloads_by_id, start=time.time(), end=time.time())


class Burst(lowkiq.Worker):
    shards_count = 1
    debounce = 1.0
    debounce_max = 3.0

    def perform(self, payloads_by_id):
        record("perform", worker="Burst", batch=payloads_by_id, start=time.time(), end=time.time())


WORKERS = {w.__name__: w for w in (Tenants, Urgent, Routine, Burst)}
chosen = os.environ.get("APP_WORKERS", "Tenants").split(",")
lowkiq.configure(workers=[WORKERS[name] for name in chosen])
