"""Reading many replies off one connection at C speed.

redis-py parses one reply per call through several Python layers: at 3,600
replies (the stats of 1,200 shards) or at 20,000 batches a second, that is
most of the client's time. hiredis parses whatever the socket holds in one
C call. Error replies become the same exception classes redis-py raises, in
place, so that every reply is read before any is raised.
"""

from __future__ import annotations

from typing import Any

import redis

try:
    import hiredis
except ImportError:  # pragma: no cover - hiredis is a dependency
    hiredis = None

try:
    from redis._parsers.base import BaseParser

    _parse_error = BaseParser.parse_error
except ImportError:  # pragma: no cover - older redis-py
    _parse_error = redis.ResponseError

BUFFER = 65536


def read(connection: Any, count: int) -> list[Any]:
    """``count`` replies; an error reply is an exception object in its place."""
    sock = getattr(connection, "_sock", None)
    if hiredis is None or sock is None:
        return [_read_one(connection) for _ in range(count)]
    reader = hiredis.Reader(replyError=redis.ResponseError)
    replies: list[Any] = []
    while len(replies) < count:
        data = sock.recv(BUFFER)
        if not data:
            raise redis.ConnectionError("Redis closed the connection while replying")
        reader.feed(data)
        reply = reader.gets()
        while reply is not False:
            replies.append(_parse_error(str(reply)) if isinstance(reply, redis.ResponseError) else reply)
            reply = reader.gets()
    return replies


def _read_one(connection: Any) -> Any:
    try:
        return connection.read_response()
    except redis.ResponseError as exc:
        return exc
