"""Each held shard's id history loses its entries older than its worker's ``history_max_age``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...store import id_history, lua
from .base import Duty

if TYPE_CHECKING:
    from ...redis_clock import RedisClock
    from ...worker import Worker
    from ..holdings import Holdings


class IdHistoryTrim(Duty):
    name = "id_history_trim"
    every = float(id_history.TRIM_EVERY)

    def __init__(self, wire: lua.Wire, holdings: Holdings, workers: Mapping[str, type[Worker]],
                 clock: RedisClock) -> None:
        self.wire = wire
        self.holdings = holdings
        self.workers = workers
        self.clock = clock

    def run(self) -> None:
        now = self.clock.now()
        calls = [id_history.trim_call(lease.keys, worker.history_max_age, now)
                 for lease in self.holdings.held().values()
                 if lease.lost is None and (worker := self.workers.get(lease.keys.queue_name)) is not None
                 and worker.history_length > 0]
        if calls:
            # settled: a trim that meets an outage is only late, the next one does it
            self.wire.call_many(calls, settle=True)
