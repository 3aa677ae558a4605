"""Shard leases: which server process may change a shard's processing area, and until when.

A lease lives in the shard's own hash slot (``ShardKeys.lease_hash``), so the
scripts that move jobs in and out of processing check it atomically: a caller
whose grant is not the current one, or whose lease expired, is refused with
``FENCED`` or ``LEASE_EXPIRED`` and changes nothing. Leases expire in Redis
server time; a process only ever compares durations on its own monotonic
clock, so no two clocks have to agree.

Each grant carries a fencing token, ``(cfg_epoch, fence)``, that exceeds every
token given before for the shard, for the shards of the queue's earlier layouts,
and (Redis's clock not stepping back) for any shard of a Redis that has since
lost its keys: see acquire.lua and docs/server.md, "Fencing your own writes".
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

# Raised here; defined with every error users may catch, and importable from here too.
from ..errors import LeaseRefused as LeaseRefused
from ..spec import Shard
from .keys import ShardKeys

REFUSALS = ("FENCED", "LEASE_EXPIRED")
# A lease is treated as lost this long before it expires in Redis: the reply of the
# renewal may have taken that long to come back.
MARGIN = 0.5


def refusal(exc: BaseException) -> LeaseRefused | None:
    """The LeaseRefused an error reply means, or None for any other error."""
    if isinstance(exc, LeaseRefused):
        return exc
    if not isinstance(exc, redis.ResponseError):
        return None
    text = str(exc)
    reason, _, rest = text.partition(" ")
    if reason not in REFUSALS:
        return None
    return LeaseRefused(reason, rest.split(" ", 1)[0], text)


class _Fenced:
    """Around a fenced script: Redis's refusal of the caller's lease raised as LeaseRefused (nothing of the
    script happened), any other error as Redis answered it. A class, not a generator: it wraps the hot path."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if isinstance(exc, redis.ResponseError):
            raise (refusal(exc) or exc) from None


_FENCED = _Fenced()


def fenced() -> _Fenced:
    return _FENCED


def new_grant() -> str:
    return uuid.uuid4().hex


# Asks Redis whether a lease is still its holder's: None when it is (and the lease's deadline moved to
# what Redis says is left), else the reason it is not (FENCED, LEASE_EXPIRED). Raises a Redis error.
LeaseCheck = Callable[["Lease"], "str | None"]


@dataclass(eq=False, slots=True)
class Lease:
    """A shard's lease as its holder knows it.

    ``renewed_at`` is the monotonic time at which the last renewal that Redis
    accepted was *sent*: counting from the send makes the local deadline err
    on the early side, whatever the reply's delay.
    """

    shard: Shard
    keys: ShardKeys
    grant: str
    epoch: int
    cfg_epoch: int
    ttl: float
    renewed_at: float
    lost: str | None = None
    restored: int = 0
    morgued: list[str] = field(default_factory=list)
    # The second part of the fencing token (see acquire.lua); ``epoch`` counts the shard's grants.
    fence: int = 0
    # How ``is_lost`` asks Redis once the local deadline has passed: set by whoever holds a connection.
    check: LeaseCheck | None = field(default=None, repr=False)
    # The id a take-ahead run performs now and the monotonic time it started: told to Redis by the next renewal.
    performing: tuple[str, float] | None = field(default=None, repr=False)

    @property
    def fencing_token(self) -> tuple[int, int]:
        """(Redis Cluster's epoch, fence): higher than every token given before for any shard the id was in."""
        return (self.cfg_epoch, self.fence)

    @property
    def deadline(self) -> float:
        """Monotonic time after which this process must assume another one holds the shard."""
        return self.renewed_at + self.ttl - MARGIN

    def remaining(self) -> float:
        return self.deadline - time.monotonic()

    def renewed(self, sent_at: float) -> None:
        if sent_at > self.renewed_at:
            self.renewed_at = sent_at

    def is_lost(self) -> bool:
        """Whether another process may hold the shard now.

        Free while the local deadline is ahead: the lease is surely ours then. Past it
        (renewals stopped: a pause, a partition, a starved keeper) Redis is asked: a
        grant that is no longer ours, or that expired, is lost for good; one still ours
        moves the deadline on. When Redis cannot be asked, the answer is True: past
        the deadline, another process may hold the shard.
        """
        if self.lost is not None:
            return True
        if self.remaining() > 0 or self.check is None:
            return False
        try:
            return self.check(self) is not None
        except (redis.RedisError, OSError):
            return True


