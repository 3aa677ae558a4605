"""What a running ``perform`` may know about the shard it holds: ``lowkiq.context()``.

A perform that writes to another store can fence those writes with the
shard's fencing token, which rises with every change of owner (also when the
id moved shard with ``--change-layout``, or Redis lost its keys): a store
that remembers the highest token it saw per entity and refuses lower ones
cannot be written by a process that lost the shard while paused. A long
perform can watch ``lease_remaining()`` and stop in time, and read
``lease_lost`` before a write it cannot fence.

Example::

    class OrdersWorker(lowkiq.Worker):
        def perform(self, payloads_by_id):
            token = lowkiq.context().fencing_token
            for id, payloads in payloads_by_id.items():
                db.execute("UPDATE orders SET data = %s, token = %s WHERE id = %s AND token <= %s",
                           (payloads[-1], list(token), id, list(token)))
"""

from __future__ import annotations

import contextvars
import time
from dataclasses import dataclass
from typing import Protocol

# Context variables, not thread-locals: each server thread has a context of its own, and so does each task of
# an async worker's batches on the event loop (a task runs in a copy of the context it was created in).
_current: contextvars.ContextVar[Context | None] = contextvars.ContextVar("lowkiq_context", default=None)
_deadline: contextvars.ContextVar[float | None] = contextvars.ContextVar("lowkiq_deadline", default=None)


class LeaseView(Protocol):
    """What a context reads of its lease: the process's own ``Lease``, or, inside a child process
    (``isolation = "process"``), a snapshot of it sent with the batch."""

    @property
    def fencing_token(self) -> tuple[int, int]: ...

    @property
    def deadline(self) -> float: ...

    def remaining(self) -> float: ...

    def is_lost(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class Context:
    """The worker and shard of the running perform, and the lease its process holds on that shard."""

    worker: str
    shard: int
    lease: LeaseView

    @property
    def fencing_token(self) -> tuple[int, int]:
        """(Redis Cluster's current epoch or 0, fence): compare as a tuple; a newer owner's token is higher.

        The fence is at least Redis's clock in microseconds at the grant and one more than any
        token given before for the shard (docs/server.md, "Fencing your own writes", says what is covered).
        """
        return self.lease.fencing_token

    @property
    def lease_deadline(self) -> float:
        """``time.monotonic()`` value after which another process may hold this shard (renewals move it)."""
        return self.lease.deadline

    def lease_remaining(self) -> float:
        """Seconds left before the lease may be lost, if nothing renews it; negative when already past."""
        return self.lease.remaining()

    @property
    def lease_lost(self) -> bool:
        """True once another process may hold the shard: stop, nothing of this batch will be acknowledged.

        Free while the lease is fresh (its local deadline ahead); past the deadline (the process
        was paused, or cut off from Redis) each read asks Redis, in one round trip, whether the
        grant is still this process's. An expired or replaced grant is lost for good; when Redis
        cannot be asked, True.
        """
        return self.lease.is_lost()

    def time_left(self) -> float | None:
        """Seconds left before the worker's ``time_limit`` stops this perform (negative once past);
        None when the worker has no time limit."""
        deadline = _deadline.get()
        return None if deadline is None else deadline - time.monotonic()


def context() -> Context:
    """The running perform's context. Outside a perform, a RuntimeError."""
    current = _current.get()
    if current is None:
        raise RuntimeError("lowkiq.context() is only available inside a worker's perform")
    return current


def enter(current: Context, deadline: float | None = None) -> None:
    """``deadline``: the ``time.monotonic()`` value of the perform's time limit, if it has one."""
    _current.set(current)
    _deadline.set(deadline)


def entered() -> tuple[Context | None, float | None]:
    """The calling thread's context and deadline, to enter again after a perform run inside a perform
    (``lowkiq.testing.inline()``: a perform that enqueues performs those jobs at once)."""
    return _current.get(), _deadline.get()


def leave() -> None:
    _current.set(None)
    _deadline.set(None)
