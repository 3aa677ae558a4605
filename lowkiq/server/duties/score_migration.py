"""Each held shard's time scores become integer microseconds, once every live server reads them."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ...store import lua, score_units
from .base import Duty

if TYPE_CHECKING:
    from ...store.membership import Member
    from ..assignment import ShardId
    from ..holdings import Holdings

# A migrated shard is looked at again this often: a producer of an older version may still write seconds
# (read right meanwhile; in a shard that holds groups, one in the default group may hold that group's due
# jobs back until then: docs/redis.md, "Upgrading").
RECHECK = 10.0
# A run goes on with the shards not done yet, one bounded chunk each per round trip, for about this long:
# the keeper's own beat comes first.
BUDGET = 0.05


class ScoreMigration(Duty):
    """Bounded chunks per held shard and run (``score_units``); shards already migrated rest a while."""

    name = "score_migration"
    every = 2.0

    def __init__(self, wire: lua.Wire, holdings: Holdings, members: Callable[[], Sequence[Member]],
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.wire = wire
        self.holdings = holdings
        self.members = members
        self.clock = clock
        self.rest_until: dict[ShardId, float] = {}

    def run(self) -> None:
        # An older server reads seconds only: nothing may be written in microseconds while one is alive.
        if not score_units.cluster_reads_us(self.members()):
            return
        started = self.clock()
        due = [(shard, lease) for shard, lease in self.holdings.held().items()
               if lease.lost is None and self.rest_until.get(shard, 0.0) <= started]
        while due:
            replies = self.wire.call_many([score_units.migrate_call(lease.keys) for _, lease in due], settle=True)
            left = []
            for (shard, lease), reply in zip(due, replies):
                if isinstance(reply, Exception):
                    continue  # tried again on the next run
                if score_units.step_of(reply).done:
                    self.rest_until[shard] = self.clock() + RECHECK
                else:
                    left.append((shard, lease))
            due = left if self.clock() - started < BUDGET else []
