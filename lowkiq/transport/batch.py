"""What the transport sends: packed commands with the slot of each, and what every node answered."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .topology import Node, Topology


class Batch:
    """Packed commands and the slot each goes to; grouped per node once per topology.

    ``sources`` are the scripts' sources, to load on a node that answers
    NOSCRIPT; ``library`` the sources loaded along with it (a node that lacks
    one script after a restart or a failover lacks them all).
    """

    __slots__ = ("_joined", "_plan", "library", "packed", "slots", "sources")

    def __init__(self, packed: list[bytes], slots: list[int], sources: Sequence[str | None] | None = None,
                 library: Sequence[str] = ()) -> None:
        self.packed = packed
        self.slots = slots
        self.sources = sources
        self.library = library
        self._joined: bytes | None = None
        self._plan: tuple[int, list[tuple[Node, list[int], bytes]]] | None = None

    def joined(self) -> bytes:
        """Every command in one buffer: what one node receives."""
        if self._joined is None:
            self._joined = b"".join(self.packed)
        return self._joined

    def plan(self, topology: Topology) -> list[tuple[Node, list[int], bytes]]:
        cached = self._plan
        if cached is not None and cached[0] == topology.generation:
            return cached[1]
        single = topology.single
        if single is not None:
            groups = [(single, list(range(len(self.packed))), self.joined())] if self.packed else []
        else:
            by_node: dict[Node, list[int]] = {}
            slots = topology.slots
            assert slots is not None
            for i, slot in enumerate(self.slots):
                by_node.setdefault(slots[slot], []).append(i)
            groups = [(node, idxs, b"".join([self.packed[i] for i in idxs])) for node, idxs in by_node.items()]
        self._plan = (topology.generation, groups)
        return groups


@dataclass(frozen=True)
class NodeReply:
    """The reply of one node to a command sent to every node (an exception when it failed)."""

    name: str
    primary: bool
    reply: Any
