"""Group limits on the server side (docs/fairness.md, "Group limits"): which groups a take passes over, the
permits a shard's batch holds, and moving them along with the shard's lease.

One batch of a worker with limits: the take (shard slot) passes over the groups known to be at their limit
and names each taken id's group; one pipelined round trip of ``permit_take`` (one per group, in the group's
slot) admits ids in order; ids refused go back to their place with ``untake`` (fenced, shard slot) and their
group is passed over until a permit may free. The permits are released with the batch's ack (same round trip)
or after its fail; a holder that dies stops extending them, so they end with its lease.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import redis

from ..store import lua, permits
from ..store.keys import GroupKeys
from ..store.leases import UNTAKE_GROUP, Lease, fenced, ttl_ms, untake_call
from ..store.queue import Taken

log = logging.getLogger("lowkiq.server")

# A group at its concurrency limit may free at any moment (a holder's release): its ids are tried again this
# soon, or when the earliest permit ends, whichever comes first.
RECHECK = 0.1
# At most this many groups ride with a take as "at their limit"; others are refused by their permit instead.
MAX_BLOCKED = 64


class Blocked:
    """Groups of one worker at their limit, until when (monotonic): shared by the threads of a process."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}
        self._lock = threading.Lock()

    def block(self, group: str, until: float) -> None:
        with self._lock:
            self._until[group] = max(until, self._until.get(group, 0.0))

    def groups(self, now: float) -> tuple[list[str], float | None]:
        """The groups blocked now (the soonest to free first, at most MAX_BLOCKED), and when the first frees."""
        with self._lock:
            for group in [g for g, until in self._until.items() if until <= now]:
                del self._until[group]
            ordered = sorted(self._until.items(), key=lambda item: item[1])[:MAX_BLOCKED]
        return [group for group, _ in ordered], (ordered[0][1] if ordered else None)


_blocked: dict[str, Blocked] = {}
_blocked_lock = threading.Lock()
# id(lease) -> (lease, {job id: (group keys, member)}): the permits held under each lease, read by the keeper.
_held: dict[int, tuple[Lease, dict[str, tuple[GroupKeys, str]]]] = {}
_held_lock = threading.Lock()


def blocked_for(queue_name: str) -> Blocked:
    with _blocked_lock:
        return _blocked.setdefault(queue_name, Blocked())


