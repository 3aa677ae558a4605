"""Read how many replicas each primary has: lease grants wait for one when there are (see ``Holdings``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .base import Duty

if TYPE_CHECKING:
    from ...transport import Transport
    from ..holdings import Holdings


class ReplicaCounts(Duty):
    name = "replica_counts"
    every = 10.0

    def __init__(self, client: Transport, holdings: Holdings) -> None:
        self.client = client
        self.holdings = holdings

    def run(self) -> None:
        self.holdings.replicas = self.client.replica_counts()
