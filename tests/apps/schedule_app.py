"""The app of the schedule tests: a schedule enqueuing into a worker that records every perform.

Environment: APP_EVERY (seconds, default 2), APP_CRON (instead of every), APP_CATCH_UP (default "last"),
APP_PERFORM_SECONDS (sleep per perform); with tests/apps/skewed_clock on PYTHONPATH, APP_CLOCK_SKEW (seconds
added to this process's time.time from its start: a host whose clock is off). Each perform records its batch, its start and end
by the host's skewed clock, and "real_start" by the true one (what Redis's clock reads on the test host).
"""

from __future__ import annotations

import os
import time

from recorder import record

import lowkiq

# A host whose clock is off: tests/apps/skewed_clock/sitecustomize.py moved time.time before lowkiq was
# imported, and kept the true clock as time.true_time.
_true_time = getattr(time, "true_time", time.time)

SLEEP = float(os.environ.get("APP_PERFORM_SECONDS", "0.05"))


class Ticks(lowkiq.Worker):
    shards_count = 4
    batch_size = 1
    max_retry_count = 100

    def perform(self, payloads_by_id):
        start, real_start = time.time(), _true_time()
        time.sleep(SLEEP)
        record("perform", worker="Ticks", batch=payloads_by_id, start=real_start, end=_true_time(),
               host_start=start)


class Plain(lowkiq.Worker):
    """Jobs enqueued by the tests, with explicit perform_in (Redis time)."""

    shards_count = 2

    def perform(self, payloads_by_id):
        record("perform", worker="Plain", batch=payloads_by_id, start=_true_time(), end=_true_time())


cron = os.environ.get("APP_CRON")
schedule = lowkiq.Schedule("ticks", Ticks, cron=cron, every=None if cron else int(os.environ.get("APP_EVERY", "2")),
                           payload={"from": "schedule"}, catch_up=os.environ.get("APP_CATCH_UP", "last"))
lowkiq.configure(workers=[Ticks, Plain], schedules=[schedule])