class GroupLimits:
    """The limits of one shard handler's worker, and the permits its batches hold."""

    def __init__(self, limits: permits.Limits, lease: Lease, run: Callable[[Sequence[lua.Call]], list[Any]],
                 clock: Callable[[], float] = time.time) -> None:
        self.limits = limits
        self.lease = lease
        self.run = run
        self.clock = clock
        self.blocked = blocked_for(lease.keys.queue_name)
        self._wake_at: float | None = None

    @classmethod
    def of(cls, worker: Any, lease: Lease, run: Callable[[Sequence[lua.Call]], list[Any]],
           clock: Callable[[], float] = time.time) -> GroupLimits | None:
        limits = permits.Limits.of(worker)
        return None if limits is None else cls(limits, lease, run, clock)

    def passed_over(self) -> list[str]:
        """The groups the next take passes over."""
        groups, self._wake_at = self.blocked.groups(time.monotonic())
        return groups

    def admit(self, taken: Taken) -> Taken:
        """Ask permits for the taken ids that carry a group (one round trip); give back the refused ones."""
        if taken.jobs and taken.groups:
            self._admit(taken, taken.groups)
        if self._wake_at is not None:
            # A shard whose due work is all in groups at their limit is due again when the first may go.
            again = self.clock() + max(0.0, self._wake_at - time.monotonic())
            head = taken.next_perform_in
            taken.next_perform_in = again if head is None else min(head, again)
        return taken

    def _admit(self, taken: Taken, groups: Sequence[str]) -> None:
        lease = self.lease
        by_group: dict[str, list[str]] = defaultdict(list)
        for job, group in zip(taken.jobs, groups):
            if group:
                by_group[group].append(job.id)
        if not by_group:
            return
        queue_name = lease.keys.queue_name
        names = list(by_group)
        ttl = ttl_ms(lease.ttl)
        calls = [permits.take_call(GroupKeys(queue_name, g), self.limits, ttl,
                                   [permits.member(lease.keys, lease.grant, i) for i in by_group[g]]) for g in names]
        replies = self.run(calls)
        refused: set[str] = set()
        held: dict[str, tuple[GroupKeys, str]] = {}
        now = time.monotonic()
        soonest: float | None = None
        for group, reply in zip(names, replies):
            answer = permits.granted(reply)
            ids = by_group[group]
            for job_id in ids[: answer.count]:
                held[job_id] = (GroupKeys(queue_name, group), permits.member(lease.keys, lease.grant, job_id))
            if answer.count < len(ids):
                refused.update(ids[answer.count:])
                wait = answer.wait
                if self.limits.concurrency and (wait <= 0 or wait > RECHECK):
                    wait = RECHECK
                self.blocked.block(group, now + wait)
                soonest = now + wait if soonest is None else min(soonest, now + wait)
        if held:
            with _held_lock:
                entry = _held.get(id(lease))
                if entry is None or entry[0] is not lease:
                    entry = _held[id(lease)] = (lease, {})
                entry[1].update(held)
        if refused:
            with fenced():
                self.run([untake_call(lease, sorted(refused), UNTAKE_GROUP)])
            kept = [(job, g) for job, g in zip(taken.jobs, groups) if job.id not in refused]
            taken.jobs = [job for job, _ in kept]
            taken.groups = [g for _, g in kept]
            taken.suspect = taken.suspect and bool(taken.jobs)
            if soonest is not None:
                self._wake_at = soonest if self._wake_at is None else min(self._wake_at, soonest)

    def release_calls(self, ids: Iterable[str]) -> list[lua.Call]:
        """The calls that end the permits of ``ids`` (finished): sent with the ack that follows them."""
        return release_calls(self.lease, ids)

    def release(self, ids: Iterable[str]) -> None:
        """End the permits of ``ids`` now (a failed batch). A lost reply only leaves them to end with the lease."""
        calls = self.release_calls(ids)
        if not calls:
            return
        try:
            self.run(calls)
        except (redis.RedisError, OSError) as exc:
            log.warning("could not release the group permits of %d ids (%s); they end with the lease", len(calls), exc)


def release_calls(lease: Lease, ids: Iterable[str]) -> list[lua.Call]:
    with _held_lock:
        entry = _held.get(id(lease))
        if entry is None or entry[0] is not lease:
            return []
        held = entry[1]
        by_group: dict[GroupKeys, list[str]] = defaultdict(list)
        for job_id in ids:
            permit = held.pop(job_id, None)
            if permit is not None:
                by_group[permit[0]].append(permit[1])
        if not held:
            del _held[id(lease)]
    return [permits.release_call(group, members) for group, members in by_group.items()]


def extend(wire: lua.Wire, leases: Iterable[Lease]) -> None:
    """Move the permits held under ``leases`` along, before those leases are renewed: a permit then never ends
    before the lease it stands for. A permit that ended already is not revived (permit_extend.lua)."""
    calls: list[lua.Call] = []
    with _held_lock:
        for lease in leases:
            entry = _held.get(id(lease))
            if entry is None or entry[0] is not lease:
                continue
            by_group: dict[GroupKeys, list[str]] = defaultdict(list)
            for group, member in entry[1].values():
                by_group[group].append(member)
            calls.extend(permits.extend_call(g, ttl_ms(lease.ttl), members) for g, members in by_group.items())
    if calls:
        wire.call_many(calls, settle=True)


def forget(lease: Lease) -> None:
    """The lease is gone (released or lost): what it held ends with it in Redis; forget it here."""
    with _held_lock:
        _held.pop(id(lease), None)
