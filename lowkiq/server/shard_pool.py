"""The shards a server process holds, as a pool its threads check out one at a time.

With no splitter configured (the default), a thread is not tied to shards: a free thread checks
out the held shard with due work that the scheduler picks among those no other thread has checked
out, takes and performs one batch there, and checks the shard in once that batch is acknowledged
(the ack rides on the thread's next take, so a shard stays checked out until then: a shard never
has two batches in processing). A perform that never returns therefore keeps one shard only; every
other held shard with due work is served while any thread is free.

The keeper adds the shards it acquires, and takes back the ones the process should no longer hold:
a shard no thread has checked out is released by the keeper at once, whatever the threads are doing;
one checked out is released by its thread when it checks it in. A lease found lost is dropped the
same way. After a failover every shard is marked *stale*: the next thread to check one out first
puts back what its processing area holds (a lost ack or untake), as only that thread may touch it.

Probes of the shards' heads (one pipelined round trip of plain reads, at most every poll interval)
go through the pool's own connection, under its lock; the keeper waits for that lock a bounded time,
so a slow Redis never holds its beats back.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..store.leases import Lease
from . import schedulers
from .assignment import ShardId
from .heads import HeadsProbe
from .holdings import shard_id

if TYPE_CHECKING:
    from ..config import Settings
    from ..transport import Transport

# How long the keeper waits for the pool's lock before leaving a hand-over to its next beat.
KEEPER_PATIENCE = 0.5

RELEASE, LOST = "release", "lost"


@dataclass(eq=False)
class Entry:
    """A held shard in the pool."""

    lease: Lease
    index: int = 0  # its place in the scheduler's list of shards
    holder: str | None = None  # the thread that has it checked out
    then: str | None = None  # RELEASE or LOST: asked while checked out, done when checked in
    stale: bool = False  # put back what its processing area holds before the next take
    # What its holder's last take found (ids, next due), told to the scheduler at the next locked step on
    # this shard: while checked out no other thread looks at its head, so one lock a batch is enough.
    report: tuple[int, float | None] | None = None

    @property
    def shard(self) -> ShardId:
        return shard_id(self.lease)


class ShardPool:
    def __init__(self, settings: Settings, client: Transport, due_clock: Callable[[], float]) -> None:
        self.settings = settings
        self.client = client  # the pool's own connection, for probes (used under the lock only)
        self.due_clock = due_clock
        self.lock = threading.Lock()
        self.entries: list[Entry] = []
        self.scheduler: schedulers.Scheduler | None = None
        self.wakes: list[threading.Event] = []  # every thread's: the keeper's news wakes them all
        self.idle: set[threading.Event] = set()  # the threads waiting for work: a shard checked in wakes them
        self.busy: set[int] = set()  # indexes of the shards checked out now
        self.arrivals: deque[Lease] = deque()  # added by the keeper, pooled under the lock by the next caller
        self.heads = HeadsProbe([])  # the probe of the pooled shards, rebuilt with them

    # -- the keeper's side ------------------------------------------------------------------------

    def add(self, lease: Lease) -> None:
        """A shard acquired: in the pool at the next checkout (the keeper never waits for the pool's lock)."""
        self.arrivals.append(lease)
        self._wake()

    def take_back(self, lease: Lease, then: str) -> bool | None:
        """The process gives the shard up (``RELEASE``) or lost it (``LOST``). True: it was free and is out
        of the pool now (the caller releases it); False: a thread has it and does it when checking it in;
        None: the lock was busy, ask again later."""
        if not self.lock.acquire(timeout=KEEPER_PATIENCE):
            return None
        try:
            self._arrive()
            entry = self._entry(lease)
            if entry is None:
                return True  # never pooled, or its thread's release failed: the caller's to release
            if entry.holder is None:
                self._remove(entry)
                return True
            if entry.then != LOST:
                entry.then = then
            return False
        finally:
            self.lock.release()


    def followed(self) -> None:
        """Calls go to another primary now: every shard's processing area may hold what a lost write left, to be
        put back by the next thread that checks it out."""
        with self.lock:
            for entry in self.entries:
                entry.stale = True

    # -- the threads' side ------------------------------------------------------------------------

    def checkout(self, thread: str, keep: Entry | None) -> Entry | None:
        """The free shard (or ``keep``, which this thread has checked out already) the scheduler picks as
        next, checked out to ``thread``; None when no free shard has due work."""
        if keep is not None and self._only_choice(keep):
            return keep
        with self.lock:
            self._arrive()
            scheduler = self.scheduler
            if scheduler is None:
                return None
            busy = self.busy
            if keep is not None:
                self._report(keep)
                busy.discard(keep.index)
            scheduler.busy = busy
            try:
                if len(busy) == len(self.entries):
                    return None
                index = scheduler.next_shard()
            finally:
                if keep is not None and keep.holder is not None:
                    busy.add(keep.index)
            if index is None or not 0 <= index < len(self.entries):
                return None
            entry = self.entries[index]
            if entry.holder is not None and entry is not keep:
                return None  # a custom scheduler that ignores busy shards: look again later
            if entry.then is not None or entry.lease.lost is not None:
                if entry.holder is None:
                    self._remove(entry)  # lost while free, before the keeper dropped it
                return None
            entry.holder = thread
            busy.add(entry.index)
            return entry

    def checkin(self, entry: Entry) -> str | None:
        """The thread is done with the shard (its last batch acknowledged): None, or what the thread must do
        now, RELEASE or LOST, before it calls ``drop`` (the shard stays checked out to it until then, so the
        keeper does not release it too)."""
        with self.lock:
            then, ready = self._checkin(entry)
        if ready:
            self._wake_idle()
        return then

    def took(self, entry: Entry, found: int, next_perform_in: float | None, previous: Entry | None) -> str | None:
        """A take on ``entry`` found ``found`` ids, its next due at ``next_perform_in``; and ``previous``, whose
        ack rode on that take, is checked in (``checkin``'s answer for it). The report waits on the entry for
        the next locked step on it (``entry`` stays checked out meanwhile), so a thread that stays on its
        shard takes the lock once a batch."""
        entry.report = (found, next_perform_in)
        if previous is None or previous is entry:
            return None
        with self.lock:
            then, ready = self._checkin(previous)
        if ready:
            self._wake_idle()
        return then

    def _checkin(self, entry: Entry) -> tuple[str | None, bool]:
        self._report(entry)
        if entry.lease.lost is not None:
            entry.then = LOST
        then = entry.then
        if then is not None:
            return then, False
        entry.holder = None
        self.busy.discard(entry.index)
        return None, bool(self.idle) and self._ready(entry)

    def mark(self, entry: Entry, then: str) -> None:
        with self.lock:
            entry.then = then

    def drop(self, entry: Entry) -> None:
        """A shard given up or lost is out of the pool (its thread released it, or need not)."""
        with self.lock:
            if self._pooled(entry):
                self._remove(entry)

    def due(self, entry: Entry, perform_in: float) -> None:
        with self.lock:
            self._report(entry)
            if self.scheduler is not None and self._pooled(entry):
                self.scheduler.due(entry.index, perform_in)

    def nudge(self, queue_name: str, shard: int) -> None:
        """A push gave the shard work (the waker's thread): due now, and the threads look."""
        with self.lock:
            entry = next((e for e in self.entries if e.shard == (queue_name, shard)), None)
            if entry is None or self.scheduler is None:
                return
            self.scheduler.due(entry.index, self.due_clock())
        self._wake()

    def sleep(self, wake: threading.Event, seconds: float) -> None:
        """A thread with nothing to do waits ``seconds`` at most: a shard checked in with due work, a push to
        one, or the keeper's news ends the wait."""
        with self.lock:
            self.idle.add(wake)
        try:
            wake.wait(seconds)
        finally:
            with self.lock:
                self.idle.discard(wake)

    def waiting(self, wake: threading.Event) -> None:
        """A waiter of its own, for good: a shard checked in with due work sets ``wake`` (the async workers'
        pools ring their slots so, lowkiq.server.async_executor)."""
        with self.lock:
            self.idle.add(wake)

    def idle_for(self) -> float:
        with self.lock:
            if self.scheduler is None:
                return self.settings.poll_interval
            return self.scheduler.idle_for()

    def forget_heads(self) -> None:
        with self.lock:
            if self.scheduler is not None:
                self.scheduler.forget()

    def shards(self) -> list[ShardId] | None:
        """The pooled shards; None when the lock stays busy (asked by the keeper, which never waits long)."""
        if not self.lock.acquire(timeout=KEEPER_PATIENCE):
            return None
        try:
            self._arrive()
            return [e.shard for e in self.entries]
        finally:
            self.lock.release()

    # -- inside ---------------------------------------------------------------------------------------

    def _arrive(self) -> None:
        """Pool the shards the keeper added (under the lock)."""
        if not self.arrivals:
            return
        while self.arrivals:
            lease = self.arrivals.popleft()
            if lease.lost is None and self._entry(lease) is None:
                self.entries.append(Entry(lease))
        self._rebuild()

    def _only_choice(self, keep: Entry) -> bool:
        """Whether every pooled shard is checked out, ``keep`` among them, and nothing asks it back: the
        scheduler could choose no other, so the thread goes on with it without the lock (read without it, a
        checkin or an arrival just missed costs one more batch here, then the next checkout sees it; a
        hand-over just asked for is done at the checkin, as for any checked-out shard)."""
        return (not self.arrivals and keep.then is None and keep.lease.lost is None and keep.holder is not None
                and len(self.busy) == len(self.entries) and self._pooled(keep))

    def _report(self, entry: Entry) -> None:
        """Tell the scheduler what the entry's last take found, if not yet told (under the lock)."""
        report, entry.report = entry.report, None
        if report is not None and self.scheduler is not None and self._pooled(entry):
            self.scheduler.taken(entry.index, *report)

    def _ready(self, entry: Entry) -> bool:
        """Whether the shard may have due work now (worth waking the threads for)."""
        scheduler = self.scheduler
        if isinstance(scheduler, schedulers.Lag) and 0 <= entry.index < len(scheduler.heads):
            return scheduler.heads[entry.index] <= self.due_clock()
        return True

    def _pooled(self, entry: Entry) -> bool:
        return entry.index < len(self.entries) and self.entries[entry.index] is entry

    def _entry(self, lease: Lease) -> Entry | None:
        return next((e for e in self.entries if e.lease is lease), None)

    def _remove(self, entry: Entry) -> None:
        self.entries.remove(entry)
        self._rebuild()

    def _rebuild(self) -> None:
        """A new scheduler over the pool's shards, in a stable order (what it knew of heads is re-learnt
        by a probe or a take)."""
        self.entries.sort(key=lambda e: e.shard)
        for index, entry in enumerate(self.entries):
            entry.index = index
        self.busy = {e.index for e in self.entries if e.holder is not None}
        self.heads = HeadsProbe([e.lease for e in self.entries])
        if not self.entries:
            self.scheduler = None
            return
        context = schedulers.SchedulerContext([e.lease.shard for e in self.entries], self.settings.poll_interval,
                                              self._probe, self.due_clock)
        self.scheduler = schedulers.build(self.settings, context)

    def _probe(self) -> Sequence[float | None]:
        return self.heads.read(self.client)

    def _wake(self) -> None:
        for wake in self.wakes:
            wake.set()

    def _wake_idle(self) -> None:
        for wake in list(self.idle):
            wake.set()


def pooled(settings: Settings) -> bool:
    """Whether threads share the held shards (no splitter configured) rather than each serving its own."""
    return settings.build_splitter is None
