"""The shard leases this process holds, and every change to them.

A lease is acquired (and, on a primary with replicas, confirmed by one: ``WAIT``), renewed, released
with its last batch acknowledged, has its in-flight batch restored, or is found lost: a refusal of any
fenced script, a renewal refused, a release or a check that finds another grant. Each of those happens
here, on the wire of the thread that asks (the keeper's or a server thread's), and each lease event
(``lease_acquired``, ``lease_released``, ``lease_lost``, ``morgued`` at a takeover) is emitted here only:
``lease_lost`` once per lease, however many places find out.

The keeper decides which shards to hold and gives them to threads; threads serve them and hand them
back (``ShardOwner``). Neither imports the other for the leases: both hold this.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from .. import log_format
from ..store import leases, lua
from ..store.leases import Held, Lease, refusal
from ..worker import Shard
from .assignment import ShardId

if TYPE_CHECKING:
    from ..runtime import Runtime

log = logging.getLogger("lowkiq.server")

CRASH_ERROR = ("lowkiq: the server process died while performing this job {limit} times in a row "
               "(its lease expired with the job in processing); moved to the morgue so that it stops "
               "taking servers down")


class ShardOwner(Protocol):
    """Who gives shards to threads (the keeper): what a thread tells it about the shards it hands back."""

    def wants(self, lease: Lease) -> bool: ...

    def returned(self, lease: Lease, released: bool) -> None: ...


def shard_id(lease: Lease) -> ShardId:
    return (lease.shard.worker.queue_name, lease.shard.index)


def _fields(lease: Lease, **more: Any) -> dict[str, Any]:
    return log_format.fields(worker=lease.shard.worker.__name__, shard=lease.shard.index, **more)


class Holdings:
    """The leases of one server process (or of a test, a benchmark: the same path)."""

    def __init__(self, runtime: Runtime, member_id: str) -> None:
        self.runtime = runtime
        self.settings = runtime.settings
        self.events = runtime.events
        self.member_id = member_id
        self.lock = threading.Lock()
        self.leases: dict[ShardId, Lease] = {}  # held, whichever thread serves them
        # Replicas per primary, read by the keeper now and then: grants on a primary that has any wait for one.
        self.replicas: dict[str, int] = {}
        self.crash_error = runtime.settings.dump_error(CRASH_ERROR.format(limit=runtime.settings.crash_limit))

    def held(self) -> dict[ShardId, Lease]:
        with self.lock:
            return dict(self.leases)

    # -- acquiring ----------------------------------------------------------

    def acquire(self, wire: lua.Wire, shards: Sequence[Shard], *, ttl: float | None = None,
                crash_limit: int | None = None) -> list[Lease | Held | None]:
        """Ask for every shard's lease in one round trip. For each: the Lease now held, Held (another
        process's), or None (granted, but no replica confirmed it within ``replica_wait``: released)."""
        s = self.settings
        ttl = s.lease_ttl if ttl is None else ttl
        crash_limit = s.crash_limit if crash_limit is None else crash_limit
        now = self.runtime.clock()
        grants = [leases.new_grant() for _ in shards]
        calls = [leases.acquire_call(shard.worker.keys().shard(shard.index), self.member_id, grant, ttl, crash_limit,
                                     now, self.crash_error) for shard, grant in zip(shards, grants)]
        sent_at = time.monotonic()
        confirmed: dict[str, Any] | None = None
        if any(self.replicas.values()):
            replies, confirmed = wire.call_many_confirmed(calls, int(s.replica_wait * 1000))
        else:
            replies = wire.call_many(calls)
        outcomes: list[Lease | Held | None] = []
        unconfirmed: list[Lease] = []
        for shard, grant, call, reply in zip(shards, grants, calls, replies):
            if isinstance(reply, Exception):
                raise reply
            outcome = leases.acquired(shard, call[1], grant, ttl, sent_at, reply)
            if isinstance(outcome, Lease):
                node = lua.node_name(self.runtime.client, call[1])
                if confirmed is not None and self.replicas.get(node, 0) and not _acknowledged(confirmed.get(node)):
                    # A failover now could bring back the previous grant: serving the shard could overlap its owner.
                    unconfirmed.append(outcome)
                    outcomes.append(None)
                    continue
                self._acquired(outcome, crash_limit)
            else:
                log.debug("shard %s is still held by %s for %d ms", shard, outcome.owner, outcome.ms_left)
            outcomes.append(outcome)
        if unconfirmed:
            log.warning("keeper: no replica confirmed the grants of %d shards within %.1f s (%s); released, to be "
                        "acquired again", len(unconfirmed), s.replica_wait,
                        ", ".join(str(lease.shard) for lease in unconfirmed[:10]))
            self.release(wire, unconfirmed, {}, quiet=True)
        return outcomes

    def _acquired(self, lease: Lease, crash_limit: int) -> None:
        if lease.restored or lease.morgued:
            log.warning("keeper: took over shard %s:%d from a process that stopped renewing it: %d jobs of its "
                        "in-flight batch went back to the queue%s", *shard_id(lease), lease.restored,
                        f", {len(lease.morgued)} crashed it {crash_limit} times and went to the morgue "
                        f"({', '.join(lease.morgued[:10])})" if lease.morgued else "",
                        extra=_fields(lease, restored=lease.restored, ids=list(lease.morgued), epoch=lease.epoch))
        else:
            log.debug("keeper: acquired shard %s:%d (epoch %d)", *shard_id(lease), lease.epoch,
                      extra=_fields(lease, epoch=lease.epoch))
        with self.lock:
            self.leases[shard_id(lease)] = lease
        worker = lease.shard.worker.__name__
        self.events.emit("lease_acquired", worker=worker, shard=lease.shard.index, epoch=lease.epoch,
                         restored=lease.restored, morgued=list(lease.morgued))
        if lease.morgued:  # jobs that crashed their servers crash_limit times: they entered the morgue here
            self.events.emit("morgued", worker=worker, shard=lease.shard.index, ids=list(lease.morgued))

    # -- renewing, releasing, restoring ----------------------------------------

    def renew(self, wire: lua.Wire, due: Sequence[Lease]) -> list[Lease]:
        """Renew ``due`` in one round trip; returns those found lost (already marked and reported)."""
        sent_at = time.monotonic()
        replies = wire.call_many([leases.renew_call(lease) for lease in due], settle=True)
        lost = []
        for lease, reply in zip(due, replies):
            if not isinstance(reply, Exception):
                lease.renewed(sent_at)
                continue
            refused = refusal(reply)
            if refused is None:
                raise reply
            if lease.lost is None:  # else released meanwhile by its thread: nothing was lost
                self.lost(lease, refused.reason, "keeper", "another process may hold it now")
                lost.append(lease)
        return lost

    def release(self, wire: lua.Wire, held: Sequence[Lease], acked: Mapping[int, Sequence[str]],
                *, quiet: bool = False) -> int:
        """Release every lease in one round trip; returns how many jobs went back to the queue.

        ``acked`` maps ``id(lease)`` to the ids of its last batch, acknowledged in the same step. A refusal
        only means the lease was lost already: its last batch runs again elsewhere. ``quiet``: grants never
        used (unconfirmed), whose release is no event.
        """
        known_lost = {id(lease) for lease in held if lease.lost}
        for lease in held:
            lease.lost = lease.lost or "released"
        replies = wire.call_many([leases.release_call(lease, acked.get(id(lease), ())) for lease in held], settle=True)
        restored = 0
        for lease, reply in zip(held, replies):
            self._forget(lease)
            if isinstance(reply, Exception):
                refused = refusal(reply)
                if refused is None:
                    raise reply
                log.warning("shard %s: the lease was already lost (%s) when releasing it; its last batch runs "
                            "again on the new owner", lease.shard, refused.reason, extra=_fields(lease))
                if id(lease) not in known_lost:  # found out only now: it still counts as a lease lost
                    self._emit_lost(lease, refused.reason)
            else:
                restored += int(reply)
                if not quiet:
                    self.events.emit("lease_released", worker=lease.shard.worker.__name__, shard=lease.shard.index)
        return restored

    def restore(self, wire: lua.Wire, held: Sequence[Lease], by: str = "thread") -> tuple[int, list[Lease]]:
        """Put each lease's own in-flight batch back into its queue, in one round trip: how many ids went
        back, and the leases found lost on the way (marked and reported)."""
        replies = wire.call_many([("restore", lease.keys, (lease.grant,)) for lease in held], settle=True)
        restored = 0
        lost = []
        for lease, reply in zip(held, replies):
            if isinstance(reply, Exception):
                refused = refusal(reply)
                if refused is None:
                    raise reply
                self.lost(lease, refused.reason, by, "another process serves it now")
                lost.append(lease)
            else:
                restored += int(reply)
        return restored, lost

    # -- losing -----------------------------------------------------------------

    def lost(self, lease: Lease, reason: str, by: str, consequence: str) -> bool:
        """Redis no longer holds ``lease`` for this process: another process may hold the shard now. Marked,
        logged and reported once; returns whether this was the first to find out."""
        self._forget(lease)
        if lease.lost is not None:
            return False
        lease.lost = reason
        log.warning("%s: lost the lease of shard %s (%s); %s", by, lease.shard, reason, consequence,
                    extra=_fields(lease, reason=reason))
        self._emit_lost(lease, reason)
        return True

    def _emit_lost(self, lease: Lease, reason: str) -> None:
        self.events.emit("lease_lost", worker=lease.shard.worker.__name__, shard=lease.shard.index, reason=reason)

    def returned(self, lease: Lease) -> None:
        """A lease released or lost: no longer this process's."""
        self._forget(lease)

    def _forget(self, lease: Lease) -> None:
        with self.lock:
            if self.leases.get(shard_id(lease)) is lease:
                del self.leases[shard_id(lease)]


def _acknowledged(reply: Any) -> bool:
    """A WAIT reply that says at least one replica holds the writes before it."""
    return isinstance(reply, int) and reply >= 1
