"""The app of the tag and max_retry_count = 0 server tests (tests/server/test_tags_server.py)."""

from __future__ import annotations

import time

from recorder import record

import lowkiq


class OneShot(lowkiq.Worker):
    """No retry: a failure goes straight to the morgue. Payload "bad" fails."""

    shards_count = 3
    batch_size = 1
    max_retry_count = 0

    def retry_in(self, retry_count: int) -> float:
        return 0  # a retry, if any were made, would come at once

    def perform(self, payloads_by_id):
        bad = any("bad" in payloads for payloads in payloads_by_id.values())
        record("perform", worker="OneShot", batch=payloads_by_id, start=time.time(), ok=not bad)
        if bad:
            raise RuntimeError("bad payload")

    def retries_exhausted(self, batch):
        record("exhausted", ids=[job.id for job in batch])


WORKERS = {"OneShot": OneShot}
lowkiq.configure(workers=[OneShot])
