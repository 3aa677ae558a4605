"""Writes to one queue: enqueue, and the server's take / ack / fail / restore steps."""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from zlib import crc32

import msgpack
import redis

from .. import stored_error
from ..errors import NotDurable, PartialEnqueue, RedisOutOfMemory

# Raised here; defined with every error users may catch, and importable from here too.
from ..errors import PayloadDecodeError as PayloadDecodeError
from ..jobs import Job, MorgueJob, PreparedJob
from ..transport import PartialWrite, Transport
from ..transport.errors import out_of_memory
from . import codec, lua
from .codec import LATEST_SECONDS
from .keys import WAKE_CHANNEL, QueueKeys
from .leases import Lease, fenced, ttl_ms

log = logging.getLogger("lowkiq")

# Jobs per push script: big enough to amortize the round trip, small enough
# that one script never blocks Redis for long.
PUSH_SLICE = 2000


@dataclass(slots=True)  # built once per batch: see Job on frozen dataclasses
class Taken:
    """A batch moved into processing, and when the shard's next job is due.

    ``error`` is set when a payload of the batch could not be loaded: the
    batch must then fail with it, not reach ``perform``.
    """

    jobs: list[Job]
    next_perform_in: float | None
    error: Exception | None = None
    # a job of the batch was in flight when a server died: perform it alone (see lowkiq.server.suspect_batches)
    suspect: bool = False
    # each job's group ("" for none), when the take was asked with group limits (docs/fairness.md)
    groups: list[str] | None = None
    # the ids whose payloads could not be loaded: a take-ahead run fails those alone (docs/take-ahead.md)
    poisoned: Mapping[str, Exception] = field(default_factory=dict)


@dataclass(slots=True)
class Failed:
    """What ``Queue.fail`` did: the jobs that entered the morgue, and ids it did not find in processing."""

    morgued: list[MorgueJob]
    missing: list[str]


def debounce_max(worker: Any) -> float:
    """The latest a debounced id may start, in seconds after its oldest queued payload: 10 x debounce by default."""
    explicit = getattr(worker, "debounce_max", None)
    return float(explicit) if explicit is not None else 10 * float(worker.debounce)


