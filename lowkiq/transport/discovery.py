"""What nodes say about the deployment: one command outside any batch, cluster mode, the slot map;
and the pools to nodes met along the way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from .errors import on_node
from .resp import Link, pack
from .topology import Node, SlotRange, slot_ranges

LOST = (redis.ConnectionError, redis.TimeoutError, OSError)


def ask(node: Node, command: Sequence[Any]) -> Any:
    """One command on a connection of its own, outside any batch (discovery)."""
    try:
        link = Link(node.pool)
    except LOST as exc:
        raise on_node(exc, node.name) from exc
    got: list[Any] = []
    try:
        link.send(pack(command))
        link.read_into(got, 1)
    except LOST as exc:
        link.close(disconnect=True)
        raise on_node(exc, node.name) from exc
    link.close()
    if isinstance(got[0], BaseException):
        raise got[0]
    return got[0]


def cluster_enabled(node: Node) -> bool:
    info = ask(node, ("INFO", "cluster"))
    text = info.decode() if isinstance(info, bytes) else str(info)
    return "cluster_enabled:1" in text


def name_of(client: redis.Redis) -> str:
    kwargs = client.connection_pool.connection_kwargs
    if "path" in kwargs:
        return str(kwargs["path"])
    return f"{kwargs.get('host', 'localhost')}:{kwargs.get('port', 6379)}"


def pool_like(pool: Any, host: str, port: int) -> Any:
    """A pool to another node, with the seed pool's settings (credentials, TLS, timeouts, size)."""
    kwargs = dict(pool.connection_kwargs, host=host, port=port)
    connection_class = pool.connection_class
    if "path" in kwargs:  # a cluster seed reached by a Unix socket: its peers are on TCP
        kwargs.pop("path")
        connection_class = redis.Connection
    extra = {"timeout": pool.timeout} if isinstance(pool, redis.BlockingConnectionPool) else {}
    return type(pool)(connection_class=connection_class, max_connections=pool.max_connections, **extra, **kwargs)


def slot_map(candidates: Sequence[Node]) -> list[SlotRange]:
    """The slot ranges, read from the first of ``candidates`` that answers (CLUSTER SHARDS, or SLOTS on 6.2)."""
    failure: BaseException | None = None
    for node in dict.fromkeys(candidates):
        try:
            try:
                reply = ask(node, ("CLUSTER", "SHARDS"))
                shards = True
            except redis.ResponseError:  # Redis 6.2 has only CLUSTER SLOTS
                reply = ask(node, ("CLUSTER", "SLOTS"))
                shards = False
            return slot_ranges(reply, shards=shards, default_host=node.name.rpartition(":")[0])
        except LOST as exc:
            failure = exc
    if isinstance(failure, redis.RedisError):
        raise failure
    raise redis.ConnectionError(f"no cluster node answered: {failure}")
