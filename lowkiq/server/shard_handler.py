"""One batch of one shard: take it, perform it through the middlewares, then ack or fail it.

A successful batch is not acknowledged on its own: the ack rides along
with the thread's next take (``Queue.ack_and_take``), so a batch costs one
Redis round trip. Failures cost one more (``Queue.fail``).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, NoReturn

from .. import job_context, log_format, serializers, stored_error
from ..errors import PartialFailure, TimeLimitExceeded
from ..events import SILENT, Bus
from ..middleware import run_chain
from ..store import lua, stops
from ..store.leases import UNTAKE_AHEAD, Lease, fenced, untake_call
from ..store.queue import Queue, Taken
from ..transport.errors import REDIS_ERRORS
from ..worker import Worker
from . import process_isolation as isolation
from . import take_ahead
from .duties.day_stats_flush import TALLY
from .group_limits import GroupLimits

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


def _carry_on(handler: ShardHandler) -> bool:
    return True


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
        in_child: bool | None = None,
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
        self._batch = type(worker).batch_size
        self._middlewares = settings.server_middlewares
        self._context = job_context.Context(self.name, self.shard.index, lease)
        self.events = events
        self._limit: float | None = type(worker).time_limit
        # None: as the worker's isolation says; lowkiq.testing.drain performs in the calling thread (False)
        self._in_child = type(worker).isolation == "process" if in_child is None else in_child
        self._label = f"{self.name} shard {self.shard.index} ({thread or 'thread'})"
        self.child_pid: int | None = None  # the child that performs (performed) this shard's batch
        # group_concurrency / group_rate_limit (docs/fairness.md): None for a worker without them, whose
        # take is Lowkiq's, untouched
        self.limits = GroupLimits.of(type(worker), lease, self._run, clock)
        # Take-ahead's cap, 1 where it is off: a batch worker takes batches; a group's permits are per batch; a
        # process-isolated perform may kill its child, whose crash blames every id in processing.
        cls = type(worker)
        self._ahead = cls.take_ahead if (cls.batch_size == 1 and self.limits is None and not self._in_child) else 1
        self.pace = take_ahead.pace_of(cls)
        # Asked by a take-ahead run before each id after its first: whether it may start (the thread renews the
        # lease there when its budget is low); False puts the rest back. Set by the thread.
        self.between: Callable[[ShardHandler], bool] = _carry_on

    def _run(self, calls: Sequence[lua.Call]) -> list[Any]:
        return self.wire.call_many(calls) if self.wire is not None else lua.run_many(self.queue.client, calls)

    def take(self, ack: Ack | None) -> Taken:
        """Acknowledge ``ack`` (of any shard of this thread) and take a batch here: one round trip."""
        acked = None if ack is None else (ack.handler.lease, ack.ids)
        limits = self.limits
        releases = ack.handler.limits.release_calls(ack.ids) if ack is not None and ack.handler.limits else []
        taken = self.queue.ack_and_take(acked, (self.lease, self.wanted()), thread=self.thread, wire=self.wire,
                                        blocked=None if limits is None else limits.passed_over(), extra=releases)
        assert taken is not None
        if limits is not None:
            taken = limits.admit(taken)
        if self.events.active and taken.jobs:
            self.events.emit("batch_taken", worker=self.name, shard=self.shard.index,
                             ids=[job.id for job in taken.jobs], thread=self.thread)
        return taken

    def wanted(self) -> int:
        """How many ids the next take asks for: the batch size, or -K for up to K taken ahead."""
        ahead = self.pace.ahead(self._ahead)
        return -ahead if ahead > 1 else self._batch

    def ack(self, ids: Sequence[str]) -> None:
        releases = self.limits.release_calls(ids) if self.limits is not None else []
        self.queue.ack_and_take((self.lease, ids), None, thread=self.thread, wire=self.wire, extra=releases)

    def prepare(self) -> None:
        """Ready what the batch runs in, before the lease check that precedes its perform: a process-isolated
        worker's child starts here, as a fresh interpreter loading the app takes a while, during which a
        paused process may lose its lease (the check after this sees it)."""
        if self._in_child:
            isolation.slot_for(type(self.worker)).start()

    def perform(self, taken: Taken) -> Ack | None:
        """Run the batch (``perform_batch``), or the ids of a take-ahead run one at a time (``perform_ahead``)."""
        if self._ahead == 1:
            return self.perform_batch(taken)
        if len(taken.jobs) > 1:
            return self.perform_ahead(taken)
        started = time.perf_counter()
        try:
            return self.perform_batch(taken)
        finally:
            self.pace.record(time.perf_counter() - started)

    def perform_ahead(self, taken: Taken) -> Ack | None:
        """The ids of one take, taken ahead, each in its own perform, in the order taken (docs/take-ahead.md).

        Each id is on its own as in a batch of one: its failure is written at once and is its alone, and its
        time limit is its own. Before each id after the first the thread may say to stop (its process stops,
        hands the shard over or lost it): the ids not started go back to their place in the queue, untouched,
        in one step. The ids performed are acknowledged together with the next take.
        """
        jobs = taken.jobs
        done: list[str] = []
        lease = self.lease
        try:
            for i, job in enumerate(jobs):
                if i and not self.between(self):
                    if lease.lost is None:  # a lost lease's ids are the new holder's to put back
                        self._untake([j.id for j in jobs[i:]])
                    break
                one = Taken([job], taken.next_perform_in, taken.poisoned.get(job.id))
                # the busy list names it once the lease is renewed (a perform that runs long)
                lease.performing = (job.id, time.monotonic())
                started = time.perf_counter()
                try:
                    ack = self.perform_batch(one)
                except StopProcess:
                    self._settle_before_stop(done, [j.id for j in jobs[i + 1:]])
                    raise
                self.pace.record(time.perf_counter() - started)
                if ack is not None:
                    done.append(job.id)
        finally:
            lease.performing = None
        return Ack(self, done) if done else None

    def _untake(self, ids: list[str]) -> None:
        with fenced():
            self._run([untake_call(self.lease, ids, UNTAKE_AHEAD)])

    def _settle_before_stop(self, done: list[str], rest: list[str]) -> None:
        """The process stops after a perform raised a BaseException: the run's performed ids are acknowledged
        and the ones not started put back, or else restored by whoever takes the shard over."""
        try:
            if rest:
                self._untake(rest)
            if done:
                self.ack(done)
        except Exception:
            log.exception("%s shard %d: could not settle ids taken ahead %s before stopping", self.name,
                          self.shard.index, _short(done + rest), extra=self._fields(done + rest))

    def perform_batch(self, taken: Taken) -> Ack | None:
        """Run the batch. Success returns the pending ack; an Exception fails the batch and returns None.

        ``PartialFailure`` fails the ids it names and acknowledges the others, in one step. A
        BaseException that is not an Exception fails the batch too (its payloads stay in Redis) and
        is re-raised wrapped in StopProcess. A process-isolated worker's batch runs in this
        thread's child process (``isolation.ChildSlot``).
        """
        if taken.error is not None:
            self.fail(taken, taken.error, None)  # perform never ran: no duration to report
            return None
        jobs = taken.jobs
        batch = {job.id: [payload for payload, _ in job.payloads] for job in jobs}
        worker = self.worker
        if self._in_child:
            return self._perform_in_child(taken, batch)
        limit = self._limit
        started = time.perf_counter()
        job_context.enter(self._context, None if limit is None else time.monotonic() + limit)
        armed = None if limit is None else isolation.WATCHDOG.arm(limit, self._label, self._ignored)
        try:
            try:
                if self._middlewares:
                    run_chain(self._middlewares, worker, batch, lambda: worker.perform(batch))
                else:
                    worker.perform(batch)
            finally:
                if armed is not None:
                    isolation.WATCHDOG.disarm(armed)
        except PartialFailure as exc:
            self._done(armed)
            self.fail(taken, exc, time.perf_counter() - started,
                      per_id={job_id: self._formatted(e) for job_id, e in exc.failures.items()})
            return None
        except Exception as exc:
            self._done(armed)
            if isinstance(exc, TimeLimitExceeded) and armed is not None and armed.fired and not exc.args:
                exc = TimeLimitExceeded(f"the perform ran past its time_limit of {limit} s").with_traceback(
                    exc.__traceback__)
            self.fail(taken, exc, time.perf_counter() - started)
            return None
        except BaseException as exc:
            self._done(armed)
            log.error("%s shard %d: perform raised %s for ids %s; failing the batch and stopping",
                      self.name, self.shard.index, type(exc).__name__, list(batch),
                      extra=self._fields(list(batch), error_class=type(exc).__name__))
            self._fail_and_stop(taken, exc, time.perf_counter() - started)
        self._done(armed)
        return self._performed(taken, batch, started)

    def _done(self, armed: isolation.Armed | None) -> None:
        # Again after the perform's own disarm: the limit may have fired between the perform's return
        # and that disarm, and the exception it raised there skipped it.
        if armed is not None:
            isolation.WATCHDOG.disarm(armed)
        job_context.leave()

    def _performed(self, taken: Taken, batch: dict[str, list[Any]], started: float) -> Ack:
        TALLY.record(self.name, [job.perform_in for job in taken.jobs], self.clock(), time.perf_counter() - started)
        if self.events.active:
            self.events.emit("performed", worker=self.name, shard=self.shard.index, ids=list(batch),
                             seconds=time.perf_counter() - started)
        if log.isEnabledFor(logging.DEBUG):
            seconds = time.perf_counter() - started
            log.debug("%s shard %d: performed %d ids %s in %.1f ms", self.name, self.shard.index, len(batch),
                      _short(list(batch)), seconds * 1000, extra=self._fields(list(batch), seconds=round(seconds, 6)))
        return Ack(self, list(batch))

    def _fail_and_stop(self, taken: Taken, exc: BaseException, seconds: float,
                       formatted: tuple[str, str | None] | None = None) -> NoReturn:
        try:
            self.fail(taken, exc, seconds, formatted=formatted)
        except Exception:
            # The batch stays in processing; whoever holds the lease next restores it.
            log.exception("%s shard %d: could not fail ids %s", self.name, self.shard.index,
                          [job.id for job in taken.jobs], extra=self._fields([job.id for job in taken.jobs]))
        raise StopProcess(exc) from exc

    def _perform_in_child(self, taken: Taken, batch: dict[str, list[Any]]) -> Ack | None:
        """The batch runs in this thread's child process; when the child was killed or died, it is
        reaped before the failure is written (``ChildSlot.perform`` returns only then)."""
        slot = isolation.slot_for(type(self.worker))
        lease = self.lease
        context = {"worker": self.name, "shard": self.shard.index, "fencing_token": lease.fencing_token,
                   "lease_deadline": lease.deadline}
        started = time.perf_counter()
        self.child_pid = slot.child.pid if slot.child is not None else None
        outcome = slot.perform(batch, context, partial(self._stop_requested, batch))
        self.child_pid = slot.last_pid
        seconds = time.perf_counter() - started
        if outcome.kind == "ok":
            return self._performed(taken, batch, started)
        if outcome.kind == "expired":
            self._put_back(taken)
            return None
        if outcome.kind == "abandoned":
            # The server exits and killed the child: no outcome is written. The batch stays in
            # processing until this thread hands its shards back, which restores it (its child is
            # reaped: nothing of it runs any more), or until its lease expires.
            log.warning("%s shard %d: %s; ids %s go back to the queue", self.name, self.shard.index,
                        outcome.message, _short(list(batch)), extra=self._fields(list(batch)))
            return None
        if outcome.kind == "partial":
            self.fail(taken, outcome.exception(), seconds, per_id=outcome.failures)
            return None
        exc = outcome.exception()
        formatted = (outcome.message, outcome.traceback)
        if outcome.kind == "stop":
            log.error("%s shard %d: perform raised %s in its child process for ids %s; failing the batch and "
                      "stopping", self.name, self.shard.index, outcome.error_class, list(batch))
            self._fail_and_stop(taken, exc, seconds, formatted)
        if outcome.kind in ("timeout", "crashed", "stopped"):
            formatted = (f"{type(exc).__name__}: {outcome.message}", None)
        self.fail(taken, exc, seconds, formatted=formatted, crashed=outcome.kind == "crashed")
        return None

    def _stop_requested(self, batch: dict[str, list[Any]]) -> None:
        """Asked every few tenths of a second while the batch's child performs it: StopRequested when an
        operator asked to stop it (``lowkiq.store.stops``). Redis not answering is no request: asked again."""
        try:
            who = stops.requested(self.queue.client, self.lease, batch)
        except REDIS_ERRORS as exc:
            log.debug("%s shard %d: could not read stop requests (%s)", self.name, self.shard.index, exc)
            return
        if who is not None:
            raise isolation.StopRequested(who)

    def _put_back(self, taken: Taken) -> None:
        """The child did not perform the batch: the lease's deadline had passed when it came (this process
        was paused after its lease check). Another server may hold the shard and run it: neither ack nor
        fail. Restored, fenced: back to the queue while the lease is still this process's; refused
        (LeaseRefused, raised) when it is not, and then in processing for the new owner to restore."""
        ids = [job.id for job in taken.jobs]
        log.warning("%s shard %d: ids %s not performed: the lease's deadline passed before its child process "
                    "could start them; put back unless another process holds the shard now", self.name,
                    self.shard.index, _short(ids), extra=self._fields(ids))
        try:
            with fenced():
                self._run([("restore", self.lease.keys, (self.lease.grant,))])
        finally:
            if self.limits is not None:
                self.limits.release(ids)

    def _ignored(self, armed: isolation.Armed) -> None:
        """The watchdog's thread: a perform goes on past TimeLimitExceeded (it caught it)."""
        if self.events.active:
            self.events.emit("time_limit_ignored", worker=self.name, shard=self.shard.index, thread=self.thread)

    def _formatted(self, exc: BaseException) -> tuple[str, str | None]:
        return self._format_error(exc), stored_error.format_traceback(exc, self.settings.traceback_limit)

    def fail(self, taken: Taken, exc: BaseException, seconds: float | None, *,
             formatted: tuple[str, str | None] | None = None,
             per_id: Mapping[str, tuple[str, str | None]] | None = None,
             crashed: bool = False) -> list[MorgueJob]:
        """SPEC's retry rules for every job of the batch; returns the jobs that entered the morgue.

        ``seconds``: how long perform ran, None when it did not run (a payload could not be loaded).
        ``formatted``: the error and traceback as a child process wrote them. ``per_id``: a
        PartialFailure's {id: (error, traceback)}: only those ids fail, the others are acknowledged
        in the same step. ``crashed``: the child performing the batch died; each id counts a crash.
        """
        worker = self.worker
        now = self.clock()
        if seconds is not None:  # a perform that ran and failed counts its wait and run as any other
            TALLY.record(self.name, [job.perform_in for job in taken.jobs], now, seconds)
        batch_ids = [job.id for job in taken.jobs]
        acked: list[str] = []
        own: dict[str, bytes] = {}
        if per_id is not None:
            unknown = [job_id for job_id in per_id if job_id not in set(batch_ids)]
            if unknown:
                log.warning("%s shard %d: PartialFailure names ids that are not in the batch: %s (ignored)",
                            self.name, self.shard.index, _short(unknown), extra=self._fields(unknown))
            acked = [job_id for job_id in batch_ids if job_id not in per_id]
            jobs = [job for job in taken.jobs if job.id in per_id]
            for job_id, (text, traceback) in per_id.items():
                own[job_id] = stored_error.pack(self._dump_error(text), traceback or "")
            message = "; ".join(f"{job_id}: {per_id[job_id][0]}" for job_id in [job.id for job in jobs][:5])
        else:
            jobs = taken.jobs
            message, traceback = formatted if formatted is not None else self._formatted(exc)
        retries = [(job.id, now + self._retry_in(job.retry_count + 1)) for job in jobs]
        ids = [job.id for job in jobs]
        # One record per failure, with the exception: error trackers' logging integrations (Sentry's, ...)
        # capture its stack from exc_info. A perform of a child process raised there: its traceback is the
        # stored text, also in the record's fields.
        in_child = {"traceback": traceback} if formatted is not None and per_id is None and traceback else {}
        log.error("%s shard %d: ids %s failed: %s", self.name, self.shard.index, _short(ids), message,
                  exc_info=(type(exc), exc, exc.__traceback__),
                  extra=self._fields(ids, error_class=type(exc).__name__, error=message, **in_child))
        stored = b"" if per_id is not None else stored_error.pack(self._dump_error(message), traceback or "")
        try:
            failed = self.queue.fail(self.lease, retries, stored, type(worker).max_retry_count, now=now, errors=own,
                                     acked=acked, morgue_policy=type(worker).morgue_policy,
                                     crash_limit=self.settings.crash_limit if crashed else 0)
        finally:
            if self.limits is not None:
                self.limits.release(batch_ids)  # the batch is over, written or not: its group's permits end
        if failed.missing:
            log.error("%s shard %d: ids %s failed but were no longer in processing; nothing was written for them",
                      self.name, self.shard.index, _short(failed.missing), extra=self._fields(failed.missing))
        morgued = failed.morgued
        if self.events.active:
            if acked:
                self.events.emit("performed", worker=self.name, shard=self.shard.index, ids=acked, seconds=seconds)
            self.events.emit("failed", worker=self.name, shard=self.shard.index, ids=ids, seconds=seconds,
                             error=message, exception=exc)
            if morgued:
                self.events.emit("morgued", worker=self.name, shard=self.shard.index, ids=[m.id for m in morgued])
        if morgued:
            dead = [m.id for m in morgued]
            log.warning("%s shard %d: ids %s moved to the morgue after %d retries", self.name, self.shard.index,
                        _short(dead), type(worker).max_retry_count, extra=self._fields(dead, morgued=True))
            self._exhausted(morgued)
        return morgued

    def _exhausted(self, morgued: list[MorgueJob]) -> None:
        try:
            self.worker.retries_exhausted(morgued)
        except Exception:
            log.exception("%s.retries_exhausted raised for ids %s", self.name, _short([m.id for m in morgued]))

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
