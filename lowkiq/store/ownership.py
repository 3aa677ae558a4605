"""Who serves what, as Redis knows it: live server processes and the lease of every shard.

Read by the console and the CLI; nothing here writes. The membership
records say which shards each live process held at its last heartbeat (a
second old at most), which is enough for an overview; a worker's page reads
its shards' leases themselves.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .keys import QueueKeys
from .membership import Member


@dataclass(frozen=True)
class ShardLease:
    """One shard's lease. ``owner`` is a member id; ``server`` that member while it is alive."""

    shard: int
    state: str  # "held", "released", or "never" (no server ever took it)
    owner: str | None
    epoch: int
    expires_ms: int
    thread: str | None
    taken_ms: int | None
    server: Member | None
    # the id a take-ahead run performs now, as its server's last renewal told (docs/take-ahead.md); taken_ms
    # is then when that perform started
    performing: str | None = None

    @property
    def served(self) -> bool:
        return self.state == "held" and self.server is not None


def shard_leases(client: Any, keys: QueueKeys, members: Iterable[Member]) -> tuple[int, list[ShardLease]]:
    """(Redis time in ms, the lease of every shard of the queue), one round trip."""
    by_id = {m.id: m for m in members}
    pipe = client.pipeline(transaction=False)
    pipe.time()
    for shard in keys.shards():
        pipe.hmget(shard.lease_hash, "state", "owner", "epoch", "expires_ms", "thread", "taken_ms", "performing")
    (seconds, micros), *rows = pipe.execute()
    now_ms = int(seconds) * 1000 + int(micros) // 1000
    out = []
    for index, (state, owner, epoch, expires, thread, taken, performing) in enumerate(rows):
        owner_id = owner.decode() if owner else None
        alive = state == b"held" and expires is not None and int(expires) >= now_ms
        out.append(ShardLease(
            shard=index,
            state=state.decode() if state else "never",
            owner=owner_id,
            epoch=int(epoch or 0),
            expires_ms=int(expires or 0),
            thread=thread.decode() if thread else None,
            taken_ms=int(taken) if taken else None,
            server=by_id.get(owner_id) if alive and owner_id else None,
            performing=performing.decode() if performing else None,
        ))
    return now_ms, out


@dataclass(frozen=True)
class Coverage:
    """How many of a queue's shards a live process held at its last heartbeat."""

    queue_name: str
    shards_count: int
    served: int

    @property
    def unserved(self) -> int:
        return self.shards_count - self.served


def coverage(members: Iterable[Member], queues: Mapping[str, int]) -> dict[str, Coverage]:
    """queue name -> Coverage, from the live members' heartbeat records."""
    held: dict[str, set[int]] = {q: set() for q in queues}
    for m in members:
        for queue, indexes in m.shards.items():
            if queue in held:
                held[queue].update(i for i in indexes if 0 <= i < queues[queue])
    return {q: Coverage(q, count, len(held[q])) for q, count in queues.items()}