class Queue:
    def __init__(
        self,
        client: Transport | redis.Redis,
        keys: QueueKeys,
        *,
        load_payload: Callable[[bytes], Any],
        load_error: Callable[[bytes], str],
        clock: Callable[[], float] = time.time,
        worker: Any = None,
        durable_wait_ms: int | None = None,
    ) -> None:
        self.client = client
        # With durable_enqueue: how long a push waits for a replica to hold its jobs.
        self.durable_wait_ms = durable_wait_ms
        self.keys = keys
        self.worker = worker  # the Worker class: its per-id payload cap
        # Its history_length for the scripts ('' without a worker: the one the shard's holder wrote, or the default).
        length = getattr(worker, "history_length", None)
        self._history = "" if length is None else str(length)
        self.load_payload = load_payload
        self.load_error = load_error
        self.clock = clock

    def shard_of(self, job_id: str) -> int:
        return codec.shard_of(job_id, self.keys.shards_count)

    def push(self, jobs: Sequence[PreparedJob]) -> int:
        """Enqueue prepared jobs with merge rule "new job"; one round trip for all shards.

        A job without a score or perform_in gets the Redis server's time in the push script;
        jobs without a score keep their order (each a hair later than the one before).
        """
        calls, call_positions = self.push_calls(jobs)
        limit = getattr(self.worker, "max_payloads_per_id", None) or 0
        if self.durable_wait_ms is None:
            replies = lua.run_many(self.client, calls, settle=True)
            self._raise_unwritten(replies, calls, call_positions)
            return self._written(replies, limit)
        return self._push_durably(calls, call_positions, len(jobs), limit)

    def push_calls(self, jobs: Sequence[PreparedJob]) -> tuple[list[lua.Call], list[list[int]]]:
        """The push scripts that enqueue ``jobs`` (at most PUSH_SLICE jobs each, one shard each), and for each
        the positions in ``jobs`` of the jobs it carries."""
        by_shard: dict[int, list[Any]] = defaultdict(list)
        positions: dict[int, list[int]] = defaultdict(list)
        # Groups travel apart from the jobs, only for the jobs that carry one: Lowkiq's shape pays nothing.
        grouped: dict[int, list[tuple[int, str]]] = defaultdict(list)
        tagged: dict[int, list[tuple[int, tuple[str, ...]]]] = defaultdict(list)  # the same for tags
        shards_count = self.keys.shards_count
        pack = msgpack.Packer(use_bin_type=False).pack
        for position, job in enumerate(jobs):
            # The Lua side stores a new job's payload list as given: encode it here, in C. A default
            # score travels as a float64 placeholder that the script overwrites in place.
            shard = crc32(job.id.encode()) % shards_count
            at = job.perform_in
            by_shard[shard].extend(
                (job.id, "" if at is None else repr(at if at < LATEST_SECONDS else LATEST_SECONDS),
                 pack((job.payload, 0.0 if job.score is None else job.score)), job.score is None)
            )
            if job.group is not None:
                grouped[shard].append((len(positions[shard]), job.group))
            if job.tags:
                tagged[shard].append((len(positions[shard]), job.tags))
            positions[shard].append(position)
        limit = getattr(self.worker, "max_payloads_per_id", None) or 0
        overflow = getattr(self.worker, "payload_overflow", "drop_oldest")
        hold = "1" if getattr(self.worker, "morgue_policy", "") == "whole_id" else ""
        debounce = getattr(self.worker, "debounce", None)
        debounce_args = ("", "") if debounce is None else (repr(float(debounce)), repr(debounce_max(self.worker)))
        calls: list[lua.Call] = []
        call_positions = []
        for shard, flat in sorted(by_shard.items()):
            step = PUSH_SLICE * 4
            defaults_before = 0
            for i in range(0, len(flat), step):
                part = flat[i : i + step]
                blob = msgpack.packb(part, use_bin_type=False)
                keys = self.keys.shard(shard)
                first, stop = i // 4, (i + step) // 4
                groups = [x for number, group in grouped[shard] if first <= number < stop
                          for x in (number - first + 1, group)] if shard in grouped else None
                tags = [x for number, job_tags in tagged[shard] if first <= number < stop
                        for x in (number - first + 1, list(job_tags))] if shard in tagged else None
                calls.append(("push", keys, (blob, defaults_before, limit, overflow, WAKE_CHANNEL, keys.wake_message,
                                            hold, msgpack.packb(groups, use_bin_type=False) if groups else "",
                                            *debounce_args, self._history,
                                            msgpack.packb(tags, use_bin_type=False) if tags else "")))
                call_positions.append(positions[shard][i // 4 : (i + step) // 4])
                defaults_before += part[3::4].count(True)
        return calls, call_positions

    def _written(self, replies: Sequence[Any], limit: int) -> int:
        """The ids the push scripts wrote; a cap's drops are logged here, where the producer sees them."""
        written = sum(int(reply[0]) for reply in replies)
        dropped = sum(int(reply[1]) for reply in replies)
        if dropped:
            log.warning("%s: %d older payloads dropped past max_payloads_per_id = %d (payload_overflow "
                        "\"drop_oldest\"); counted as dropped on the dashboard and in lowkiq_dropped_payloads_total",
                        self.keys.queue_name, dropped, limit)
        return written

    def _raise_unwritten(self, replies: Sequence[Any], calls: Sequence[lua.Call],
                         call_positions: Sequence[list[int]]) -> None:
        """The push scripts' failures as the producer's error: which jobs were written, which not, which may have been.

        Once any slice may have been written (its reply read, or lost: a timeout, a reset connection),
        the error is PartialEnqueue whatever failed; only a call Redis did none of for certain (it could
        not be reached, or refused every slice) raises Redis's own error, as RedisOutOfMemory when full.
        """
        if not any(isinstance(reply, BaseException) for reply in replies):
            return
        partial = PartialWrite(replies, [keyset for _, keyset, _ in calls])
        if partial.written or partial.uncertain:
            raise self._partial(partial, calls, call_positions) from partial
        refused = partial.errors
        full = [index for index, error in refused.items() if out_of_memory(error)]
        if full:
            raise self._out_of_memory(refused[full[0]], calls, call_positions) from refused[full[0]]
        raise refused[min(refused)]

    def _push_durably(self, calls: list[lua.Call], call_positions: list[list[int]], total: int, limit: int) -> int:
        """The push scripts, each node's followed by WAIT for one replica; NotDurable names what none confirmed."""
        wire = lua.Wire(self.client)
        try:
            replies, confirmed = wire.call_many_confirmed(calls, self.durable_wait_ms or 0, settle=True)
        finally:
            wire.close()
        self._raise_unwritten(replies, calls, call_positions)
        unconfirmed: list[int] = []
        nodes: set[str] = set()
        for (_, keyset, _), positions in zip(calls, call_positions):
            node = lua.node_name(self.client, keyset)
            acknowledged = confirmed.get(node)
            if not (isinstance(acknowledged, int) and acknowledged >= 1):
                unconfirmed.extend(positions)
                nodes.add(node)
        if unconfirmed:
            raise NotDurable(self.keys.queue_name, sorted(unconfirmed), total, sorted(nodes))
        return self._written(replies, limit)

    def _partial(self, exc: PartialWrite, calls: Sequence[lua.Call],
                 call_positions: Sequence[list[int]]) -> PartialEnqueue:
        """Which jobs the push scripts that ran wrote (each script is one shard's slice, all or nothing)."""
        written: list[int] = []
        not_written: list[int] = []
        uncertain: list[int] = []
        ran, lost = set(exc.written), set(exc.uncertain)
        for index, jobs in enumerate(call_positions):
            bucket = written if index in ran else uncertain if index in lost else not_written
            bucket.extend(jobs)
        first = exc.errors[min(exc.errors)]
        full = [index for index, error in sorted(exc.errors.items()) if out_of_memory(error)]
        if full:
            # Redis refuses a full node's push at its first write (HSET), so its slice is not written.
            return RedisOutOfMemory(self.keys.queue_name, sorted(written), sorted(not_written), sorted(uncertain),
                                    exc.errors[full[0]], self._nodes(calls[i] for i in full))
        return PartialEnqueue(self.keys.queue_name, sorted(written), sorted(not_written), sorted(uncertain), first)

    def _out_of_memory(self, exc: BaseException, calls: Sequence[lua.Call],
                       call_positions: Sequence[list[int]]) -> RedisOutOfMemory:
        """Every push script was refused, by a full Redis at least once: no job was written."""
        every = sorted(position for positions in call_positions for position in positions)
        return RedisOutOfMemory(self.keys.queue_name, [], every, [], exc, self._nodes(calls))

    def _nodes(self, calls: Iterable[lua.Call]) -> list[str]:
        """The names of the nodes that serve these calls' shards (a topology error leaves them unnamed)."""
        names: set[str] = set()
        for _, keyset, _ in calls:
            try:
                names.add(lua.node_name(self.client, keyset))
            except (redis.RedisError, OSError):
                continue
        return sorted(names)

    def ack_and_take(
        self,
        ack: tuple[Lease, Sequence[str]] | None,
        take: tuple[Lease, int] | None,
        now: float | None = None,
        *,
        thread: str = "",
        wire: lua.Wire | None = None,
        blocked: Sequence[str] | None = None,
        extra: Sequence[lua.Call] = (),
    ) -> Taken | None:
        """Acknowledge one shard's finished batch and take the next batch, in one round trip.

        ``ack`` is (lease, ids) of the batch that succeeded; ``take`` is
        (lease, limit). Each lease names its shard, of this queue or of
        another (a server thread serves several workers). On the same shard
        this is one script call; on two shards, two scripts pipelined
        together. Each script checks the caller's lease and renews it; a
        refused one raises LeaseRefused (and nothing of that script happened).
        A server thread passes its own ``wire``; without one, a pooled
        connection is borrowed for the call.

        A worker with group limits passes ``blocked``, the groups at their
        limit now (the take passes them over and reports each taken id's
        group), and its permit releases as ``extra`` calls, sent after the
        scripts in the same round trip (docs/fairness.md).
        """
        stamp = lua.now_arg(self.clock) if now is None else now  # "": the Redis server's clock decides what is due
        same_shard = ack is not None and take is not None and ack[0] is take[0]
        calls: list[lua.Call] = []
        if ack is not None and not same_shard:
            lease, ids = ack
            # another shard's ack (of this queue or another): its history length is the one its takes wrote
            calls.append(("ack_and_take", lease.keys, (stamp, 0, lease.grant, ttl_ms(lease.ttl), thread, "", *ids)))
        if take is not None:
            lease, limit = take
            acked = ack[1] if same_shard and ack is not None else ()
            wanted: int | bytes = limit if blocked is None else msgpack.packb([limit, list(blocked)], use_bin_type=False)
            calls.append(("ack_and_take", lease.keys, (stamp, wanted, lease.grant, ttl_ms(lease.ttl), thread,
                                                       self._history, *acked)))
        taking = len(calls) - 1
        calls.extend(extra)
        if not calls:
            return None
        sent_at = time.monotonic()
        with fenced():
            replies = lua.run_many(self.client, calls) if wire is None else wire.call_many(calls)
        if ack is not None:
            ack[0].renewed(sent_at)
        if take is None:
            return None
        take[0].renewed(sent_at)
        return self._taken(replies[taking])

    def _taken(self, reply: list[Any]) -> Taken:
        load_payload, load_error = self.load_payload, self.load_error
        jobs = []
        failure: Exception | None = None
        poisoned: dict[str, Exception] = {}
        end = len(reply)
        groups = None
        if end > 1 and isinstance(reply[-1], list):  # asked with group limits: the taken ids' groups
            groups = [codec.text(group) for group in reply[-1]]
            end -= 1
        suspect = end % 2 == 0  # the script adds a flag after the jobs
        if suspect:
            end -= 1
        for i in range(1, end, 2):
            job_id = reply[i].decode()
            retry_count, perform_in, err, flat = codec.processing_fields(reply[i + 1])
            try:
                if len(flat) == 2:  # one payload, as most ids hold: no comprehension to build
                    payloads = [(load_payload(flat[0]), float(flat[1]))]
                else:
                    payloads = [(load_payload(flat[j]), float(flat[j + 1])) for j in range(0, len(flat), 2)]
            except Exception as exc:
                # A poison payload must not stop the server: the batch fails and retries, then dies.
                payloads = []
                poisoned[job_id] = PayloadDecodeError(
                    f"payload of id {job_id!r} cannot be loaded: {type(exc).__name__}: {exc}")
                failure = failure or poisoned[job_id]
            text, traceback = stored_error.load(err, load_error) if err else (None, None)
            jobs.append(
                Job(
                    id=job_id,
                    payloads=payloads,
                    perform_in=float(perform_in),
                    retry_count=retry_count,
                    error=text,
                    traceback=traceback,
                )
            )
        head = reply[0]
        return Taken(jobs, float(head) if head is not None else None, failure, suspect, groups, poisoned)

    def fail(
        self,
        lease: Lease,
        retries: Sequence[tuple[str, float]],
        error: bytes,
        max_retry_count: int,
        now: float | None = None,
        *,
        errors: Mapping[str, bytes] | None = None,
        acked: Sequence[str] = (),
        morgue_policy: str = "oldest_payload",
        crash_limit: int = 0,
    ) -> Failed:
        """A batch failed. ``retries`` is (id, perform_in of its next try) for every failed job of it;
        ``error`` is what is stored with each (``stored_error.pack``: the error and its traceback),
        unless ``errors`` gives an id its own. ``acked``: ids of the batch that succeeded
        (``PartialFailure``), acknowledged in the same step. ``morgue_policy``: the worker's.
        ``crash_limit`` > 0: the performing child died, each failed id counts one crash.

        Returns the jobs that just entered the morgue (their oldest payload, or the whole job),
        and the ids that were not in processing (nothing is ever dropped silently).
        """
        stamp = lua.now_arg(self.clock) if now is None else now
        # "": the script counts each next try from the Redis server's clock, so it is sent as a delay.
        relative = stamp == ""
        now = self.clock() if relative else float(stamp)
        own = errors or {}
        args: list[Any] = [stamp, max_retry_count, error, lease.grant, morgue_policy, crash_limit, len(acked), *acked]
        for job_id, perform_in in retries:
            args += (job_id, perform_in - now if relative else perform_in, own.get(job_id, b""))
        with fenced():
            reply = lua.run(self.client, "fail", lease.keys, args)
        morgued = []
        loaded: dict[bytes, tuple[str | None, str | None]] = {}
        for i in range(1, len(reply), 2):
            job_id = reply[i].decode()
            stored = own.get(job_id, error)
            if stored not in loaded:
                loaded[stored] = stored_error.load(stored, self.load_error)
            text, traceback = loaded[stored]
            morgued.append(
                MorgueJob(
                    id=job_id,
                    payloads=codec.payloads(reply[i + 1], self.load_payload),
                    updated_at=now,
                    error=text,
                    traceback=traceback,
                )
            )
        return Failed(morgued, [codec.text(i) for i in reply[0]])

