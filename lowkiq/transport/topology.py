"""Which Redis node serves which hash slot: one node for a standalone or Sentinel-managed
Redis, the slot map of a Redis Cluster otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis

from .slots import SLOTS


@dataclass(eq=False)
class Node:
    """One Redis server and the pool of connections to it."""

    name: str  # host:port, or the socket path
    client: redis.Redis

    @property
    def pool(self) -> Any:
        return self.client.connection_pool

    def close(self) -> None:
        self.pool.disconnect()


@dataclass
class Topology:
    """A snapshot: replaced as a whole when the deployment changes, never edited in place.

    ``generation`` rises with every new snapshot, so that what was planned
    for an older one (a connection, a cached grouping) is noticed as stale.
    """

    mode: str  # "standalone", "cluster" or "sentinel"
    generation: int
    primaries: list[Node]
    replicas: list[Node] = field(default_factory=list)
    # Slot -> node on a cluster; None when one node serves everything.
    slots: list[Node] | None = None

    @property
    def single(self) -> Node | None:
        """The node that serves every slot, when there is only one."""
        return self.primaries[0] if self.slots is None else None

    def node_for(self, slot: int) -> Node:
        return self.primaries[0] if self.slots is None else self.slots[slot]

    def nodes(self, *, replicas: bool = False) -> list[Node]:
        return self.primaries + self.replicas if replicas else list(self.primaries)


@dataclass(frozen=True)
class SlotRange:
    start: int
    end: int
    primary: tuple[str, int]
    replicas: tuple[tuple[str, int], ...]


def slot_ranges(reply: Any, *, shards: bool, default_host: str) -> list[SlotRange]:
    """The slot ranges of a raw CLUSTER SHARDS (Redis 7) or CLUSTER SLOTS (6.2) reply.

    A node that does not know its own address announces an empty one: it is
    the node that answered, ``default_host``.
    """
    ranges = []
    if shards:
        for shard in reply:
            info = _pairs(shard)
            nodes = [_pairs(n) for n in info[b"nodes"]]
            # A failed primary keeps its slots until a replica is promoted: calls to it are an outage.
            primary = sorted((n for n in nodes if n.get(b"role") == b"master"),
                             key=lambda n: n.get(b"health") == b"fail")
            replicas = [n for n in nodes if n.get(b"role") != b"master" and n.get(b"health") != b"fail"]
            if not primary:
                continue
            bounds = info[b"slots"]
            for i in range(0, len(bounds), 2):
                ranges.append(SlotRange(int(bounds[i]), int(bounds[i + 1]), _address(primary[0], default_host),
                                        tuple(_address(n, default_host) for n in replicas)))
    else:
        for start, end, primary, *replicas in reply:
            ranges.append(SlotRange(int(start), int(end), _slots_address(primary, default_host),
                                    tuple(_slots_address(n, default_host) for n in replicas)))
    return ranges


def cluster_topology(ranges: Iterable[SlotRange], generation: int, node: Any) -> Topology:
    """A cluster's snapshot; ``node(host, port)`` gives the Node of an address (reused or new)."""
    slots: list[Node | None] = [None] * SLOTS
    primaries: dict[tuple[str, int], Node] = {}
    replicas: dict[tuple[str, int], Node] = {}
    for r in ranges:
        owner = primaries.get(r.primary) or primaries.setdefault(r.primary, node(*r.primary))
        slots[r.start : r.end + 1] = [owner] * (r.end - r.start + 1)
        for address in r.replicas:
            replicas.setdefault(address, node(*address))
    missing = sum(1 for s in slots if s is None)
    if missing:
        # cluster-require-full-coverage no: the covered slots still work; the others raise
        # the usual CLUSTERDOWN when used, through any node.
        fallback = next(iter(primaries.values()), None)
        if fallback is None:
            raise redis.ConnectionError("the Redis Cluster serves no slot yet")
        slots = [s or fallback for s in slots]
    return Topology("cluster", generation, list(primaries.values()), list(replicas.values()), slots)  # type: ignore[arg-type]


def _pairs(reply: Any) -> dict[bytes, Any]:
    """A map reply: a dict in RESP3, a flat list of keys and values in RESP2."""
    if isinstance(reply, dict):
        return {k.encode() if isinstance(k, str) else k: v for k, v in reply.items()}
    return {reply[i]: reply[i + 1] for i in range(0, len(reply), 2)}


def _address(node: dict[bytes, Any], default_host: str) -> tuple[str, int]:
    host = node.get(b"endpoint") or node.get(b"ip") or b""
    text = host.decode() if isinstance(host, bytes) else str(host)
    port = node.get(b"port") or node.get(b"tls-port") or 0
    return (default_host if text in ("", "?") else text, int(port))


def _slots_address(node: Any, default_host: str) -> tuple[str, int]:
    host = node[0].decode() if isinstance(node[0], bytes) else str(node[0])
    return (default_host if host in ("", "?") else host, int(node[1]))
