"""One server thread: its own Redis connection, the shards the keeper gave it, its scheduler, its loop.

The loop is ack+take (one round trip), perform, repeat. Each script checks
this process's lease on the shard and renews it. The keeper gives the thread
shards and asks for them back; the thread acts on that between batches, so a
shard never changes thread or process in the middle of a batch.

A Redis error does not end the loop: the thread logs, backs off (capped) and
resumes. When the failed call was a write whose outcome is unknown (the
reply was lost, the script may have run), the thread first puts its own
in-flight batches back into the queue (fenced, so only where it still holds
the lease): nothing is lost, and at most the last batch runs again. A
refused lease means another process holds the shard now: the thread drops
it and never retries the write.

A failover may also lose writes that were answered: the old primary takes
them until it follows the new one, and READONLY then sends the thread's
calls to the new primary without an error. So once the thread's calls go to
another node, it acknowledges its last batch there and puts back whatever
its shards still hold in processing (a lost untake or ack left it there,
under a lease the thread keeps renewing), before its next take.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import log_format
from ..store import lua
from ..store.leases import Lease, LeaseRefused, fenced, renew_call, verify
from ..store.queue import Queue, Taken
from ..transport.errors import REDIS_ERRORS
from . import group_limits, schedulers
from .heads import HeadsProbe
from .holdings import Holdings, ShardOwner
from .process_isolation import close_thread_children
from .shard_handler import Ack, ShardHandler, StopProcess
from .shard_pool import LOST as POOL_LOST
from .shard_pool import Entry, ShardPool
from .suspect_batches import SuspectBatches

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ..worker import Worker

log = logging.getLogger("lowkiq.server")

# Redis being unreachable, and Redis refusing for a while (OOM, BUSY, MASTERDOWN,
# MISCONF, LOADING, READONLY: all error replies): back off and resume, never exit.
MAX_BACKOFF = 10.0

GIVE, BACK, LOST = "give", "back", "lost"


@dataclass(frozen=True, slots=True)
class InHand:
    """A batch taken from a checked-out shard, to perform."""

    entry: Entry
    handler: ShardHandler
    taken: Taken


@dataclass(frozen=True, slots=True)
class Wait:
    """No batch now: wait ``seconds`` for news, or (None) while another thread performs a suspect batch alone."""

    seconds: float | None


class Processor:
    handler_type: type[ShardHandler] = ShardHandler

    def __init__(
        self,
        number: int,
        runtime: Runtime,
        stop: threading.Event,
        on_fatal: Callable[[BaseException, bool], None],
        isolation: SuspectBatches | None = None,
        pool: ShardPool | None = None,
    ) -> None:
        self.number = number
        self.name = f"lowkiq-{number}"
        self.runtime = runtime
        self.settings = runtime.settings
        self.stop = stop
        self.on_fatal = on_fatal  # (exception, raised by a perform?)
        self.isolation = isolation or SuspectBatches()  # shared by the threads of a process
        self.holding = False  # counted by the isolation: a batch taken and not yet acknowledged
        # Set by the server once its keeper exists: who gives this thread shards, and the leases of the process.
        self.keeper: ShardOwner | None = None
        self.holdings: Holdings | None = None
        # Two connections: the wire's, held for the hot path, and one for pipelined probes.
        self.client = runtime.new_client(2)
        self.wire = lua.Wire(self.client)
        self._instances: dict[type[Worker], Worker] = {}
        self._queues: dict[type[Worker], Queue] = {}
        self.handlers: list[ShardHandler] = []
        self._heads: HeadsProbe | None = None  # the probe of the handlers' shards, made again when they change
        self.scheduler: schedulers.Scheduler | None = None
        self.inbox: deque[tuple[str, Lease, bool]] = deque()
        # (queue name, shard) of the shards served, replaced whole: read by the waker's thread
        self.serving: frozenset[tuple[str, int]] = frozenset()
        self.nudged: deque[tuple[str, int]] = deque()  # shards a push gave work, from the waker
        self.wake = threading.Event()
        self.pending: Ack | None = None
        self.in_flight: Lease | None = None  # the lease of the batch being performed now
        self.uncertain = False  # a write failed midway: its outcome is unknown
        self.recovering = False
        # The generation of the deployment the thread's calls went to (its transport's): a new one is another
        # primary, which may lack the last writes the old one answered. ``moved``: the keeper's calls went
        # to another primary (an idle thread, whose reads the old primary may still answer, learns it so).
        self.generation = 0
        self.moved = False
        self.errors_in_a_row = 0
        # What the scheduler compares the shards' perform_in (Redis time) with: Redis's clock, estimated
        # from the keeper's beats; never this host's, which may be seconds off.
        self.due_clock = runtime.due_clock()
        # With no splitter (the default) the threads share the process's shards: see lowkiq.server.shard_pool.
        self.pool = pool
        self.current: Entry | None = None  # the pooled shard this thread took its batch from
        self.leaving: list[Entry] = []  # pooled shards given up, checked in, to release
        self.pending_entry: Entry | None = None  # the pooled shard whose batch waits for its ack
        self._pooled_handlers: dict[int, ShardHandler] = {}  # id(lease) -> this thread's handler of it
        if pool is not None:
            pool.wakes.append(self.wake)
        self.thread = threading.Thread(target=self.run, name=self.name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def join(self, timeout: float | None = None) -> None:
        self.thread.join(timeout)

    # -- messages from the keeper (its thread) -----------------------------

    def give(self, lease: Lease) -> None:
        self.inbox.append((GIVE, lease, False))
        self.wake.set()

    def hand_back(self, lease: Lease, *, release: bool) -> None:
        """Stop serving the shard after the current batch; release its lease, or return it to the keeper."""
        self.inbox.append((BACK, lease, release))
        self.wake.set()

    def nudge(self, queue_name: str, shard: int) -> None:
        """A push gave this shard work (the waker's thread): look at it now if this thread serves it."""
        if self.pool is not None:
            if self.number == 0:  # the waker tells every thread; the pool needs it once
                self.pool.nudge(queue_name, shard)
            return
        if (queue_name, shard) in self.serving:
            self.nudged.append((queue_name, shard))
            self.wake.set()

    def drop_lost(self, lease: Lease) -> None:
        if self.pool is not None:
            self.pool.take_back(lease, POOL_LOST)
            return
        self.inbox.append((LOST, lease, False))
        self.wake.set()

    def primary_moved(self) -> None:
        """The keeper's calls go to another primary now (the keeper's thread): this thread looks again before
        its next step, and puts back what its shards hold in processing there (see ``_followed``)."""
        self.moved = True
        self.wire.transport.suspect()
        self.wake.set()

    # -- the loop ----------------------------------------------------------

    def run(self) -> None:
        log.info("thread %d started", self.number)
        try:
            while not self.stop.is_set():
                try:
                    self.step()
                    if self.errors_in_a_row:
                        self.runtime.events.redis_answered()
                    self.errors_in_a_row = 0
                except LeaseRefused as exc:
                    self._refused(exc)
                except REDIS_ERRORS as exc:
                    self._outage(exc)
            if self.pool is not None:
                self._pool_stop(self.pool)
            else:
                self._hand_everything_back()
        except StopProcess as exc:
            self.on_fatal(exc.cause, True)
        except BaseException as exc:  # a bug outside any perform: the process must stop
            log.exception("thread %d crashed", self.number)
            self.on_fatal(exc, False)
        finally:
            self._ended()
            close_thread_children()  # this thread's child processes (isolation = "process") exit
            log.info("thread %d stopped", self.number)

    def _ended(self) -> None:
        """The loop is over: let other threads' suspect batches go first, close the connections."""
        self._let_go()
        self.isolation.release(self.name)
        self.wire.close(disconnect=True)
        self.client.close()

    def step(self) -> None:
        if self.pool is not None:
            self._pool_step(self.pool)
            return
        if self.wake.is_set():
            self.wake.clear()
        if self.moved or self.wire.transport.generation != self.generation:
            self._followed()
        # Recover before handing any shard on: a batch whose write went unanswered may sit in the
        # processing area of a shard the keeper moves to another thread, which would never restore it.
        if self.recovering:
            restored = self._recover()
            log.warning("thread %d: Redis is back; %d jobs this thread had in flight went back to the queue",
                        self.number, restored)
        if self.inbox:
            self._read_inbox()
        if self.holding and self.pending is None:
            self._let_go()
        if self.isolation.claimed_by_other(self.name):
            # Another thread performs a suspect batch alone: acknowledge, hold nothing, wait.
            self._flush()
            self._let_go()
            self.isolation.wait_turn(self.name, self.stop)
            return
        if not self.handlers:
            self.wake.wait(self.settings.poll_interval)
            return
        assert self.scheduler is not None
        if self.nudged:
            self._read_nudges()
        index = self.scheduler.next_shard()
        if index is None:
            self._flush()
            self._let_go()
            self.wake.wait(self.scheduler.idle_for())
            return
        handler = self.handlers[index]
        if not self.holding:
            if not self.isolation.hold(self.name, self.stop):
                return
            self.holding = True
        self.uncertain = True
        taken = handler.take(self.pending)
        self.pending = None
        self.uncertain = False
        self.scheduler.taken(index, len(taken.jobs), taken.next_perform_in)
        if not taken.jobs:
            self._let_go()
            return
        if taken.suspect and not self._alone(handler, [job.id for job in taken.jobs]):
            self.scheduler.due(index, self.due_clock())  # back at the head of its shard
            return
        ack = self._perform(handler, taken)
        if ack is None:
            self.scheduler.due(index, self.due_clock())
        self.pending = ack

    def _perform(self, handler: ShardHandler, taken: Taken) -> Ack | None:
        """Perform a batch in hand: its pending ack, or None when it failed (written as failed)."""
        self.uncertain = True  # from now on the batch is in processing: a lost fail() is recovered
        try:
            # Within the try: a renewal that fails must still end the crash isolation's claim, or
            # every other thread of the process would wait for it. A child process to start comes first:
            # that takes a while, and the lease check must be the last step before the hand-off. A lease
            # whose local deadline passed meanwhile (this process was paused since its take) is renewed
            # there, or found lost: its batch is then neither performed nor written (the new owner restores it).
            self._before_perform(handler)
            ack = handler.perform(taken)
        finally:
            self.in_flight = None
            if taken.suspect:
                self.isolation.release(self.name)
        self.uncertain = False
        return ack

    def _before_perform(self, handler: ShardHandler) -> None:
        handler.prepare()
        self._renew_if_short(handler.lease)
        self.in_flight = handler.lease

    def _read_nudges(self) -> None:
        assert self.scheduler is not None
        now = self.due_clock()
        while self.nudged:
            queue_name, shard = self.nudged.popleft()
            for index, handler in enumerate(self.handlers):
                if handler.shard.index == shard and handler.lease.keys.queue_name == queue_name:
                    self.scheduler.due(index, now)

    def _alone(self, handler: ShardHandler, ids: list[str]) -> bool:
        """A suspect batch in hand: wait until it is the only batch in processing in this process.
        When another thread is already performing one alone (or the process stops), the batch goes
        back to its place in the queue and is taken again later."""
        worker = handler.lease.shard.worker
        limit = worker.time_limit
        bound = None if limit is None else limit + (worker.time_limit_grace if worker.isolation == "process" else 0)
        suspect = {"worker": worker.__name__, "shard": handler.shard.index, "ids": ids[:20]}
        if self.isolation.claim(self.name, self.stop, bound, suspect):
            log.info("thread %d: shard %s: performing a batch alone: it was in flight when a server died (the "
                     "other threads wait for it %.0f s at most)", self.number, handler.shard,
                     self.isolation.suspect_wait if bound is None else bound, extra=_shard_fields(handler.lease))
            return True
        self.uncertain = True
        with fenced():
            self.wire.call("restore", handler.lease.keys, (handler.lease.grant,))
        self.uncertain = False
        self._let_go()
        return False

    def _let_go(self) -> None:
        if self.holding:
            self.holding = False
            self.isolation.let_go()

    def serves(self, lease: Lease) -> bool:
        return any(h.lease is lease for h in self.handlers)

    def probe(self) -> list[float | None]:
        """Every served shard's earliest perform_in, one pipelined round trip of plain reads. A shard that
        holds grouped jobs answers its next group's place in the round robin instead (docs/fairness.md)."""
        leases = [h.lease for h in self.handlers]
        probe = self._heads
        if probe is None or len(probe.leases) != len(leases) or any(a is not b for a, b in zip(probe.leases, leases)):
            self._heads = probe = HeadsProbe(leases)
        return probe.read(self.client)

    # -- shards coming and going -------------------------------------------

    def _read_inbox(self) -> None:
        changed = False
        while self.inbox:
            kind, lease, release = self.inbox[0]
            if kind == GIVE:
                if lease.lost is None and not self.serves(lease):
                    self.handlers.append(self._handler(lease))
                    changed = True
            elif kind == BACK:
                changed |= self._give_back(lease, release)
            elif kind == LOST:
                changed |= self._forget(lease)
            self.inbox.popleft()  # only once handled: a Redis error leaves the message for the retry
        if changed:
            self._reschedule()

    def _handler(self, lease: Lease) -> ShardHandler:
        lease.check = self._check_lease  # lowkiq.context().lease_lost asks Redis through this thread
        w = lease.shard.worker
        if w not in self._instances:
            # One instance per thread: a worker's own state is never shared between threads.
            self._instances[w] = w()
            self._queues[w] = self.runtime.queue(w, self.client)
        handler = self.handler_type(lease, self._instances[w], self._queues[w], self.settings, self.wire,
                                    thread=self.name, clock=self.runtime.clock, events=self.runtime.events)
        handler.between = self._may_go_on
        return handler

    def _may_go_on(self, handler: ShardHandler) -> bool:
        """Between two ids taken ahead (docs/take-ahead.md): whether the next may start, with its lease renewed
        when its budget is low."""
        if not self._may_start(handler.lease):
            return False
        self._renew_if_short(handler.lease)
        return True

    def _may_start(self, lease: Lease) -> bool:
        """Whether the next id taken ahead may start, Redis aside: not when the process stops, or gives the shard
        up or lost it meanwhile (the ids not started go back to the queue then, before the shard is released)."""
        if self.stop.is_set() or lease.lost is not None:
            return False
        if self.pool is not None:
            entry = self.current
            if entry is not None and entry.then is not None:
                return False
        elif any(kind != GIVE and asked is lease for kind, asked, _ in tuple(self.inbox)):
            return False
        return True

    def _give_back(self, lease: Lease, release: bool) -> bool:
        handler = next((h for h in self.handlers if h.lease is lease), None)
        if handler is None:
            # Asked again while busy (the keeper asks every beat): handed back already, or lost meanwhile.
            return False
        acked = self.pending.ids if self.pending is not None and self.pending.handler.lease is lease else []
        if not release and self.keeper is not None and not self.keeper.wants(lease):
            release = True  # a move to another thread, but meanwhile the process gave the shard up
        if release:
            restored = self._holdings.release(self.wire, [lease], {id(lease): acked})
            if restored:
                log.warning("thread %d: shard %s released with %d jobs put back into the queue",
                            self.number, lease.shard, restored, extra=_shard_fields(lease, restored=restored))
        elif acked:
            handler.ack(acked)
        if acked:
            self.pending = None
        self.handlers.remove(handler)
        if self.keeper is not None:
            self.keeper.returned(lease, released=release)
        return True

    def _forget(self, lease: Lease) -> bool:
        handler = next((h for h in self.handlers if h.lease is lease), None)
        if self.pending is not None and self.pending.handler.lease is lease:
            log.warning("thread %d: ids %s of shard %s were performed after its lease was lost; the new owner "
                        "runs them again", self.number, self.pending.ids[:20], lease.shard,
                        extra=_shard_fields(lease, ids=list(self.pending.ids)))
            self.pending = None
        group_limits.forget(lease)  # its permits end with the lease in Redis
        if handler is None:
            return False
        self.handlers.remove(handler)
        return True

    def _reschedule(self) -> None:
        context = schedulers.SchedulerContext([h.shard for h in self.handlers], self.settings.poll_interval,
                                              self.probe, self.due_clock)
        self.scheduler = schedulers.build(self.settings, context) if self.handlers else None
        self.serving = frozenset((h.lease.keys.queue_name, h.shard.index) for h in self.handlers)
        if not self.stop.is_set():
            log.info("thread %d serves shards %s", self.number, " ".join(str(h.shard) for h in self.handlers) or "(none)",
                     extra=log_format.fields(shards=[str(h.shard) for h in self.handlers]))

    def _hand_everything_back(self) -> None:
        """Stopping: acknowledge the last batch and release every shard, in one round trip."""
        self._read_inbox_for_stop()
        if not self.handlers:
            return
        held = [h.lease for h in self.handlers if h.lease.lost is None]
        acked = {id(self.pending.handler.lease): self.pending.ids} if self.pending is not None else {}
        try:
            restored = self._holdings.release(self.wire, held, acked)
            if restored:
                log.warning("thread %d: %d jobs left in processing went back to the queue", self.number, restored)
        except REDIS_ERRORS as exc:
            log.warning("thread %d: could not release its shards (%s); they are taken over when their leases "
                        "expire, and the last batch runs again", self.number, exc)
            return
        self.pending = None
        if self.keeper is not None:
            for lease in held:
                self.keeper.returned(lease, released=True)
        self.handlers = []

    def _read_inbox_for_stop(self) -> None:
        # Shards given but never served go back to the keeper, which releases what is left.
        while self.inbox:
            kind, lease, _ = self.inbox.popleft()
            if kind == LOST:
                self._forget(lease)


    # -- the pool (no splitter): see lowkiq.server.shard_pool ------------------------------------------------

    def _pool_step(self, pool: ShardPool) -> None:
        got = self._pool_take(pool)
        if isinstance(got, Wait):
            if got.seconds is None:
                self.isolation.wait_turn(self.name, self.stop)
            else:
                pool.sleep(self.wake, got.seconds)
        elif got is not None:
            self._pool_performed(pool, got.entry, self._perform(got.handler, got.taken))

    def _pool_take(self, pool: ShardPool) -> InHand | Wait | None:
        """The step up to a batch in hand (checked out, taken, alone if suspect): the batch, what to wait for
        when there is none (``Wait``), or None to step again. Shared by the threads and the async executor's
        slots, which perform the batch on the event loop."""
        if self.wake.is_set():  # Event.clear takes a lock: not on every batch
            self.wake.clear()
        if self.leaving:
            self._pool_finish_leaving(pool)
        if self.moved or self.wire.transport.generation != self.generation:
            self._pool_followed(pool)
        if self.recovering:
            restored = self._pool_recover(pool)
            log.warning("thread %d: Redis is back; %d jobs this thread had in flight went back to the queue",
                        self.number, restored)
        if self.isolation.claimed_by_other(self.name):
            # Another thread performs a suspect batch alone: acknowledge, hold nothing, wait (a bounded time).
            self._pool_flush(pool)
            self._let_go()
            return Wait(None)
        entry = pool.checkout(self.name, self.pending_entry)
        if entry is None:
            self._pool_flush(pool)
            self._let_go()
            return Wait(pool.idle_for())
        self.current = entry
        handler = self._pooled(entry.lease)
        if entry.stale:
            # Only the thread that has a shard checked out may touch its processing area.
            self._pool_flush(pool, keep=entry)
            self.uncertain = True
            _, lost = self._holdings.restore(self.wire, [entry.lease], f"thread {self.number}")
            self.uncertain = False
            entry.stale = False
            if lost:
                self._pool_done(pool, entry, lost=True)
                return None
        if not self.holding:
            if not self.isolation.hold(self.name, self.stop):
                self._pool_done(pool, entry)
                return None
            self.holding = True
        self.uncertain = True
        taken = handler.take(self.pending)
        previous, self.pending, self.pending_entry = self.pending_entry, None, None
        self.uncertain = False
        # previous's batch is acknowledged: checked in, another thread may take there now
        then = pool.took(entry, len(taken.jobs), taken.next_perform_in, previous)
        if previous is not None and previous is not entry:
            self._pool_left(pool, previous, then)
        if not taken.jobs:
            self._let_go()
            self._pool_done(pool, entry)
            return None
        if taken.suspect and not self._alone(handler, [job.id for job in taken.jobs]):
            pool.due(entry, self.due_clock())  # back at the head of its shard
            self._pool_done(pool, entry)
            return None
        return InHand(entry, handler, taken)

    def _pool_performed(self, pool: ShardPool, entry: Entry, ack: Ack | None) -> None:
        if ack is None:
            pool.due(entry, self.due_clock())
            self._pool_done(pool, entry)
        else:
            # The shard stays checked out until the ack rides on this thread's next take (or is flushed):
            # a shard never has two batches in processing.
            self.pending, self.pending_entry = ack, entry
            self.current = None

    def _pooled(self, lease: Lease) -> ShardHandler:
        handler = self._pooled_handlers.get(id(lease))
        if handler is None or handler.lease is not lease:
            handler = self._handler(lease)
            self._pooled_handlers[id(lease)] = handler
        lease.check = self._check_lease  # lowkiq.context().lease_lost asks Redis through the performing thread
        return handler

    def _pool_flush(self, pool: ShardPool, keep: Entry | None = None) -> None:
        """Acknowledge the pending batch and check its shard in (unless it is ``keep``, taken again now)."""
        entry = self.pending_entry
        self._flush()
        self.pending_entry = None
        if entry is not None and entry is not keep:
            self._pool_done(pool, entry)

    def _pool_done(self, pool: ShardPool, entry: Entry, *, lost: bool = False) -> None:
        """Check the shard in; release it here when the process gave it up meanwhile."""
        if self.current is entry:
            self.current = None
        if self.pending_entry is entry:
            self.pending_entry = None
        if lost:
            pool.mark(entry, POOL_LOST)
        self._pool_left(pool, entry, pool.checkin(entry))

    def _pool_left(self, pool: ShardPool, entry: Entry, then: str | None) -> None:
        """After a checkin: release or forget the shard when the process gave it up or lost it meanwhile."""
        if then is None:
            return
        self._pooled_handlers.pop(id(entry.lease), None)
        if then == POOL_LOST:
            group_limits.forget(entry.lease)  # its permits end with the lease in Redis
            pool.drop(entry)
            return
        self.leaving.append(entry)
        self._pool_finish_leaving(pool)

    def _pool_finish_leaving(self, pool: ShardPool) -> None:
        """Release the shards this thread checked in after the process gave them up (its last batch there is
        acknowledged); one that meets a Redis error is released at the next step."""
        while self.leaving:
            entry = self.leaving[0]
            lease = entry.lease
            if lease.lost is None:
                restored = self._holdings.release(self.wire, [lease], {})
                if restored:
                    log.warning("thread %d: shard %s released with %d jobs put back into the queue",
                                self.number, lease.shard, restored, extra=_shard_fields(lease, restored=restored))
            self.leaving.pop(0)
            pool.drop(entry)
            if self.keeper is not None:
                self.keeper.returned(lease, released=True)

    def _pool_owned(self) -> list[Entry]:
        return [e for e in (self.current, self.pending_entry) if e is not None]

    def _pool_refused(self, pool: ShardPool, exc: LeaseRefused) -> None:
        entry = next((e for e in self._pool_owned() if e.lease.keys.lease_hash == exc.lease_key), None)
        if entry is None:
            log.warning("thread %d: a lease was refused (%s)", self.number, exc)
        else:
            self._holdings.lost(entry.lease, exc.reason, f"thread {self.number}",
                                "another process serves it now, and runs again whatever this thread had in flight there")
            if self.pending is not None and self.pending.handler.lease is entry.lease:
                self.pending = None
            self._pool_done(pool, entry, lost=True)
        if self.uncertain:
            # A pipelined ack + take: the take on the other shard may have happened.
            self.recovering = True
            self.pending = None
            self.uncertain = False

    def _pool_recover(self, pool: ShardPool) -> int:
        """Put back what the shards this thread has checked out hold in processing, and check them in."""
        owned = self._pool_owned()
        self.pending = None
        restored, lost = self._holdings.restore(self.wire, [e.lease for e in owned], f"thread {self.number}")
        for entry in owned:
            self._pool_done(pool, entry, lost=entry.lease in lost)
        self.recovering = False
        pool.forget_heads()
        return restored

    def _pool_followed(self, pool: ShardPool) -> None:
        """The thread's calls go to another node now (see ``_followed``): every pooled shard is put back at its
        next checkout, by the thread that checks it out; this thread acknowledges its last batch there."""
        told, self.moved = self.moved, False
        first = self.generation == 0 and not told
        self.generation = self.wire.transport.generation
        if first:
            return
        pool.followed()
        self.recovering = True  # the flush below goes to the new primary; if it fails, the step after does it
        self._pool_flush(pool)
        self.recovering = bool(self._pool_owned())
        if self.recovering:
            self._pool_recover(pool)

    def _pool_stop(self, pool: ShardPool) -> None:
        """Stopping: acknowledge the last batch and check the shard in; the keeper releases what is left."""
        try:
            self._pool_flush(pool)
            for entry in self._pool_owned():
                self._pool_done(pool, entry)
            self._pool_finish_leaving(pool)
        except REDIS_ERRORS as exc:
            log.warning("thread %d: could not acknowledge its last batch (%s); it runs again after the takeover",
                        self.number, exc)

    # -- leases and failures -------------------------------------------------

    def _renew_if_short(self, lease: Lease) -> None:
        if self._short(lease):
            self._renew(lease)

    def _short(self, lease: Lease) -> bool:
        """Whether less than ``min_perform_budget`` is left of the lease: a perform starts only with that much."""
        return lease.remaining() < self.settings.min_perform_budget

    def _renew(self, lease: Lease) -> None:
        sent_at = time.monotonic()
        with fenced():
            group_limits.extend(self.wire, [lease])  # a permit must not end before its lease (docs/fairness.md)
            self.wire.call(*renew_call(lease))
        lease.renewed(sent_at)

    def _check_lease(self, lease: Lease) -> str | None:
        """Asked by a perform past its lease's local deadline (``lowkiq.context().lease_lost``), on this
        thread: whether Redis still holds the grant. A lost one is dropped as a refused renewal would be."""
        reason = verify(self.client, lease)
        if reason is not None and self._holdings.lost(lease, reason, f"thread {self.number}",
                                                      "found during a perform; another process may run this batch again"):
            self.drop_lost(lease)
        return reason

    def _refused(self, exc: LeaseRefused) -> None:
        if self.pool is not None:
            self._pool_refused(self.pool, exc)
            return
        handler = next((h for h in self.handlers if h.lease.keys.lease_hash == exc.lease_key), None)
        if handler is None:
            log.warning("thread %d: a lease was refused (%s)", self.number, exc)
        else:
            lease = handler.lease
            self._holdings.lost(lease, exc.reason, f"thread {self.number}",
                                "another process serves it now, and runs again whatever this thread had in flight there")
            if self._forget(lease):
                self._reschedule()
        if self.uncertain:
            # A pipelined ack + take: the take on another shard may have happened.
            self.recovering = True
            self.pending = None
            self.uncertain = False

    def _outage(self, exc: BaseException) -> None:
        # The keeper's news ends the wait (a shard given, lost or asked back, Redis answering its beat again,
        # or the process stopping): Redis answers, so retry now and back off from the start if need be. Else
        # a thread would sleep out its back-off (up to MAX_BACKOFF) on shards its keeper holds and renews.
        if self.wake.wait(self._outage_delay(exc)):
            self.errors_in_a_row = 0

    def _outage_delay(self, exc: BaseException) -> float:
        """Count and log a Redis error; how long to back off before the next step."""
        self.errors_in_a_row += 1
        self.runtime.events.outage(exc)
        if self.uncertain:
            # The reply of a write was lost: whatever it did, the processing areas hold the truth.
            self.recovering = True
            self.pending = None
            self.uncertain = False
        delay: float = min(MAX_BACKOFF, self.settings.poll_interval * 2 ** min(self.errors_in_a_row - 1, 10))
        log.warning("thread %d: Redis error (%s: %s); retrying in %.1f s", self.number, type(exc).__name__, exc, delay,
                    extra=log_format.fields(error_class=type(exc).__name__, error=str(exc), retry_in=delay))
        return delay

    def _recover(self) -> int:
        """Put back what the thread's shards hold in processing; how many ids went back."""
        restored, lost = self._holdings.restore(self.wire, [h.lease for h in self.handlers], f"thread {self.number}")
        for lease in lost:
            self._forget(lease)
        self.recovering = False
        self._reschedule()
        return restored

    def _followed(self) -> None:
        """The thread's calls go to another node now: a failover, followed maybe without any error (READONLY is
        followed), or learnt from the keeper. The old primary answered writes until it followed the new one, and
        lost them then: an untake or an ack left ids in processing, which no take reaches while this thread
        holds the lease. Between batches nothing the thread holds in processing is in flight: it acknowledges
        its last batch and puts back the rest, on the new primary."""
        told, self.moved = self.moved, False
        first = self.generation == 0 and not told
        self.generation = self.wire.transport.generation
        if first or not self.handlers:
            return  # nothing was written before (the first calls find the deployment)
        self.recovering = True  # done below; if a call fails on the way, at the next step
        self._flush()
        restored = self._recover()
        self.generation = self.wire.transport.generation  # where the restore went
        # Only a failover leaves something behind (a moved slot takes its keys along): a warning then.
        log.log(logging.WARNING if restored else logging.INFO,
                "thread %d: follows a new Redis primary or slot map; %d jobs its shards held in processing went "
                "back to the queue (a failover may lose the last writes the old primary answered)", self.number,
                restored, extra=log_format.fields(restored=restored))

    @property
    def _holdings(self) -> Holdings:
        if self.holdings is None:
            raise RuntimeError("a server thread serves shards only once the server gave it the process's holdings")
        return self.holdings

    def _flush(self) -> None:
        if self.pending is not None:
            self.uncertain = True
            self.pending.handler.ack(self.pending.ids)
            self.pending = None
            self.uncertain = False


def _shard_fields(lease: Lease, **more: Any) -> dict[str, Any]:
    return log_format.fields(worker=lease.shard.worker.__name__, shard=lease.shard.index, **more)
