"""Write the wait and run times this process counted (lowkiq.store.day_stats) about once a second: one
pipelined round trip, none when nothing ran. The keeper flushes once more as it leaves."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...store.day_stats import Tally
from .base import Duty

if TYPE_CHECKING:
    from ...transport import Transport

# Every shard handler of this process adds its batches here (ShardHandler); the keeper's duty writes them.
TALLY = Tally()


class DayStatsFlush(Duty):
    name = "day_stats_flush"
    every = 1.0

    def __init__(self, client: Transport, tally: Tally = TALLY) -> None:
        self.client = client
        self.tally = tally

    def run(self) -> None:
        self.tally.flush(self.client)
