"""Commands packed into RESP bytes here, and replies read off a connection at C speed.

redis-py parses one reply per call through several Python layers: at 3,600
replies (the stats of 1,200 shards) or at 20,000 batches a second, that is
most of the client's time. hiredis parses whatever the socket holds in one
C call. Error replies become the same exception classes redis-py raises
(MovedError, NoScriptError, ...), in place, so that every reply is read
before any is raised.
"""

from __future__ import annotations

import select
from collections.abc import Sequence
from typing import Any

import redis
from redis.exceptions import ReadOnlyError

try:
    import hiredis
except ImportError:  # pragma: no cover - hiredis is a dependency
    hiredis = None  # type: ignore[assignment]

try:
    from redis._parsers.base import BaseParser

    parse_error = BaseParser.parse_error
except ImportError:  # pragma: no cover - older redis-py
    parse_error = redis.ResponseError

BUFFER = 65536


def error_of(text: str) -> redis.RedisError:
    """The exception redis-py raises for an error reply; a script's write refused by a replica
    is the READONLY it is (Redis before 7.0 wraps it: "ERR Error running script ... -READONLY ...")."""
    error: redis.RedisError = parse_error(text)  # type: ignore[no-untyped-call]
    if type(error) is redis.ResponseError and "-READONLY " in text:
        return ReadOnlyError(text)
    return error


def bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


def encode(value: Any) -> bytes:
    """An argument as redis-py would send it: floats by repr, so they round-trip exactly."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, float):
        return repr(value).encode()
    return str(value).encode()


def pack(command: Sequence[Any]) -> bytes:
    return b"*%d\r\n" % len(command) + b"".join(bulk(encode(part)) for part in command)


ASKING = pack(("ASKING",))


def whole_commands(data: bytes, size: int) -> int:
    """How many of the commands packed in ``data`` (by ``pack``) lie wholly in its first ``size`` bytes.

    Redis runs a command only once it has received all of it: when a send stops part way, the
    commands past these never ran.
    """
    count = position = 0
    while position < size:
        end = data.index(b"\r\n", position)
        parts = int(data[position + 1 : end])
        position = end + 2
        for _ in range(parts):
            end = data.index(b"\r\n", position)
            position = end + 2 + int(data[position + 1 : end]) + 2
        if position > size:
            break
        count += 1
    return count


class Link:
    """A connection borrowed from a node's pool, with its own hiredis reader."""

    __slots__ = ("_reader", "_sock", "connection", "pool", "sent")

    def __init__(self, pool: redis.ConnectionPool) -> None:
        self.pool = pool
        self.connection: Any = pool.get_connection()
        self._reader: Any = None
        self._sock: Any = None
        self.sent = 0  # bytes of the last send that the system took, also when it failed part way

    def send(self, data: bytes) -> None:
        """Send ``data`` whole; ``sent`` tells how far it went when this raises.

        The socket's timeout bounds each wait for room to send, not the whole send (as ``sendall``'s
        does): Redis reads a large pipeline only as fast as it runs it, and a call of many scripts
        that takes it longer than the timeout is not an outage. A Redis that stops reading is.
        """
        self.sent = 0
        connection = self.connection
        if connection._sock is None:
            connection.connect()
        connection.check_health()
        sock: Any = connection._sock
        view = memoryview(data)
        try:
            while self.sent < len(data):
                self.sent += sock.send(view[self.sent :])
        except TimeoutError as exc:
            raise redis.TimeoutError("Timeout writing to socket") from exc
        except OSError as exc:
            raise redis.ConnectionError(f"Error while writing to socket: {exc}") from exc

    def idle(self) -> bool:
        """Nothing to read on its connection (nor a close): it may send a new command and read its reply."""
        sock = self.connection._sock
        if sock is None:
            return True  # connects on its next send
        # one system call that never waits (a recv would wait out the socket's timeout)
        poller = select.poll()
        poller.register(sock, select.POLLIN)
        try:
            return not poller.poll(0)
        except OSError:
            return False

    def read_into(self, out: list[Any], count: int) -> int:
        """Append ``count`` replies to ``out``; an error reply is an exception object in its place.

        Returns how many replies were errors. ``out`` keeps what was read when
        the connection fails midway.
        """
        target = len(out) + count
        errors = 0
        sock = self.connection._sock
        if hiredis is None or sock is None:
            while len(out) < target:
                out.append(_read_one(self.connection))
                errors += isinstance(out[-1], Exception)
            return errors
        if sock is not self._sock:  # reconnected: bytes of the old socket must not mix in
            self._sock = sock
            self._reader = hiredis.Reader(replyError=redis.ResponseError)
        reader = self._reader
        while len(out) < target:
            data = sock.recv(BUFFER)
            if not data:
                raise redis.ConnectionError("Redis closed the connection while replying")
            reader.feed(data)
            reply = reader.gets()
            while reply is not False:
                if isinstance(reply, redis.ResponseError):
                    reply = error_of(str(reply))
                    errors += 1
                out.append(reply)
                reply = reader.gets()
        return errors

    def read_ready(self, out: list[Any], count: int) -> None:
        """Append the replies already received, up to ``count``, without waiting for more: after a send
        failed part way, these are the calls known to have run. The link must be closed after this."""
        sock = self.connection._sock
        if hiredis is None or sock is None:
            return
        sock.settimeout(0)
        try:
            self.read_into(out, count)
        except (OSError, redis.RedisError):
            return

    def close(self, *, disconnect: bool = False) -> None:
        if disconnect:
            # A reply left unread would answer the next command: start afresh.
            self.connection.disconnect()
            self._sock = None
        self.pool.release(self.connection)


def _read_one(connection: Any) -> Any:
    try:
        return connection.read_response()
    except redis.ResponseError as exc:
        return error_of(str(exc)) if type(exc) is redis.ResponseError else exc