@dataclass(frozen=True, slots=True)
class Held:
    """The lease is someone else's for ``ms_left`` more milliseconds."""

    owner: str
    ms_left: int


def ttl_ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def acquire_call(keys: ShardKeys, member: str, grant: str, ttl: float, crash_limit: int, now: float,
                 crash_error: bytes | str) -> tuple[str, ShardKeys, tuple[Any, ...]]:
    return ("acquire", keys, (member, grant, ttl_ms(ttl), crash_limit, now, crash_error))


def acquired(shard: Shard, keys: ShardKeys, grant: str, ttl: float, sent_at: float, reply: Sequence[Any]) -> Lease | Held:
    """The outcome of an ``acquire`` script (see acquire.lua for the reply)."""
    if int(reply[0]) == 0:
        owner = reply[1].decode() if isinstance(reply[1], bytes) else str(reply[1])
        return Held(owner, int(reply[2]))
    morgued = [i.decode() if isinstance(i, bytes) else str(i) for i in reply[4]]
    return Lease(shard, keys, grant, int(reply[1]), int(reply[2]), ttl, sent_at, restored=int(reply[3]), morgued=morgued,
                 fence=int(reply[5]))


def verify(client: Any, lease: Lease) -> str | None:
    """Ask Redis whether ``lease`` is still its holder's: one round trip of two plain reads in the shard's slot.

    None when it is, and the lease's local deadline then counts from what Redis says is
    left; else FENCED (another grant, or a release, came since) or LEASE_EXPIRED (nobody
    renewed it in time: the renewal and every fenced write would be refused). ``client``
    is a Transport: both reads go to the node that serves the shard, so the expiry is
    compared with that node's own clock, as the scripts do.
    """
    key = lease.keys.lease_hash
    sent_at = time.monotonic()
    (grant, state, expires), (seconds, micros) = client.pipeline_commands([
        (key, ("HMGET", key, "grant", "state", "expires_ms")),
        (key, ("TIME",)),
    ])
    if grant is None or grant.decode() != lease.grant or state != b"held" or expires is None:
        return "FENCED"
    left_ms = int(expires) - (int(seconds) * 1000 + int(micros) // 1000)
    if left_ms < 0:
        return "LEASE_EXPIRED"
    # Redis says left_ms remain, read after sent_at: as conservative as a renewal sent then.
    lease.renewed(sent_at + left_ms / 1000 - lease.ttl)
    return None


def renew_call(lease: Lease) -> tuple[str, ShardKeys, tuple[Any, ...]]:
    performing = lease.performing
    if performing is None:
        return ("renew", lease.keys, (lease.grant, ttl_ms(lease.ttl)))
    job_id, started = performing
    since_ms = max(0, int((time.monotonic() - started) * 1000))
    return ("renew", lease.keys, (lease.grant, ttl_ms(lease.ttl), job_id, since_ms))


# Why ids taken into processing go back untaken (untake.lua), told in each id's history.
UNTAKE_GROUP = "group"  # its group had no permit to start (docs/fairness.md)
UNTAKE_AHEAD = "ahead"  # taken ahead, its server stopped or handed the shard over first (docs/take-ahead.md)


def untake_call(lease: Lease, ids: Sequence[str], why: str) -> tuple[str, ShardKeys, tuple[Any, ...]]:
    return ("untake", lease.keys, (lease.grant, why, *ids))


def release_call(lease: Lease, acked: Sequence[str] = ()) -> tuple[str, ShardKeys, tuple[Any, ...]]:
    return ("release", lease.keys, (lease.grant, *acked))
