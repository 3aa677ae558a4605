"""One slot of the async executor: an async worker's batches one at a time, as a task on the event loop.

A slot does what a server thread does, with the thread's own state and code (``Processor``): check a shard
out of its worker's pool, take a batch with the ack of its previous one, perform, check the shard in. Its
blocking steps (the Redis scripts, the pool's lock) run on the executor's threads, one hand-off per take
(a take of ids taken ahead is one too; a renewal between them, when the lease runs short, another); only the
performs run on the loop. An idle slot sleeps on the loop: one slot of a pool polls for work coming
due, the others wait for the pool's bell (lowkiq.server.async_executor).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..store.leases import Lease, LeaseRefused
from ..transport.errors import REDIS_ERRORS
from .async_handler import AsyncShardHandler
from .processor import InHand, Processor, Wait
from .shard_handler import Ack, StopProcess
from .shard_pool import ShardPool
from .suspect_batches import SuspectBatches

if TYPE_CHECKING:
    from ..runtime import Runtime
    from .shard_handler import ShardHandler

log = logging.getLogger("lowkiq.server")

# How often a slot looks again while another slot performs a suspect batch alone (lowkiq.server.suspect_batches).
TURN_POLL = 0.2
# The longest a sleeping slot that is not its pool's poller waits for the pool's bell: a safety net only.
SIBLING_NAP = 5.0

class LoopWake(threading.Event):
    """A slot's wake: set from any thread (the keeper's, a pool's check-in), it also ends the slot's wait on
    the loop."""

    def __init__(self) -> None:
        super().__init__()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.event: asyncio.Event | None = None

    def set(self) -> None:
        super().set()
        loop, event = self.loop, self.event
        if loop is not None and event is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the slot is gone
                loop.call_soon_threadsafe(event.set)


class Host(Protocol):
    """What a slot uses of its executor (lowkiq.server.async_executor)."""

    sleepers: dict[str, list[AsyncSlot]]
    pollers: dict[str, AsyncSlot | None]

    def offload(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]: ...

    def ring(self, queue_name: str) -> None: ...


class AsyncSlot(Processor):
    """One batch at a time of one async worker: a task on the executor's loop."""

    handler_type = AsyncShardHandler

    def __init__(self, number: int, runtime: Runtime, stop: threading.Event,
                 on_fatal: Callable[[BaseException, bool], None], isolation: SuspectBatches, pool: ShardPool,
                 executor: Host, queue_name: str, *, first: bool) -> None:
        super().__init__(number, runtime, stop, on_fatal, isolation, pool)
        self.name = f"lowkiq-async-{number}"
        # Its own wake is for the keeper's news to this slot; the pool's news rings the pool's Bell instead.
        pool.wakes.remove(self.wake)
        self.wake: LoopWake = LoopWake()
        self.executor = executor
        self.queue_name = queue_name
        self.first = first  # the slot that passes the waker's pushes on to its pool (once, not per slot)
        self.polled = False  # its last wait ended by time, not by news

    def nudge(self, queue_name: str, shard: int) -> None:
        if self.first and self.pool is not None:
            self.pool.nudge(queue_name, shard)

    def _handler(self, lease: Lease) -> ShardHandler:
        handler = super()._handler(lease)
        assert isinstance(handler, AsyncShardHandler)
        handler.offload = self.executor.offload
        handler.abetween = self._amay_go_on
        return handler

    async def _amay_go_on(self, handler: ShardHandler) -> bool:
        """``_may_go_on`` on the loop: the checks there, the renewal (a round trip) on the executor's threads."""
        lease = handler.lease
        if not self._may_start(lease):
            return False
        if self._short(lease):
            await self.executor.offload(self._renew, lease)
        return True

    async def arun(self) -> None:
        """The slot's loop: ``Processor.run``'s, its blocking steps offloaded."""
        self.wake.loop, self.wake.event = asyncio.get_running_loop(), asyncio.Event()
        pool = self.pool
        assert pool is not None
        offload = self.executor.offload
        try:
            while not self.stop.is_set():
                try:
                    await self._astep(pool)
                    if self.errors_in_a_row:
                        self.runtime.events.redis_answered()
                    self.errors_in_a_row = 0
                except LeaseRefused as exc:
                    await offload(self._refused, exc)
                except REDIS_ERRORS as exc:
                    if await self._asleep(self._outage_delay(exc)):
                        self.errors_in_a_row = 0
            await offload(self._pool_stop, pool)
        except StopProcess as exc:
            self.on_fatal(exc.cause, True)
        except BaseException as exc:  # a bug outside any perform: the process must stop
            log.exception("async slot %d crashed", self.number)
            self.on_fatal(exc, False)
        finally:
            self._ended()

    async def _astep(self, pool: ShardPool) -> None:
        got = await self.executor.offload(self._take_ready, pool)
        if isinstance(got, Wait):
            if got.seconds is None:
                await self._asleep(TURN_POLL)
            else:
                self.polled = not await self._idle(got.seconds)
        elif got is not None:
            if self.polled:
                # Work found by looking, not by news (it came due by time): more may be due, a sleeping slot
                # looks too, and so on while slots find some. News rings a slot of its own.
                self.executor.ring(self.queue_name)
                self.polled = False
            ack = await self._aperform(got)
            if ack is not None:
                self._pool_performed(pool, got.entry, ack)  # the pending ack kept: no lock, no Redis
            else:
                await self.executor.offload(self._pool_performed, pool, got.entry, ack)

    def _take_ready(self, pool: ShardPool) -> InHand | Wait | None:
        """On an executor thread, in one hand-off: ``_pool_take``, then what ``_perform`` does before a perform
        (a lease near its deadline renewed, the batch in flight)."""
        got = self._pool_take(pool)
        if isinstance(got, InHand):
            self.uncertain = True  # from now on the batch is in processing: a lost fail() is recovered
            try:
                self._before_perform(got.handler)
            except BaseException:
                self.in_flight = None
                if got.taken.suspect:
                    self.isolation.release(self.name)
                raise
        return got

    async def _idle(self, seconds: float) -> bool:
        """No due work: one sleeping slot of the pool (the poller) looks again after ``seconds``, when work
        may come due; the others wait for the pool's bell (or the keeper's news), up to ``SIBLING_NAP``. So an
        idle pool costs one look per poll, not one per slot, and news wakes one slot, not all. Whether news
        ended the wait."""
        executor, name = self.executor, self.queue_name
        if executor.pollers.get(name) is None:
            executor.pollers[name] = self
        else:
            seconds = max(seconds, SIBLING_NAP)
        sleepers = executor.sleepers[name]
        sleepers.append(self)
        try:
            return await self._asleep(seconds)
        finally:
            with contextlib.suppress(ValueError):  # rung: taken off already
                sleepers.remove(self)
            if executor.pollers.get(name) is self:
                executor.pollers[name] = None

    async def _aperform(self, got: InHand) -> Ack | None:
        handler, taken = got.handler, got.taken
        assert isinstance(handler, AsyncShardHandler)
        try:
            ack = await handler.aperform(taken)
        finally:
            self.in_flight = None
            if taken.suspect:
                self.isolation.release(self.name)
        self.uncertain = False
        return ack

    async def _asleep(self, seconds: float) -> bool:
        """Wait ``seconds`` at most for the slot's wake; whether it came."""
        event = self.wake.event
        assert event is not None
        event.clear()
        if self.wake.is_set():
            return True
        try:
            await asyncio.wait_for(event.wait(), max(0.0, seconds))
        except asyncio.TimeoutError:
            return False
        return True
