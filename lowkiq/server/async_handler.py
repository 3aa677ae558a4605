"""One batch of an async worker's shard: its perform awaited on the event loop, its time limit a cancellation.

Everything else is ``ShardHandler``'s: the take (with the ack of the slot's previous batch), the failure
rules, the events and the log lines. Their Redis calls are blocking and run on the executor's threads
(``offload``), so the loop only ever runs performs and lowkiq's bookkeeping between them.

At ``time_limit`` the perform's task is cancelled: the perform sees ``asyncio.CancelledError`` at its current
``await`` and the batch fails with ``TimeLimitExceeded``. A perform that suppresses the cancellation goes
on: it keeps its shard (nothing else of the shard runs meanwhile), and ``IGNORED_AFTER`` seconds later it is
logged and reported (event ``time_limit_ignored``); the console's busy page flags it as over its limit.

Take-ahead (docs/take-ahead.md) works as for a thread: a quick perform's shard is taken several ids at a
time and they are awaited one by one, in order; a perform that awaits longer than the window is taken one id
at a time, and ``concurrency`` serves it instead.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TYPE_CHECKING, Any, TypeVar, cast

from .. import job_context
from ..errors import PartialFailure, TimeLimitExceeded
from ..middleware import arun_chain
from ..store.queue import Taken
from ..worker import is_coroutine
from .process_isolation import IGNORED_AFTER
from .shard_handler import Ack, ShardHandler, StopProcess

if TYPE_CHECKING:
    from ..jobs import MorgueJob

log = logging.getLogger("lowkiq.server")

T = TypeVar("T")
Offload = Callable[..., Awaitable[Any]]


async def _carry_on(handler: ShardHandler) -> bool:
    return True


class AsyncShardHandler(ShardHandler):
    """A shard of an async worker that one slot of the ``AsyncExecutor`` has checked out."""

    offload: Offload  # set by the slot: runs a blocking call on the executor's threads
    # ``between`` on the loop, set by the slot: whether the next id taken ahead may start (a renewal, when the
    # lease's budget is low, on the executor's threads)
    abetween: Callable[[ShardHandler], Awaitable[bool]]
    task: asyncio.Task[BaseException | None] | None = None  # the perform running now
    _morgued: list[MorgueJob] | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.abetween = _carry_on

    async def aperform(self, taken: Taken) -> Ack | None:
        """``ShardHandler.perform`` for an async worker: the batch, or the ids of a take-ahead run one at a time.
        An async perform that awaits I/O for longer than the window is taken one id at a time: its pace says so
        (lowkiq.server.take_ahead); more batches in flight (``concurrency``) serve it instead."""
        if self._ahead == 1:
            return await self.aperform_batch(taken)
        if len(taken.jobs) > 1:
            return await self.aperform_ahead(taken)
        started = time.perf_counter()
        try:
            return await self.aperform_batch(taken)
        finally:
            self.pace.record(time.perf_counter() - started)

    async def aperform_ahead(self, taken: Taken) -> Ack | None:
        """``ShardHandler.perform_ahead`` on the loop: each id in its own perform, in the order taken; the ids not
        started when the slot says stop go back untouched in one step."""
        jobs = taken.jobs
        done: list[str] = []
        lease = self.lease
        try:
            for i, job in enumerate(jobs):
                if i and not await self.abetween(self):
                    if lease.lost is None:  # a lost lease's ids are the new holder's to put back
                        await self.offload(self._untake, [j.id for j in jobs[i:]])
                    break
                one = Taken([job], taken.next_perform_in, taken.poisoned.get(job.id))
                lease.performing = (job.id, time.monotonic())
                started = time.perf_counter()
                try:
                    ack = await self.aperform_batch(one)
                except StopProcess:
                    await self.offload(self._settle_before_stop, done, [j.id for j in jobs[i + 1:]])
                    raise
                self.pace.record(time.perf_counter() - started)
                if ack is not None:
                    done.append(job.id)
        finally:
            lease.performing = None
        return Ack(self, done) if done else None

    async def aperform_batch(self, taken: Taken) -> Ack | None:
        """One batch awaited on the loop: the pending ack, or None when the batch failed."""
        if taken.error is not None:
            await self._afail(taken, taken.error, None)
            return None
        batch = {job.id: [payload for payload, _ in job.payloads] for job in taken.jobs}
        limit = self._limit
        started = time.perf_counter()
        deadline = None if limit is None else time.monotonic() + limit
        self.task = task = asyncio.ensure_future(self._perform_task(batch, deadline))
        task.set_name(f"lowkiq {self._label}")
        timed_out = False
        try:
            done, _ = await asyncio.wait({task}, timeout=limit)
            if not done:
                timed_out = True
                log.warning("%s: perform ran past its time_limit of %s s: cancelled", self._label, limit,
                            extra=self._fields(list(batch)))
                task.cancel()
                done, _ = await asyncio.wait({task}, timeout=IGNORED_AFTER)
                if not done:
                    self._swallowed(list(batch))
                    await asyncio.wait({task})
        finally:
            self.task = None
        seconds = time.perf_counter() - started
        if task.cancelled():
            exc: BaseException = (TimeLimitExceeded(f"the perform ran past its time_limit of {limit} s and was "
                                                    f"cancelled") if timed_out else
                                  RuntimeError("the perform was cancelled (asyncio.CancelledError)"))
            await self._afail(taken, exc, seconds)
            return None
        error = task.exception() or task.result()
        if error is None:
            return self._performed(taken, batch, started)
        if isinstance(error, PartialFailure):
            per_id = {job_id: self._formatted(e) for job_id, e in error.failures.items()}
            await self._afail(taken, error, seconds, per_id=per_id)
            return None
        if isinstance(error, Exception):
            await self._afail(taken, error, seconds)
            return None
        log.error("%s shard %d: perform raised %s for ids %s; failing the batch and stopping",
                  self.name, self.shard.index, type(error).__name__, list(batch),
                  extra=self._fields(list(batch), error_class=type(error).__name__))
        await self.offload(self._fail_and_stop, taken, error, seconds)
        return None  # not reached: _fail_and_stop raises StopProcess

    async def _perform_task(self, batch: dict[str, list[Any]], deadline: float | None) -> BaseException | None:
        # The task runs in a copy of the slot's context: lowkiq.context() is this batch's in it alone.
        job_context.enter(self._context, deadline)
        worker = self.worker
        perform = cast(Callable[[Any], Awaitable[None]], worker.perform)
        try:
            if self._middlewares:
                await arun_chain(self._middlewares, worker, batch, partial(perform, batch))
            else:
                await perform(batch)
        except (KeyboardInterrupt, SystemExit) as exc:
            # A task re-raises these out of the event loop, which would end every batch of it: carried out
            # as the task's result instead, the batch fails and the process stops, as with a thread.
            return exc
        return None

    def _swallowed(self, ids: list[str]) -> None:
        log.error("%s: perform still running %.0f s after it was cancelled at its time_limit (it suppresses "
                  "asyncio.CancelledError); its shard waits for it", self._label, IGNORED_AFTER,
                  extra=self._fields(ids))
        if self.events.active:
            self.events.emit("time_limit_ignored", worker=self.name, shard=self.shard.index, thread=self.thread)

    async def _afail(self, taken: Taken, exc: BaseException, seconds: float | None, **more: Any) -> None:
        """``fail`` on the executor's threads; then an async ``retries_exhausted`` awaited here, on the loop."""
        self._morgued = None
        await self.offload(partial(self.fail, taken, exc, seconds, **more))
        morgued, self._morgued = self._morgued, None
        if morgued:
            try:
                await cast(Callable[[list[Any]], Awaitable[None]], self.worker.retries_exhausted)(morgued)
            except Exception:
                log.exception("%s.retries_exhausted raised for ids %s", self.name, [m.id for m in morgued][:20])

    def _exhausted(self, morgued: list[MorgueJob]) -> None:
        # Called by fail(), on an executor thread: a coroutine hook is awaited by _afail on the loop instead.
        if is_coroutine(self.worker.retries_exhausted):
            self._morgued = morgued
        else:
            super()._exhausted(morgued)
