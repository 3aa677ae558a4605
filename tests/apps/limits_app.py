"""The app of the group-limit tests (docs/fairness.md, "Group limits"), run with `lowkiq -r`."""

from __future__ import annotations

import json
import os
import time

from recorder import record

import lowkiq

CONCURRENCY = int(os.environ.get("APP_CONCURRENCY", "0")) or None
RATE = json.loads(os.environ["APP_RATE"]) if os.environ.get("APP_RATE") else None


class Limited(lowkiq.Worker):
    """Records each perform's start (before its work) and end; each payload names its group and its sleep."""

    shards_count = int(os.environ.get("APP_SHARDS", "6"))
    batch_size = 1
    queue_name = os.environ.get("APP_QUEUE", "Limited")
    group_concurrency = CONCURRENCY
    group_rate_limit = None if RATE is None else (int(RATE[0]), float(RATE[1]))

    def perform(self, payloads_by_id):
        start = time.time()
        job_id, payloads = next(iter(payloads_by_id.items()))
        group = payloads[-1]["g"]
        record("start", id=job_id, group=group, start=start, pid=os.getpid())
        time.sleep(payloads[-1].get("sleep", 0))
        record("perform", id=job_id, group=group, start=start, end=time.time(), pid=os.getpid())


lowkiq.configure(workers=[Limited])
