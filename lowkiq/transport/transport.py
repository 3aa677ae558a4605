"""One way to Redis for every part of lowkiq: a standalone Redis, a Redis Cluster, a Sentinel-managed primary.

The deployment is found on first use: a ``redis+sentinel://`` URL asks the
sentinels for the primary; any other URL may name a cluster node (``INFO
cluster`` says ``cluster_enabled:1``), whose slot map is then read. A
standalone Redis is the one-node case: the same batches, grouped into one.

Example::

    transport = Transport("redis://10.0.0.5:7000/0", pool_size=10, timeout=5.0)
    transport.pipeline_commands([(key, ("ZCARD", key)) for key in keys])  # one round trip
    transport.each_node(("INFO", "memory"))      # every node's reply, named
    transport.client_for(key).hgetall(key)       # redis-py, on the node that owns key
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import redis

from .. import connection
from . import compat, discovery, sentinel
from .batch import Batch, NodeReply
from .errors import TopologyError, first_error
from .resp import pack
from .session import Session
from .slots import routing_slot
from .topology import Node, Topology, cluster_topology

DEFAULT_POOL_SIZE = 10
DEFAULT_TIMEOUT = 5.0


class Transport:
    def __init__(self, url: str | None = None, *, pool_size: int = DEFAULT_POOL_SIZE,
                 timeout: float = DEFAULT_TIMEOUT, client: redis.Redis | None = None) -> None:
        if (url is None) == (client is None):
            raise TypeError("Transport needs a Redis URL or a redis-py client, not both")
        self.url = url
        self.pool_size = pool_size
        self.timeout = timeout
        self._sentinel = sentinel.parse(url) if url is not None and sentinel.is_sentinel_url(url) else None
        self._seed_client = client
        self._seed: Node | None = None
        self._nodes: dict[str, Node] = {}
        self._topology: Topology | None = None
        self._stale = False
        self._generation = 0
        self._lock = threading.RLock()
        # The session the last one-call borrower gave back, kept for the next (see ``borrow``).
        self._kept: Session | None = None
        self._kept_lock = threading.Lock()

    # ---- the deployment ------------------------------------------------

    def topology(self) -> Topology:
        """The current snapshot; found again after a node was lost or refused."""
        current = self._topology
        if current is not None and not self._stale:
            return current
        return self.refresh()

    @property
    def generation(self) -> int:
        """The generation of the snapshot calls go by now, 0 before the first; asks Redis nothing. It changes when
        calls go to another node: after a failover, the primary that took the writes before it may have lost
        the last of them."""
        current = self._topology
        return 0 if current is None else current.generation

    @property
    def mode(self) -> str:
        """``standalone``, ``cluster`` or ``sentinel``."""
        return self.topology().mode

    def refresh(self, *, hints: dict[int, tuple[str, int]] | None = None) -> Topology:
        """Read the deployment again; ``hints`` are slot owners a MOVED reply named, trusted over the map."""
        with self._lock:
            previous = self._topology
            self._stale = False
            try:
                found = self._discover(previous, hints or {})
            except BaseException:
                self._stale = previous is not None
                raise
            if previous is not None and _same(previous, found):
                return previous
            self._generation += 1
            found.generation = self._generation
            self._topology = found
            return found

    def suspect(self) -> None:
        """A node was lost: look at the deployment again before the next call."""
        self._stale = True

    def node_at(self, host: str, port: int) -> Node:
        """The node at an address a cluster named (a new pool like the others' if not met before)."""
        name = f"{host}:{port}"
        with self._lock:
            node = self._nodes.get(name)
            if node is None:
                pool = discovery.pool_like(self._seed_node().pool, host, port)
                node = self._nodes[name] = Node(name, redis.Redis(connection_pool=pool))
            return node

    def _discover(self, previous: Topology | None, hints: dict[int, tuple[str, int]]) -> Topology:
        if self._sentinel is not None:
            host, port = sentinel.discover_primary(self._sentinel, self.timeout)
            name = f"{host}:{port}"
            node = self._nodes.get(name)
            if node is None:
                url = self._sentinel.primary_url(host, port)
                client = connection.client(url, pool_size=self.pool_size, timeout=self.timeout)
                node = self._nodes[name] = Node(name, client)
            return Topology("sentinel", 0, [node])
        seed = self._seed_node()
        if previous is not None and previous.mode == "standalone":
            return previous
        db = int(seed.pool.connection_kwargs.get("db") or 0)
        wrong_db = TopologyError(f"Redis at {seed.name} is a Redis Cluster node: a cluster has only database 0, "
                                 f"but the URL asks for database {db}")
        if previous is None:
            try:
                clustered = discovery.cluster_enabled(seed)
            except redis.ResponseError as exc:
                # The connection's SELECT was refused before any command ran.
                if "SELECT is not allowed in cluster mode" in str(exc):
                    raise wrong_db from exc
                raise
            if not clustered:
                return Topology("standalone", 0, [seed])
        if db != 0:
            raise wrong_db
        # The slot map, from the first node that answers: a node named by a MOVED first.
        candidates = [self.node_at(*address) for address in hints.values()]
        if previous is not None:
            candidates += previous.primaries + previous.replicas
        ranges = discovery.slot_map([*candidates, seed])
        topology = cluster_topology(ranges, 0, self.node_at)
        assert topology.slots is not None
        for slot, (host, port) in hints.items():
            topology.slots[slot] = self.node_at(host, port)
            if topology.slots[slot] not in topology.primaries:
                topology.primaries.append(topology.slots[slot])
        return topology

    def _seed_node(self) -> Node:
        if self._seed is None:
            with self._lock:
                if self._seed is None:
                    if self._seed_client is not None:
                        client = self._seed_client
                    elif self._sentinel is not None:
                        raise TopologyError("a Sentinel URL has no seed node")  # pragma: no cover - not reached
                    else:
                        assert self.url is not None
                        client = connection.client(self.url, pool_size=self.pool_size, timeout=self.timeout)
                    seed = Node(discovery.name_of(client), client)
                    self._nodes.setdefault(seed.name, seed)
                    self._seed = seed
        return self._seed

    # ---- calls -----------------------------------------------------------

    def session(self) -> Session:
        """Connections held across calls: a server thread's, closed by ``session.close()``."""
        return Session(self)

    def borrow(self) -> Session:
        """A session for one call, given back with ``give_back`` when the call is done (``close`` after an error).

        One session is kept between such calls, with its connections, while it stays sound: a process that
        enqueues one job at a time then does without a pool's borrow and return of a connection for each call
        (about a sixth of a one-job perform_async's CPU). The kept session holds at most one connection of each
        node's pool while no call uses it.
        """
        with self._kept_lock:
            session, self._kept = self._kept, None
        if session is not None:
            if session.sound():
                return session
            session.discard()
        return Session(self)

    def give_back(self, session: Session) -> None:
        """The end of a borrowed session's call: kept for the next one when none is kept, else closed."""
        with self._kept_lock:
            if self._kept is None:
                self._kept = session
                return
        session.close()

    @contextmanager
    def lent(self) -> Iterator[Session]:
        """``borrow`` for the length of a ``with`` block: given back at its end, closed when it raises (a call
        interrupted between its send and its replies must not leave them to the next one)."""
        session = self.borrow()
        try:
            yield session
        except BaseException:
            session.close()
            raise
        self.give_back(session)

    def execute(self, batch: Batch, *, each_node: Sequence[Any] | None = None,
                replicas: bool = False) -> tuple[list[Any], Sequence[NodeReply]]:
        """One batch on borrowed connections; see ``Session.execute``."""
        with self.lent() as session:
            return session.execute(batch, each_node=each_node, replicas=replicas)

    def pipeline_commands(self, routed: Sequence[tuple[str | bytes, Sequence[Any]]], *,
                          settle: bool = False) -> list[Any]:
        """Plain commands, each sent to the node that owns its routing key, in one round trip of wall time.

        Replies come raw (bytes, ints, lists; maps as dicts in RESP3), in the
        order given; the first error is raised after every reply was read, or
        with ``settle`` left in its command's place.
        Example: ``pipeline_commands([(key, ("ZRANGE", key, 0, 0, "WITHSCORES"))])``.
        """
        if not routed:
            return []
        batch = Batch([pack(command) for _, command in routed], [routing_slot(key) for key, _ in routed])
        results = self.execute(batch)[0]
        return results if settle else first_error(results)

    def each_node(self, command: Sequence[Any], *, replicas: bool = True) -> list[NodeReply]:
        """``command`` on every node (primaries first), in one round trip; a failed node's reply is its error."""
        return list(self.execute(Batch([], []), each_node=command, replicas=replicas)[1])

    def replica_counts(self) -> dict[str, int]:
        """Replicas connected to each primary, by node name (a primary that did not answer is left out)."""
        counts = {}
        for answer in self.each_node(("INFO", "replication"), replicas=False):
            if isinstance(answer.reply, BaseException):
                continue
            text = answer.reply.decode() if isinstance(answer.reply, bytes) else str(answer.reply)
            for line in text.splitlines():
                if line.startswith("connected_slaves:"):
                    counts[answer.name] = int(line.split(":", 1)[1])
        return counts

    def client_for(self, key: str | bytes | None = None) -> redis.Redis:
        """A redis-py client on the node that owns ``key`` (any primary when None).

        For code that needs redis-py's own commands. On a cluster, keep every
        key of one call in the slot of ``key``.
        """
        return self.node_for(key).client

    def node_for(self, key: str | bytes | None) -> Node:
        topology = self.topology()
        return topology.primaries[0] if key is None else topology.node_for(routing_slot(key))

    def describe(self) -> str:
        """Which Redis this is, for people (never a password)."""
        if self._sentinel is not None:
            return self._sentinel.describe()
        seed = self._seed_node().name
        topology = self._topology
        if topology is not None and topology.mode == "cluster":
            return f"Redis Cluster of {len(topology.primaries)} primaries via {seed}"
        db = self._seed_node().pool.connection_kwargs.get("db") or 0
        return f"Redis at {seed}" + (f", db {db}" if db else "")

    def close(self) -> None:
        with self._kept_lock:
            kept, self._kept = self._kept, None
        if kept is not None:
            kept.close()
        with self._lock:
            for node in self._nodes.values():
                node.close()

    # ---- what redis-py offers, for code not yet on the transport -----------

    def __getattr__(self, name: str) -> Any:
        """``transport.hget(key, field)``: a redis-py command sent to the node of its key.

        Kept for code written against one redis-py client; new code uses
        ``client_for(key)`` (several commands on one node) or
        ``pipeline_commands`` (many keys in one round trip of wall time).
        ``pipeline()`` on a cluster groups its commands per node (see compat).
        """
        if name.startswith("_"):
            raise AttributeError(name)
        method = getattr(redis.Redis, name, None)
        if not callable(method):
            return getattr(self.client_for(None), name)
        if name == "pipeline":
            return self._pipeline
        if name in ("transaction", "pubsub", "lock") and self.mode == "cluster":
            raise TypeError(f"on a Redis Cluster, {name}() must be bound to one node: "
                            f"use transport.client_for(key).{name}()")
        return lambda *args, **kwargs: compat.call(self, name, args, kwargs)

    def _pipeline(self, transaction: bool = True, shard_hint: Any = None) -> Any:
        if self.mode != "cluster":
            return self.client_for(None).pipeline(transaction=transaction, shard_hint=shard_hint)
        if transaction:
            raise TypeError("on a Redis Cluster a transaction must stay on one node: "
                            "use transport.client_for(key).pipeline()")
        return compat.RoutedPipeline(self)


_wrapped: weakref.WeakKeyDictionary[redis.Redis, Transport] = weakref.WeakKeyDictionary()
_wrapped_lock = threading.Lock()


def as_transport(client: Transport | redis.Redis) -> Transport:
    """The transport of a redis-py client (made once per client), or the transport itself."""
    if isinstance(client, Transport):
        return client
    with _wrapped_lock:
        transport = _wrapped.get(client)
        if transport is None:
            transport = _wrapped[client] = Transport(client=client)
        return transport


def _same(a: Topology, b: Topology) -> bool:
    return a.mode == b.mode and a.primaries == b.primaries and a.replicas == b.replicas and a.slots == b.slots

