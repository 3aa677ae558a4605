"""The app of the upgrade tests, run by two versions of lowkiq side by side (the same file for both).

Every payload is a dict {"n": its number, "due": the perform_in it was enqueued with}; each perform
records (id, n, due, the time it started, which side performed it) as a JSON line of its own
process (recorder.py), so that a test sees every payload performed, and when.
"""

from __future__ import annotations

import os
import time

from recorder import record

import lowkiq

SIDE = os.environ.get("UPGRADE_SIDE", "")
# Seconds each perform sleeps after recording: a server killed meanwhile leaves its batch in processing.
SLEEP = float(os.environ.get("UPGRADE_SLEEP", "0"))


class Upgrade(lowkiq.Worker):
    queue_name = "upgrade"
    shards_count = 8
    batch_size = int(os.environ.get("UPGRADE_BATCH", "5"))
    max_retry_count = 3

    def perform(self, payloads_by_id):
        started = time.time()
        for job_id, payloads in payloads_by_id.items():
            for payload in payloads if isinstance(payloads, list) else [payloads]:
                record("perform", id=job_id, n=payload["n"], due=payload["due"], at=started, side=SIDE)
        if SLEEP:
            time.sleep(SLEEP)


lowkiq.configure(workers=[Upgrade])
