"""Enqueue the schedules' due ticks (see ``lowkiq.server.ticker``), on every beat and between beats."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ...store import schedules
from .base import Duty

if TYPE_CHECKING:
    from ...config import Settings
    from ...redis_clock import RedisClock
    from ...transport import Transport
    from ..ticker import Ticker


class ScheduleTicks(Duty):
    name = "schedule_ticks"
    every = 0.0

    def __init__(self, settings: Settings, client: Transport, ticker: Ticker, clock: RedisClock,
                 draining: Callable[[], bool]) -> None:
        self.settings = settings
        self.client = client
        self.ticker = ticker
        self.clock = clock
        self.draining = draining
        self.registered = False

    def run(self) -> None:
        if self.draining():
            return  # a leaving server enqueues nothing: the others go on ticking
        if not self.registered:
            schedules.register(self.client, self.settings.schedules)  # for a console without the app
            self.registered = True
        self.ticker.check(self.clock.now())
