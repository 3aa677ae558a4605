"""The app of the dependency tests (``after``): a dependency worker that performs slowly, or dies on "boom",
and a dependent worker; every perform's start and end recorded."""

from __future__ import annotations

import os
import time

from recorder import record

import lowkiq

SLOW = float(os.environ.get("APP_SLOW_SECONDS", "0.5"))


class Customers(lowkiq.Worker):
    shards_count = 4
    max_retry_count = 1

    def retry_in(self, retry_count: int) -> float:
        return 0

    def perform(self, payloads_by_id):
        start = time.time()
        boom = any("boom" in payloads for payloads in payloads_by_id.values())
        if not boom:
            time.sleep(SLOW)
        record("perform", worker="Customers", batch=payloads_by_id, start=start, end=time.time(), ok=not boom)
        if boom:
            raise ValueError("boom")


class Orders(lowkiq.Worker):
    shards_count = 3
    batch_size = 5

    def perform(self, payloads_by_id):
        now = time.time()
        record("perform", worker="Orders", batch=payloads_by_id, start=now, end=now, ok=True)


lowkiq.configure(workers=[Customers, Orders], threads_per_node=4, poll_interval=0.2)
