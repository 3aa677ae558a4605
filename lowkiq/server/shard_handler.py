"""One batch of one shard: take it, perform it through the middlewares, then ack or fail it.

A successful batch is not acknowledged on its own: the ack rides along
with the thread's next take (``Queue.ack_and_take``), so a batch costs one
Redis round trip. Failures cost one more (``Queue.fail``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import job_context, log_format, serializers, stored_error
from ..events import SILENT, Bus
from ..middleware import run_chain
from ..store import lua
from ..store.leases import Lease
from ..store.queue import Queue, Taken
from ..worker import Worker

if TYPE_CHECKING:
    from ..config import Settings
    from ..jobs import MorgueJob

log = logging.getLogger("lowkiq.server")


class StopProcess(Exception):
    """Carries a BaseException (KeyboardInterrupt, SystemExit) raised by perform after its batch was failed."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"{type(cause).__name__} raised inside perform")
        self.cause = cause


@dataclass(slots=True)  # built once per batch: see Job on frozen dataclasses
class Ack:
    """A batch that succeeded and waits to be acknowledged with the next take."""

    handler: ShardHandler
    ids: list[str]


class ShardHandler:
    """A shard this thread holds the lease of: its worker instance, its queue, its lease."""

    def __init__(
        self,
        lease: Lease,
        worker: Worker,
        queue: Queue,
        settings: Settings,
        wire: lua.Wire | None = None,
        *,
        thread: str = "",
        clock: Callable[[], float] = time.time,
        events: Bus = SILENT,
    ) -> None:
        self.lease = lease
        self.shard = lease.shard
        self.worker = worker
        self.queue = queue
        self.settings = settings
        self.clock = clock
        self.wire = wire  # the thread's own connection for ack+take
        self.thread = thread
        self.name = type(worker).__name__
        self._take = (lease, type(worker).batch_size)
        self._middlewares = settings.server_middlewares
        self._context = job_context.Context(self.name, self.shard.index, lease)
        self.events = events

    def take(self, ack: Ack | None) -> Taken:
        """Acknowledge ``ack`` (of any shard of this thread) and take a batch here: one round trip."""
        acked = None if ack is None else (ack.handler.lease, ack.ids)
        taken = self.queue.ack_and_take(acked, self._take, thread=self.thread, wire=self.wire)
        assert taken is not None
        if self.events.active and taken.jobs:
            self.events.emit("batch_taken", worker=self.name, shard=self.shard.index,
                             ids=[job.id for job in taken.jobs], thread=self.thread)
        return taken

    def ack(self, ids: Sequence[str]) -> None:
        self.queue.ack_and_take((self.lease, ids), None, thread=self.thread, wire=self.wire)

    def perform(self, taken: Taken) -> Ack | None:
        """Run the batch. Success returns the pending ack; an Exception fails the batch and returns None.

        A BaseException that is not an Exception fails the batch too (its
        payloads stay in Redis) and is re-raised wrapped in StopProcess.
        """
        if taken.error is not None:
            self.fail(taken, taken.error, None)  # perform never ran: no duration to report
            return None
        jobs = taken.jobs
        batch = {job.id: [payload for payload, _ in job.payloads] for job in jobs}
        worker = self.worker
        started = time.perf_counter()
        job_context.enter(self._context)
        try:
            if self._middlewares:
                run_chain(self._middlewares, worker, batch, lambda: worker.perform(batch))
            else:
                worker.perform(batch)
        except Exception as exc:
            job_context.leave()
            self.fail(taken, exc, time.perf_counter() - started)
            return None
        except BaseException as exc:
            job_context.leave()
            log.error("%s shard %d: perform raised %s for ids %s; failing the batch and stopping",
                      self.name, self.shard.index, type(exc).__name__, list(batch),
                      extra=self._fields(list(batch), error_class=type(exc).__name__))
            try:
                self.fail(taken, exc, time.perf_counter() - started)
            except Exception:
                # The batch stays in processing; whoever holds the lease next restores it.
                log.exception("%s shard %d: could not fail ids %s", self.name, self.shard.index, list(batch),
                              extra=self._fields(list(batch)))
            raise StopProcess(exc) from exc
        job_context.leave()
        if self.events.active:
            self.events.emit("performed", worker=self.name, shard=self.shard.index, ids=list(batch),
                             seconds=time.perf_counter() - started)
        if log.isEnabledFor(logging.DEBUG):
            seconds = time.perf_counter() - started
            log.debug("%s shard %d: performed %d ids %s in %.1f ms", self.name, self.shard.index, len(batch),
                      _short(list(batch)), seconds * 1000, extra=self._fields(list(batch), seconds=round(seconds, 6)))
        return Ack(self, list(batch))

    def fail(self, taken: Taken, exc: BaseException, seconds: float | None) -> list[MorgueJob]:
        """SPEC's retry rules for every job of the batch; returns the jobs that entered the morgue.

        ``seconds``: how long perform ran, None when it did not run (a payload could not be loaded).
        """
        worker = self.worker
        now = self.clock()
        message = self._format_error(exc)
        retries = [(job.id, now + self._retry_in(job.retry_count + 1)) for job in taken.jobs]
        ids = [job.id for job in taken.jobs]
        # One line per failure: a failing queue must not flood the log. The traceback is stored with
        # the jobs (the job page shows it) and logged at debug level.
        log.error("%s shard %d: ids %s failed: %s", self.name, self.shard.index, _short(ids), message,
                  extra=self._fields(ids, error_class=type(exc).__name__, error=message))
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s shard %d: traceback of the failure of ids %s", self.name, self.shard.index, _short(ids),
                      exc_info=(type(exc), exc, exc.__traceback__), extra=self._fields(ids))
        stored = stored_error.pack(self._dump_error(message),
                                   stored_error.format_traceback(exc, self.settings.traceback_limit))
        failed = self.queue.fail(self.lease, retries, stored, type(worker).max_retry_count, now=now)
        if failed.missing:
            log.error("%s shard %d: ids %s failed but were no longer in processing; nothing was written for them",
                      self.name, self.shard.index, _short(failed.missing), extra=self._fields(failed.missing))
        morgued = failed.morgued
        if self.events.active:
            self.events.emit("failed", worker=self.name, shard=self.shard.index, ids=ids, seconds=seconds,
                             error=message, exception=exc)
            if morgued:
                self.events.emit("morgued", worker=self.name, shard=self.shard.index, ids=[m.id for m in morgued])
        if morgued:
            dead = [m.id for m in morgued]
            log.warning("%s shard %d: ids %s moved to the morgue after %d retries", self.name, self.shard.index,
                        _short(dead), type(worker).max_retry_count, extra=self._fields(dead, morgued=True))
            try:
                worker.retries_exhausted(morgued)
            except Exception:
                log.exception("%s.retries_exhausted raised for ids %s", self.name, _short([m.id for m in morgued]))
        return morgued

    def _fields(self, ids: list[str], **more: Any) -> dict[str, Any]:
        return log_format.fields(worker=self.name, shard=self.shard.index, ids=ids, batch=len(ids),
                                 thread=self.thread, **more)

    # The hooks below are user code run while failing a batch. If one raised, the
    # batch would stay in processing and the server would stop, then fail the same
    # way after every restart: each falls back to lowkiq's default instead.

    def _retry_in(self, retry_count: int) -> float:
        try:
            delay = float(self.worker.retry_in(retry_count))
            if math.isfinite(delay):
                return max(delay, 0.0)
            raise ValueError(f"retry_in({retry_count}) returned {delay!r}")
        except Exception:
            log.exception("%s.retry_in failed; using the default", self.name)
            return Worker.retry_in(self.worker, retry_count)

    def _format_error(self, exc: BaseException) -> str:
        try:
            return str(self.settings.format_error(exc))
        except Exception:
            log.exception("format_error failed; using str(exception)")
            return serializers.format_error(exc)

    def _dump_error(self, message: str) -> bytes:
        try:
            return _bytes(self.settings.dump_error(message))
        except Exception:
            log.exception("dump_error failed; storing the error as UTF-8")
            return serializers.dump_error(message)

    def __repr__(self) -> str:
        return f"ShardHandler({self.shard})"


def _bytes(value: Any) -> bytes:
    return value if isinstance(value, bytes) else str(value).encode("utf-8", "replace")


def _short(ids: list[str], limit: int = 20) -> str:
    """Ids for a log line: all of a small batch, the first ``limit`` of a big one."""
    if len(ids) <= limit:
        return "[" + ", ".join(ids) + "]"
    return "[" + ", ".join(ids[:limit]) + f", ... {len(ids) - limit} more]"
