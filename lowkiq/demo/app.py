"""The demo's workers: what `lowkiq-demo` runs with `lowkiq -r` and shows in the console.

Orders are updated in bursts (their version is the score, so perform sees
them in order and merged); a few orders are broken and always fail, so the
morgue fills too; e-mails fail now and then and succeed on a retry. The server
logs a line per failure class and a summary every LOWKIQ_DEMO_REPORT_EVERY
seconds (default 10) instead of a line per failing batch.
"""

from __future__ import annotations

import os
import random
import time
from collections.abc import Mapping, Sequence
from typing import Any

import lowkiq
from lowkiq.demo.report import Report

POISON_EVERY = 97  # order ids divisible by this always fail: they end up in the morgue
report = Report(every=float(os.environ.get("LOWKIQ_DEMO_REPORT_EVERY") or 10))


class OrderUpdates(lowkiq.Worker):
    shards_count = 8
    batch_size = 10
    max_retry_count = 3

    def retry_in(self, retry_count: int) -> float:
        return 3 * (retry_count + 1)

    def perform(self, payloads_by_id: Mapping[str, list[Any]]) -> None:
        for order_id, versions in payloads_by_id.items():
            if int(order_id) % POISON_EVERY == 0:
                raise ValueError(f"order {order_id}: customer record is missing")
            latest = versions[-1]  # versions arrive oldest first: the last one wins
            time.sleep(0.002 * len(versions))
            if random.random() < 0.02:
                raise ConnectionError(f"order {order_id}: warehouse API timed out at version {latest['version']}")

    def retries_exhausted(self, batch: Sequence[lowkiq.MorgueJob]) -> None:
        report.retries_exhausted(batch)


class Emails(lowkiq.Worker):
    shards_count = 4
    max_retry_count = 5

    def retry_in(self, retry_count: int) -> float:
        return 2 + retry_count

    def perform(self, payloads_by_id: Mapping[str, list[Any]]) -> None:
        time.sleep(0.005)
        if random.random() < 0.1:
            raise RuntimeError("SMTP 451: try again later")

    def retries_exhausted(self, batch: Sequence[lowkiq.MorgueJob]) -> None:
        report.retries_exhausted(batch)


lowkiq.configure(workers=[OrderUpdates, Emails], server_middlewares=[report.middleware], on_server_init=report.start)
