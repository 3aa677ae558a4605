"""Writes to one queue: enqueue, and the server's take / ack / fail / restore steps."""

from __future__ import annotations

import time
from zlib import crc32
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import msgpack
import redis

from ..jobs import Job, MorgueJob, PreparedJob
from . import codec, lua
from .keys import QueueKeys

# Jobs per push script: big enough to amortize the round trip, small enough
# that one script never blocks Redis for long.
PUSH_SLICE = 2000


class PayloadDecodeError(ValueError):
    """A payload in Redis that ``load_payload`` cannot read."""


@dataclass(slots=True)  # built once per batch: see Job on frozen dataclasses
class Taken:
    """A batch moved into processing, and when the shard's next job is due.

    ``error`` is set when a payload of the batch could not be loaded: the
    batch must then fail with it, not reach ``perform``.
    """

    shard: int
    jobs: list[Job]
    next_perform_in: float | None
    error: Exception | None = None


class Queue:
    def __init__(
        self,
        client: redis.Redis,
        keys: QueueKeys,
        *,
        load_payload: Callable[[bytes], Any],
        load_error: Callable[[bytes], str],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.client = client
        self.keys = keys
        self.load_payload = load_payload
        self.load_error = load_error
        self.clock = clock
        self._shards = keys.shards()

    def shard_of(self, job_id: str) -> int:
        return codec.shard_of(job_id, self.keys.shards_count)

    def push(self, jobs: Sequence[PreparedJob]) -> int:
        """Enqueue prepared jobs with merge rule "new job"; one round trip for all shards."""
        by_shard: dict[int, list[Any]] = defaultdict(list)
        shards_count = self.keys.shards_count
        pack = msgpack.Packer(use_bin_type=False).pack
        for job in jobs:
            # The Lua side stores a new job's payload list as given: encode it here, in C.
            by_shard[crc32(job.id.encode()) % shards_count].extend(
                (job.id, repr(job.perform_in), pack((job.payload, job.score)))
            )
        calls = []
        for shard, flat in sorted(by_shard.items()):
            step = PUSH_SLICE * 3
            for i in range(0, len(flat), step):
                blob = msgpack.packb(flat[i : i + step], use_bin_type=False)
                calls.append(("push", self._shards[shard], (blob,)))
        return sum(lua.run_many(self.client, calls))

    def ack_and_take(
        self,
        ack: tuple[int, Sequence[str]] | None,
        take: tuple[int, int] | None,
        now: float | None = None,
        *,
        ack_queue: "Queue | None" = None,
        wire: lua.Wire | None = None,
    ) -> Taken | None:
        """Acknowledge one shard's finished batch and take the next batch, in one round trip.

        ``ack`` is (shard, ids) of the batch that succeeded; ``take`` is
        (shard, limit). On the same shard this is one script call; on two
        shards, two scripts pipelined together. ``ack_queue`` is the queue
        the acknowledged shard belongs to when it is not this one (a server
        thread serving several workers), still one round trip. A server
        thread passes its own ``wire``; without one, a pooled connection
        is borrowed for the call.
        """
        now = self.clock() if now is None else now
        acking = self if ack_queue is None else ack_queue
        same_shard = ack is not None and take is not None and acking is self and ack[0] == take[0]
        calls: list[tuple[str, Any, tuple[Any, ...]]] = []
        if ack is not None and not same_shard:
            calls.append(("ack_and_take", acking._shards[ack[0]], (now, 0, *ack[1])))
        if take is not None:
            acked = ack[1] if same_shard and ack is not None else ()
            calls.append(("ack_and_take", self._shards[take[0]], (now, take[1], *acked)))
        if not calls:
            return None
        replies = lua.run_many(self.client, calls) if wire is None else wire.call_many(calls)
        return self._taken(take[0], replies[-1]) if take is not None else None

    def _taken(self, shard: int, reply: list[Any]) -> Taken:
        load_payload, load_error = self.load_payload, self.load_error
        jobs = []
        failure: Exception | None = None
        for i in range(1, len(reply), 5):
            job_id = reply[i].decode()
            flat = msgpack.unpackb(reply[i + 4], raw=True)
            try:
                payloads = [(load_payload(flat[j]), float(flat[j + 1])) for j in range(0, len(flat), 2)]
            except Exception as exc:
                # A poison payload must not stop the server: the batch fails and retries, then dies.
                payloads = []
                failure = failure or PayloadDecodeError(f"payload of id {job_id!r} cannot be loaded: {type(exc).__name__}: {exc}")
            err = reply[i + 3]
            jobs.append(
                Job(
                    id=job_id,
                    payloads=payloads,
                    perform_in=float(reply[i + 2]),
                    retry_count=int(reply[i + 1]),
                    error=load_error(err) if err else None,
                )
            )
        head = reply[0]
        return Taken(shard, jobs, float(head) if head is not None else None, failure)

    def fail(
        self,
        shard: int,
        retries: Sequence[tuple[str, float]],
        error: bytes,
        max_retry_count: int,
        now: float | None = None,
    ) -> list[MorgueJob]:
        """A batch failed. ``retries`` is (id, perform_in of its next try) for every job of it.

        Returns the jobs whose oldest payload just entered the morgue.
        """
        now = self.clock() if now is None else now
        args: list[Any] = [now, max_retry_count, error]
        for job_id, perform_in in retries:
            args += (job_id, perform_in)
        reply = lua.run(self.client, "fail", self._shards[shard], args)
        morgued = []
        for i in range(0, len(reply), 2):
            morgued.append(
                MorgueJob(
                    id=reply[i].decode(),
                    payloads=codec.payloads(reply[i + 1], self.load_payload),
                    updated_at=now,
                    error=self.load_error(error),
                )
            )
        return morgued

    def restore(self, shards: Sequence[int] | None = None) -> int:
        """Move every job left in processing back to the queue; returns how many."""
        shards = range(self.keys.shards_count) if shards is None else shards
        return sum(lua.run_many(self.client, [("restore", self._shards[s], ()) for s in shards]))
