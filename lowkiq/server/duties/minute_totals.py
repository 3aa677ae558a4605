"""This minute's totals of the queues served here (the console's per-minute chart), unless some process
sampled them already: each minute is claimed once, by whoever asks first."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from ...store import minute_totals as stored
from ...store.metrics import MetricsReader
from .base import Duty

if TYPE_CHECKING:
    from ...transport import Transport
    from ...worker import Worker


class MinuteTotals(Duty):
    name = "minute_totals"
    every = 20.0

    def __init__(self, client: Transport, workers: Mapping[str, type[Worker]], clock: Callable[[], float]) -> None:
        self.client = client
        self.workers = workers
        self.clock = clock
        self.metrics = MetricsReader(client)

    def run(self) -> None:
        minute, claimed = stored.claim(self.client, list(self.workers))
        if claimed:
            measured, _ = self.metrics.read([self.workers[q].keys() for q in claimed], self.clock())
            stored.write(self.client, measured, minute)
