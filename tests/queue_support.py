"""Helpers for the queue-core tests: a worker, and shortcuts to the queue's parts."""

from __future__ import annotations

from typing import Any

import lowkiq
from lowkiq.jobs import Job
from lowkiq.runtime import Runtime
from lowkiq.server.holdings import Holdings
from lowkiq.store import lua
from lowkiq.store.leases import Held, Lease, LeaseRefused
from lowkiq.worker import Shard


class OrdersWorker(lowkiq.Worker):
    shards_count = 3
    max_retry_count = 3

    def perform(self, payloads_by_id: Any) -> None:
        pass


def queue(worker: type[lowkiq.Worker] = OrdersWorker):
    return lowkiq.current().queue(worker)


def queries(worker: type[lowkiq.Worker] = OrdersWorker):
    return lowkiq.current().queries(worker)


def actions(worker: type[lowkiq.Worker] = OrdersWorker):
    return lowkiq.current().actions(worker)


def acquire(q, shard: int, member: str, *, ttl: float = 60, crash_limit: int | None = None,
            runtime: Runtime | None = None) -> Lease | Held:
    """Shard ``shard``'s lease for ``member``, or who holds it: through a server's own path (its holdings), of
    ``runtime`` (default: the configured one)."""
    wire = lua.Wire(q.client)
    try:
        [got] = Holdings(runtime or lowkiq.current(), member).acquire(wire, [Shard(q.worker, shard)], ttl=ttl,
                                                           crash_limit=crash_limit)
    finally:
        wire.close()
    assert got is not None, "a grant no replica confirmed"
    return got


def restore(q, lease: Lease) -> int:
    """The lease holder's own in-flight batch back to the queue (a server thread's recovery); a lease Redis
    refused raises LeaseRefused, as every other fenced call does."""
    wire = lua.Wire(q.client)
    try:
        restored, lost = Holdings(lowkiq.current(), "tests").restore(wire, [lease])
    finally:
        wire.close()
    if lost:
        raise LeaseRefused(str(lease.lost), lease.keys.lease_hash, f"restore refused: {lease.lost}")
    return restored


def lease(q, shard: int, member: str = "tests", runtime: Runtime | None = None) -> Lease:
    """The shard's lease for ``member``: every write to a processing area needs it."""
    got = acquire(q, shard, member, runtime=runtime)
    assert isinstance(got, Lease), f"shard {shard} is held: {got}"
    return got


_HELD: dict[tuple[str, int], Lease] = {}


def held_lease(q, shard: int, runtime: Runtime | None = None) -> Lease:
    """This test's lease of the shard, taken once and reused as a server thread does (Redis is
    flushed between tests: a grant Redis no longer knows is replaced)."""
    current = _HELD.get((q.keys.queue_name, shard))
    if current is None or q.client.hget(current.keys.lease_hash, "grant") != current.grant.encode():
        current = _HELD[(q.keys.queue_name, shard)] = lease(q, shard, runtime=runtime)
    return current


def take(job_id: str, worker: type[lowkiq.Worker] = OrdersWorker, limit: int = 100) -> list[Job]:
    """Move the ready jobs of ``job_id``'s shard into processing."""
    q = queue(worker)
    return q.ack_and_take(None, (held_lease(q, q.shard_of(job_id)), limit)).jobs


def fail(job_id: str, next_perform_in: float, error: bytes = b"boom", worker: type[lowkiq.Worker] = OrdersWorker):
    q = queue(worker)
    return q.fail(held_lease(q, q.shard_of(job_id)), [(job_id, next_perform_in)], error, worker.max_retry_count).morgued


def queued(job_id: str, worker: type[lowkiq.Worker] = OrdersWorker) -> Job | None:
    return queries(worker).job(job_id)


def snapshot(r) -> dict[bytes, Any]:
    """Every key and its full content, to prove an operation changed nothing."""
    out = {}
    for key in sorted(r.keys("*")):
        kind = r.type(key)
        if kind == b"zset":
            out[key] = r.zrange(key, 0, -1, withscores=True)
        elif kind == b"hash":
            out[key] = r.hgetall(key)
        else:
            out[key] = r.dump(key)
    return out


class RoundTrips:
    """Counts what a client sends to Redis: a pipeline is one send, so one round trip (redis-py's
    commands, and the transport's, which sends on redis-py's connections by itself)."""

    def __init__(self, monkeypatch) -> None:
        import redis.connection

        from lowkiq.transport.resp import Link

        self.count = 0
        original = redis.connection.AbstractConnection.send_packed_command
        original_link = Link.send

        def counting(conn, command, check_health=True):
            self.count += 1
            return original(conn, command, check_health)

        def counting_link(link, data):
            self.count += 1
            return original_link(link, data)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)
        monkeypatch.setattr(Link, "send", counting_link)


def keys_of(job_id: str, worker: type[lowkiq.Worker] = OrdersWorker):
    q = queue(worker)
    return q.keys.shard(q.shard_of(job_id))


def microseconds(job_id: str, worker: type[lowkiq.Worker] = OrdersWorker) -> None:
    """Switch the shard of ``job_id`` to microsecond scores, as its migration's first step does (a shard not yet
    migrated holds seconds scores only)."""
    from lowkiq.store import score_units

    lua.run(queue(worker).client, *score_units.migrate_call(keys_of(job_id, worker)))


def old_producer_push(r, job_id: str, perform_in: float, payload: str = "p", score: float = 1.0) -> None:
    """A job as the previous version's push wrote it: seconds as the float's text, no group."""
    import msgpack

    shard = keys_of(job_id)
    r.hset(shard.payloads_hash, job_id, msgpack.packb([payload, score]))
    r.zadd(shard.ids_by_perform_in_zset, {job_id: repr(perform_in)})
    r.zadd(shard.ids_lex_zset, {job_id: 0})
