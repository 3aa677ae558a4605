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

# A migrated shard is looked at again this often: a producer of an older version may still write seconds.
RECHECK = 60.0


class ScoreMigration(Duty):
    """One bounded chunk per held shard and run (``score_units``); shards already migrated rest a while."""

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
        now = self.clock()
        due = [(shard, lease) for shard, lease in self.holdings.held().items()
               if lease.lost is None and self.rest_until.get(shard, 0.0) <= now]
        if not due:
            return
        replies = self.wire.call_many([score_units.migrate_call(lease.keys) for _, lease in due], settle=True)
        for (shard, _), reply in zip(due, replies):
            if isinstance(reply, Exception):
                continue  # tried again on the next run
            if score_units.step_of(reply).done:
                self.rest_until[shard] = now + RECHECK
