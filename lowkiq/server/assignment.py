"""Which live server process should hold which shard: computed by every process alike.

There is no leader and no rebalancing protocol. Every member sees the same
member list (the heartbeat script returns it) and computes the same answer
from it: bounded-load rendezvous hashing. Each member gets an exact quota of
the shards, proportional to its threads (so counts are within one of the
fair share); shards, taken in a fixed pseudo-random order, go to the member
that ranks highest for them among those still under quota. Rendezvous ranks
do not depend on who else is there, so a join or a leave moves about 1/N of
the shards, not all of them.

Safety never depends on this: two members with different views may both
want a shard, and the lease lets only one of them hold it. A stale view only
costs time.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

ShardId = tuple[str, int]  # (queue name, shard index)


@dataclass(frozen=True)
class MemberView:
    """What the assignment needs to know of one member, as its heartbeat published it."""

    id: str
    threads: int
    # (queue name, shards_count) of every worker it runs, in its configured order
    queues: tuple[tuple[str, int], ...]
    draining: bool = False
    # Lowkiq's --nodes/--node-number: a preference, never exclusivity
    hint: tuple[int, int] | None = None
    # A name that outlives the process (a pod name): a restarted process tends to get its shards back
    stable_name: str = ""
    weight: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "weight", 0.0 if self.draining else float(max(self.threads, 1)))

    @property
    def rank_name(self) -> str:
        return self.stable_name or self.id

    def shards(self) -> list[ShardId]:
        return [(queue, i) for queue, count in self.queues for i in range(count)]

    def hinted(self) -> set[ShardId]:
        """Its part of Lowkiq's by-node split: its shards dealt round-robin to ``nodes`` nodes."""
        if self.hint is None:
            return set()
        nodes, number = self.hint
        return set(self.shards()[number::nodes])


def _unit(*parts: object) -> float:
    """A uniform number in (0, 1) from its parts, the same in every process."""
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") + 1) / (2**64 + 1)


def _rank(member: MemberView, shard: ShardId) -> float:
    # Weighted rendezvous score: the highest wins; more threads, proportionally more shards.
    return -member.weight / math.log(_unit(member.rank_name, *shard))


def _quotas(members: Sequence[MemberView], total: int) -> dict[str, int]:
    weight = sum(m.weight for m in members)
    exact = {m.id: total * m.weight / weight for m in members}
    quotas = {m.id: math.floor(exact[m.id]) for m in members}
    left = total - sum(quotas.values())
    by_fraction = sorted(members, key=lambda m: (-(exact[m.id] - quotas[m.id]), _unit("quota", m.rank_name), m.id))
    for m in by_fraction[:left]:
        quotas[m.id] += 1
    return quotas


def assign(members: Iterable[MemberView]) -> dict[ShardId, str]:
    """Shard -> id of the member that should hold it, for every shard some live member runs.

    Draining members get nothing. A shard only a draining member runs stays unassigned.
    """
    everyone = sorted(members, key=lambda m: m.id)
    active = [m for m in everyone if m.weight > 0]
    if not active:
        return {}
    eligible: dict[ShardId, list[MemberView]] = {}
    for m in active:
        for shard in m.shards():
            eligible.setdefault(shard, []).append(m)
    quotas = _quotas(active, len(eligible))
    counts = {m.id: 0 for m in active}
    hinted = {m.id: m.hinted() for m in active}
    order = sorted(eligible, key=lambda s: (_unit("order", *s), s))
    out: dict[ShardId, str] = {}

    def give(shard: ShardId, candidates: Sequence[MemberView]) -> bool:
        open_ = [m for m in candidates if counts[m.id] < quotas[m.id]]
        if not open_:
            return False
        best = max(open_, key=lambda m: (_rank(m, shard), m.id))
        out[shard] = best.id
        counts[best.id] += 1
        return True

    # Hints first: a member started with --node-number gets its Lowkiq part, whatever its quota
    # (members sharing a number share its part); the others share what no hint claims.
    for shard in order:
        claimers = [m for m in eligible[shard] if shard in hinted[m.id]]
        if claimers:
            best = min(claimers, key=lambda m: (counts[m.id], -_rank(m, shard), m.id))
            out[shard] = best.id
            counts[best.id] += 1
    for shard in order:
        if shard in out:
            continue
        if not give(shard, eligible[shard]):
            # Members disagree on the shards they run: quotas cannot all hold; never leave one unserved.
            best = max(eligible[shard], key=lambda m: (_rank(m, shard), m.id))
            out[shard] = best.id
            counts[best.id] += 1
    return out


def split_among_threads(shards: Iterable[ShardId], current: Mapping[ShardId, int], threads: int) -> dict[ShardId, int]:
    """This member's shards -> thread number: a shard stays on its thread; new ones go to the least loaded."""
    wanted = sorted(set(shards))
    load = [0] * threads
    out: dict[ShardId, int] = {}
    for shard in wanted:
        thread = current.get(shard)
        if thread is not None and 0 <= thread < threads:
            out[shard] = thread
            load[thread] += 1
    # Keep threads within one shard of each other: move the excess of the most loaded first.
    ceiling = -(-len(wanted) // threads) if threads else 0
    for shard in wanted:
        thread = out.get(shard)
        if thread is not None and load[thread] > ceiling:
            del out[shard]
            load[thread] -= 1
    for shard in wanted:
        if shard not in out:
            thread = min(range(threads), key=lambda t: (load[t], t))
            out[shard] = thread
            load[thread] += 1
    return out
