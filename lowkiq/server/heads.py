"""The probe of held shards' heads: each shard's earliest perform_in, in one pipelined round trip of plain reads.

A scheduler probes every held shard at most every poll interval, and once before a thread (or an async slot)
idles: with hundreds of shards and slots that is the server's most frequent call. Its commands are the same
every time, so they are packed once per set of shards (``HeadsProbe``) and go out as one prepared buffer per
node, their replies read raw: no per-command work in Python beyond reading a score.

A shard that holds grouped jobs answers its next group's place in the round robin instead (docs/fairness.md).
While a shard still holds seconds scores written by an older producer (docs/redis.md, "Upgrading"), they sort
before every microseconds score though they may be due later: for such a shard alone a second round trip reads
its earliest microseconds score.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..store import codec
from ..transport import Batch
from ..transport.errors import first_error
from ..transport.resp import pack
from ..transport.slots import routing_slot
from ..transport.transport import as_transport

if TYPE_CHECKING:
    import redis

    from ..store.leases import Lease
    from ..transport import Transport

# A seconds score at or above this may be later than the earliest microseconds one (US_AT µs, in seconds).
_LATER_THAN_MICROS = codec.US_AT / 1_000_000


class HeadsProbe:
    """The probe of one fixed list of shards (a pool's, a pinned thread's), its commands packed once."""

    __slots__ = ("batch", "leases", "queues")

    def __init__(self, leases: Sequence[Lease]) -> None:
        self.leases = list(leases)
        packed: list[bytes] = []
        slots: list[int] = []
        self.queues = [lease.keys.ids_by_perform_in_zset for lease in leases]
        for lease, queue in zip(leases, self.queues):
            slot = routing_slot(queue)  # a shard's keys share one slot
            packed += [pack(("ZRANGE", queue, 0, 0, "WITHSCORES")),
                       pack(("ZRANGE", lease.keys.groups_zset, 0, 0, "WITHSCORES"))]
            slots += [slot, slot]
        self.batch = Batch(packed, slots)

    def read(self, client: Transport | redis.Redis) -> list[float | None]:
        """Each shard's earliest perform_in (None: empty)."""
        if not self.queues:
            return []
        transport = as_transport(client)
        replies = first_error(transport.execute(self.batch)[0])
        out: list[float | None] = []
        mixed: list[int] = []
        for n in range(len(self.queues)):
            head, groups = replies[2 * n], replies[2 * n + 1]
            if not head:
                out.append(None)
            elif groups:
                out.append(codec.first_score(groups))  # group scores are seconds
            else:
                score = codec.first_score(head)
                if _LATER_THAN_MICROS <= score < codec.US_AT:
                    mixed.append(n)
                out.append(codec.seconds(score))
        if mixed:
            self._earliest_micros(transport, mixed, out)
        return out

    def _earliest_micros(self, client: Transport, shards: list[int], out: list[float | None]) -> None:
        queues = [self.queues[n] for n in shards]
        replies = client.pipeline_commands([(queue, ("ZRANGEBYSCORE", queue, f"{codec.US_AT:.0f}", "+inf",
                                                     "WITHSCORES", "LIMIT", 0, 1)) for queue in queues])
        for n, micro in zip(shards, replies):
            if micro:
                earlier: Any = out[n]
                out[n] = min(earlier, codec.seconds(codec.first_score(micro)))


def heads(client: Transport | redis.Redis, leases: Sequence[Lease]) -> list[float | None]:
    """One probe of ``leases``' shards (a probe kept for repeated use packs its commands once)."""
    return HeadsProbe(leases).read(client)
