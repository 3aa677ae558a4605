"""Delivers the releases of the held shards' dependencies into their dependents' shards (docs/dependencies.md).

A dependency's acknowledgement writes its release in its own shard's slot, atomically with the ack; this
duty, run by whichever process holds that shard's lease, carries it to the dependent's slot on every beat.
A process killed in between leaves the release in the stream: the shard's next holder delivers it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...store import dependencies
from .base import Duty

if TYPE_CHECKING:
    from ...transport import Transport
    from ..holdings import Holdings


class DependencyReleases(Duty):
    name = "dependency_releases"
    every = 0.0  # every beat (heartbeat_interval): a dependent follows within about a second

    def __init__(self, client: Transport, holdings: Holdings) -> None:
        self.client = client
        self.holdings = holdings

    def run(self) -> None:
        shards = [lease.keys for lease in self.holdings.held().values() if lease.lost is None]
        dependencies.deliver(self.client, dependencies.pending_releases(self.client, shards))
