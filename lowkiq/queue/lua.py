"""Loads the Lua scripts of ``scripts/`` and runs them by SHA.

redis-py's ``Script`` objects ask Redis ``SCRIPT EXISTS`` before every
pipeline; on the hot path that would double the round trips. Scripts run
here by EVALSHA, and only when Redis answers NOSCRIPT (after a restart or
``SCRIPT FLUSH``) are they loaded again and the call repeated.

Every script call goes through a ``Wire``: the EVALSHA command packed here
with each shard's keys encoded once, replies read straight off the
connection, at half the client-side cost of redis-py's command path. A
server thread holds its own Wire (and connection) for the hot path;
``run``/``run_many`` borrow a pooled connection for one call.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any, Sequence

import redis
from redis.exceptions import NoScriptError

from . import replies
from .keys import ShardKeys

NAMES = (
    "push",
    "ack_and_take",
    "fail",
    "restore",
    "morgue_requeue",
    "morgue_delete",
    "delete",
    "perform_all_now",
    "kill_failed",
    "delete_failed",
    "range",
)


@dataclass(frozen=True)
class LuaScript:
    name: str
    source: str
    sha: str


@cache
def script(name: str) -> LuaScript:
    folder = resources.files("lowkiq.queue.scripts")
    lib = folder.joinpath("_lib.lua").read_text(encoding="utf-8")
    body = folder.joinpath(f"{name}.lua").read_text(encoding="utf-8")
    source = f"{lib}\n{body}"
    return LuaScript(name, source, hashlib.sha1(source.encode()).hexdigest())


def load_all(client: redis.Redis) -> None:
    for name in NAMES:
        client.script_load(script(name).source)


def run(client: redis.Redis, name: str, shard: ShardKeys, args: Sequence[Any]) -> Any:
    """One script on one shard, one round trip (two after a Redis restart)."""
    return run_many(client, [(name, shard, args)])[0]


def run_many(client: redis.Redis, calls: Sequence[tuple[str, ShardKeys, Sequence[Any]]]) -> list[Any]:
    """Several scripts, each on its own shard, in one pipelined round trip, on a pooled connection.

    Errors are raised after every reply was read; see ``Wire.call_many``.
    """
    if not calls:
        return []
    borrowed = Wire(client)
    try:
        return borrowed.call_many(calls)
    finally:
        borrowed.close()


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


def _encode(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, float):
        return repr(value).encode()
    return str(value).encode()


@dataclass
class Wire:
    """One thread's own connection to Redis, for scripts on the hot path."""

    client: redis.Redis
    _connection: Any = None
    _prefixes: dict[tuple[str, ShardKeys], tuple[int, bytes]] = field(default_factory=dict)

    def call(self, name: str, shard: ShardKeys, args: Sequence[Any]) -> Any:
        return self.call_many([(name, shard, args)])[0]

    def call_many(self, calls: Sequence[tuple[str, ShardKeys, Sequence[Any]]]) -> list[Any]:
        """Scripts pipelined in one round trip; raises the first error after reading every reply.

        A NOSCRIPT answer (after a Redis restart or SCRIPT FLUSH) only ever means
        that script did not run, so exactly those calls are repeated.
        """
        results = self._send(calls)
        missing = [i for i, r in enumerate(results) if isinstance(r, NoScriptError)]
        if missing:
            load_all(self.client)
            for i, r in zip(missing, self._send([calls[i] for i in missing])):
                results[i] = r
        for r in results:
            if isinstance(r, Exception):
                raise r
        return results

    def _send(self, calls: Sequence[tuple[str, ShardKeys, Sequence[Any]]]) -> list[Any]:
        packed = []
        for name, shard, args in calls:
            count, prefix = self._prefix(name, shard)
            packed.append(b"*%d\r\n" % (count + len(args)) + prefix + b"".join(_bulk(_encode(a)) for a in args))
        conn = self._connect()
        try:
            conn.send_packed_command(packed)
            return replies.read(conn, len(calls))
        except BaseException:
            # A reply left unread would answer the next command: start afresh.
            self.close(disconnect=True)
            raise

    def _prefix(self, name: str, shard: ShardKeys) -> tuple[int, bytes]:
        cached = self._prefixes.get((name, shard))
        if cached is None:
            keys = shard.all()
            parts = [b"EVALSHA", script(name).sha.encode(), str(len(keys)).encode(), *(k.encode() for k in keys)]
            cached = (len(parts), b"".join(_bulk(p) for p in parts))
            self._prefixes[(name, shard)] = cached
        return cached

    def _connect(self) -> Any:
        if self._connection is None:
            self._connection = self.client.connection_pool.get_connection()
        return self._connection

    def close(self, *, disconnect: bool = False) -> None:
        """Give the connection back to the pool."""
        if self._connection is not None:
            conn, self._connection = self._connection, None
            if disconnect:
                conn.disconnect()
            self.client.connection_pool.release(conn)
