"""Async workers' batches on one event loop per server process (docs/async.md).

Each async worker's held shards are a ``ShardPool`` of their own, served by ``Worker.concurrency`` slots:
a slot (lowkiq.server.async_slot) is a task on the loop that does what a server thread does (check a shard
out, take a batch with the ack of its previous one, perform, check in), with the thread's own state and
code (``Processor``). Only the
perform runs on the loop; every Redis step of a slot (the same fenced scripts, through the project's
transport) and every wait on a lock runs on a few threads of the executor (``offload``). So the scripts,
their fencing, the failover and outage handling stay the ones the threads use, on standalone Redis,
Sentinel and Cluster alike, with no second Redis client to keep in step; a slot's connection (its ``Wire``)
is used by one thread at a time, as its steps follow each other.

A loop blocked by sync code for more than ``BLOCKED_AFTER`` seconds is logged by a watcher thread, naming the
batch (worker, shard) whose task was running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from typing import TYPE_CHECKING, Any

from ..store.leases import Lease
from .async_slot import AsyncSlot
from .shard_pool import ShardPool
from .suspect_batches import SuspectBatches

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ..worker import Worker
    from .assignment import ShardId

log = logging.getLogger("lowkiq.server")

BLOCKED_AFTER = 1.0  # seconds without the loop's beat: sync code blocks it
BEAT = 0.1


class Bell(threading.Event):
    """A pool's news for its slots (a shard added, a push to one, a shard checked in with due work): set from
    any thread, it wakes one sleeping slot of the pool on the loop, not every slot."""

    def __init__(self, executor: AsyncExecutor, queue_name: str) -> None:
        super().__init__()
        self.executor = executor
        self.queue_name = queue_name

    def set(self) -> None:
        loop = self.executor.loop
        if loop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is closed: the slots are gone
                loop.call_soon_threadsafe(self.executor.ring, self.queue_name)


class AsyncExecutor:
    """The event loop thread of a server process, its slots, and the threads its slots' Redis steps run on."""

    def __init__(self, runtime: Runtime, workers: Sequence[type[Worker]], stop: threading.Event,
                 on_fatal: Callable[[BaseException, bool], None], *, first_number: int = 0) -> None:
        s = runtime.settings
        # Its own: a suspect batch of an async worker runs alone among the process's async batches.
        self.isolation = SuspectBatches(suspect_wait=s.suspect_wait, waits=False)
        self.pools = {w.queue_name: ShardPool(s, runtime.new_client(2), runtime.due_clock()) for w in workers}
        # On the loop only: each pool's sleeping slots (the last to sleep is rung first), and its poller.
        self.sleepers: dict[str, list[AsyncSlot]] = {name: [] for name in self.pools}
        self.pollers: dict[str, AsyncSlot | None] = {name: None for name in self.pools}
        for name, pool in self.pools.items():
            bell = Bell(self, name)
            pool.wakes.append(bell)
            pool.waiting(bell)  # for good: a check-in with due work rings it
        self.slots: list[AsyncSlot] = []
        for w in workers:
            for k in range(w.concurrency):
                self.slots.append(AsyncSlot(first_number + len(self.slots), runtime, stop, on_fatal, self.isolation,
                                            self.pools[w.queue_name], self, w.queue_name, first=k == 0))
        self.threads = ThreadPoolExecutor(max(2, min(16, len(self.slots) // 4)), thread_name_prefix="lowkiq-async-io")
        self.loop: asyncio.AbstractEventLoop | None = None
        self.beat_at = time.monotonic()
        self.thread = threading.Thread(target=self._main, name="lowkiq-async", daemon=True)
        self.watcher = threading.Thread(target=self._watch, name="lowkiq-async-watch", daemon=True)

    def start(self) -> None:
        self.thread.start()
        self.watcher.start()

    def offload(self, fn: Callable[..., Any], *args: Any) -> asyncio.Future[Any]:
        """Run a blocking call on the executor's threads, from the loop."""
        assert self.loop is not None
        return self.loop.run_in_executor(self.threads, partial(fn, *args))

    def ring(self, queue_name: str) -> None:
        """On the loop: wake one sleeping slot of the pool, if any sleeps."""
        sleepers = self.sleepers[queue_name]
        if sleepers:
            sleepers.pop().wake.set()

    def wake_all(self) -> None:
        for slot in self.slots:
            slot.wake.set()

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)

    def alive(self) -> bool:
        return self.thread.is_alive()

    def in_flight(self) -> list[Lease]:
        return [slot.in_flight for slot in self.slots if slot.in_flight is not None]

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self.loop = loop
        try:
            loop.run_until_complete(self._serve())
        finally:
            self.threads.shutdown(wait=False)
            loop.close()

    async def _serve(self) -> None:
        log.info("async executor: %d slots for %s", len(self.slots), ", ".join(
            f"{name} (concurrency {sum(1 for s in self.slots if s.pool is pool)})" for name, pool in self.pools.items()))
        beat = asyncio.ensure_future(self._beat())
        try:
            await asyncio.gather(*(slot.arun() for slot in self.slots))
        finally:
            beat.cancel()

    async def _beat(self) -> None:
        while True:
            self.beat_at = time.monotonic()
            await asyncio.sleep(BEAT)

    def _watch(self) -> None:
        """Report a loop that sync code blocks: every other batch of the process waits meanwhile."""
        reported = False
        while self.thread.is_alive():
            time.sleep(BEAT)
            lag = time.monotonic() - self.beat_at
            if lag <= BLOCKED_AFTER:
                reported = False
                continue
            if reported or self.loop is None:
                continue
            reported = True
            task = asyncio.current_task(self.loop) if self.loop.is_running() else None
            what = task.get_name() if task is not None else "lowkiq's own code"
            log.warning("async executor: the event loop has been blocked for %.1f s by sync code in %s: an async "
                        "perform must await, not block (run blocking calls with asyncio.to_thread)", lag,
                        what.removeprefix("lowkiq "))


class Pools:
    """The keeper's side of a process's pools: the threads' one, and each async worker's own."""

    def __init__(self, threads: ShardPool, own: Mapping[str, ShardPool]) -> None:
        self.threads = threads
        self.own = own

    def _of(self, lease: Lease) -> ShardPool:
        return self.own.get(lease.keys.queue_name, self.threads)

    def add(self, lease: Lease) -> None:
        self._of(lease).add(lease)

    def take_back(self, lease: Lease, then: str) -> bool | None:
        return self._of(lease).take_back(lease, then)

    def followed(self) -> None:
        for pool in (self.threads, *self.own.values()):
            pool.followed()

    def shards(self) -> list[ShardId] | None:
        out: list[ShardId] = []
        for pool in (self.threads, *self.own.values()):
            shards = pool.shards()
            if shards is None:
                return None
            out.extend(shards)
        return out


def split_workers(workers: Sequence[type[Worker]]) -> tuple[list[type[Worker]], list[type[Worker]]]:
    """(sync workers, async workers)."""
    from ..worker import is_async

    return [w for w in workers if not is_async(w)], [w for w in workers if is_async(w)]

