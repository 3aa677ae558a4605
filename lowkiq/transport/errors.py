"""What the transport raises beyond redis-py's own error classes."""

from __future__ import annotations

import socket
from collections.abc import Sequence
from typing import Any

import redis

from ..errors import LowkiqError

# What a server thread or its keeper waits out as an outage (retrying, backing off), whatever the call was:
# a lost or refused connection, a timeout, an error reply (a failover's READONLY, a Cluster's CLUSTERDOWN).
REDIS_ERRORS = (redis.ConnectionError, redis.TimeoutError, redis.ResponseError, OSError)


class TopologyError(LowkiqError, redis.RedisError):
    """The Redis deployment cannot serve lowkiq as configured (e.g. a database other than 0 on a cluster).

    Not an outage: waiting does not help, the configuration must change.
    """


class NotSent(redis.ConnectionError):
    """The command did not reach the node whole (no connection could be made, or it was lost before
    the command was sent to its end), so it did not run."""


class PartialWrite(LowkiqError, redis.ResponseError):
    """Some calls of one pipelined step ran and others did not, or may not have.

    ``results`` holds, per call in the order given, its reply or the exception
    in its place; ``keysets`` the keyset of each call. A call whose error is a
    ConnectionError or TimeoutError may have run (its reply was lost). The
    message starts with the first error's own text, so a caller that reads an
    error reply's words (e.g. a refused lease) reads them here too.
    """

    def __init__(self, results: Sequence[Any], keysets: Sequence[Any]) -> None:
        self.results = list(results)
        self.keysets = list(keysets)
        first = self.errors[min(self.errors)]
        super().__init__(
            f"{first} (partial write: {len(self.written)} of {len(self.results)} calls were written"
            f"{': ' if self.written else ''}{', '.join(map(str, self.written))}; {len(self.uncertain)} may have been)"
        )
        self.__cause__ = first

    @property
    def errors(self) -> dict[int, BaseException]:
        return {i: r for i, r in enumerate(self.results) if isinstance(r, BaseException)}

    @property
    def written(self) -> list[int]:
        """Indexes of the calls that ran."""
        return [i for i, r in enumerate(self.results) if not isinstance(r, BaseException)]

    @property
    def uncertain(self) -> list[int]:
        """Indexes of the calls whose reply was lost: they may have run."""
        return [i for i, r in enumerate(self.results) if _lost(r)]

    @property
    def written_keysets(self) -> list[Any]:
        return [self.keysets[i] for i in self.written]


def checked(results: list[Any], calls: Sequence[Sequence[Any]]) -> list[Any]:
    """The replies of a pipelined step of scripts ``(name, keyset, args)``; raises when any call failed.

    When every call failed alike (all refused, or all with their replies
    lost) the first error is raised as it is; any mix of written, refused
    and lost calls raises PartialWrite.
    """
    failed = [r for r in results if isinstance(r, BaseException)]
    if not failed:
        return results
    if len(failed) == len(results) and len({_lost(r) for r in failed}) == 1:
        raise failed[0]
    raise PartialWrite(results, [call[1] for call in calls])


def _lost(reply: Any) -> bool:
    # BusyLoadingError (LOADING) is a ConnectionError class but an error reply: nothing ran; NotSent neither.
    lost = isinstance(reply, (redis.ConnectionError, redis.TimeoutError))
    return lost and not isinstance(reply, (redis.BusyLoadingError, NotSent))


def out_of_memory(exc: BaseException) -> bool:
    """Whether an error is Redis refusing a write because it is full (``maxmemory`` with ``noeviction``).

    Redis 7 answers a script's refused write with its own OOM error; 6.2 wraps it in the script's
    error ("ERR Error running script ... -OOM command not allowed ..."). Either way the script
    stopped at the refused command.
    """
    return isinstance(exc, redis.exceptions.OutOfMemoryError) or (
        isinstance(exc, redis.ResponseError) and "OOM command not allowed" in str(exc))


def first_error(results: list[Any]) -> list[Any]:
    """The replies of a pipeline of reads; raises the first error among them."""
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def on_node(exc: BaseException, node: str, *, sent: bool = True) -> redis.RedisError:
    """A lost connection as redis-py's class, naming the node (a cluster has several)."""
    if not sent:
        return NotSent(f"Redis at {node}: {exc or type(exc).__name__}")
    if isinstance(exc, (socket.timeout, redis.TimeoutError)):
        return redis.TimeoutError(f"Redis at {node} did not reply in time: {exc}")
    return redis.ConnectionError(f"Redis at {node}: {exc or type(exc).__name__}")
