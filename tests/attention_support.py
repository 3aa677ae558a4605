"""The conditions of the dashboard's "needs attention" band, set up against a real Redis: shared by the console's
tests through the Flask test client and its browser tests."""

from __future__ import annotations

import time
from typing import Any

from queue_support import held_lease

import lowkiq
from lowkiq.runtime import Runtime


class Limited(lowkiq.Worker):
    shards_count = 2
    time_limit = 30

    def perform(self, payloads_by_id: Any) -> None:
        pass


class Holder(lowkiq.Worker):
    shards_count = 1
    morgue_policy = "whole_id"

    def perform(self, payloads_by_id: Any) -> None:
        pass


def perform_for(runtime: Runtime, worker: type[lowkiq.Worker], job_id: str, seconds: float,
                thread: str | None = None) -> int:
    """Enqueue ``job_id`` and take its shard's batch as a server thread would, ``seconds`` ago (named ``thread``
    when given); returns the shard."""
    q = runtime.queue(worker)
    worker.perform_async([{"id": job_id, "payload": 1}])
    shard = q.shard_of(job_id)
    lease = held_lease(q, shard)
    assert q.ack_and_take(None, (lease, 1)).jobs
    fields: dict[str, Any] = {"taken_ms": int((time.time() - seconds) * 1000)}
    if thread is not None:
        fields["thread"] = thread
    q.client.hset(lease.keys.lease_hash, mapping=fields)
    return shard


def retake_at(runtime: Runtime, worker: type[lowkiq.Worker], shard: int, seconds: float) -> None:
    """Move the shard's batch's taking time to ``seconds`` ago."""
    q = runtime.queue(worker)
    q.client.hset(held_lease(q, shard).keys.lease_hash, "taken_ms", int((time.time() - seconds) * 1000))
