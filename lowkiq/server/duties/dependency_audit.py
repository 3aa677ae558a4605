"""Releases the waiting versions of the held shards whose dependency's watch is gone (docs/dependencies.md,
failure table): a watch lost with a failed-over primary's last writes would otherwise hold its version forever.
A bounded step per held shard, a round over every waiting id every few steps."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...store import dependencies
from .base import Duty

if TYPE_CHECKING:
    from ...redis_clock import RedisClock
    from ...store.keys import ShardKeys
    from ...transport import Transport
    from ...worker import Worker
    from ..holdings import Holdings

log = logging.getLogger("lowkiq.server")


class DependencyAudit(Duty):
    name = "dependency_audit"
    every = 10.0

    def __init__(self, client: Transport, holdings: Holdings, workers: Mapping[str, type[Worker]],
                 clock: RedisClock) -> None:
        self.client = client
        self.holdings = holdings
        self.by_name = {worker.__name__: worker for worker in workers.values()}
        self.clock = clock
        self.cursors: dict[ShardKeys, int] = {}

    def run(self) -> None:
        now = self.clock.now()
        held = [lease.keys for lease in self.holdings.held().values() if lease.lost is None]
        self.cursors = {keys: self.cursors.get(keys, 0) for keys in held}
        found: list[dependencies.Release] = []
        for keys in held:
            releases, self.cursors[keys] = dependencies.orphaned(self.client, keys, self.by_name, now,
                                                                 self.cursors[keys])
            found += releases
        if found:
            log.warning("dependency audit: %d waiting versions had no watch left in their dependency's shard "
                        "(settled, or lost in a failover); released", len(found))
            dependencies.deliver(self.client, found)
