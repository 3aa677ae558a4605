"""The keeper: one thread per server process that keeps its membership and its shard leases.

Every ``heartbeat_interval`` it beats the membership heartbeat (one script),
and once the member list has been stable for ``settle`` seconds it computes
the assignment and acts on it: it acquires the shards this process should
hold and hands each to a thread, and asks threads to hand back the shards it
should no longer hold (a thread does so between batches, after acknowledging
its last one, so a handover re-runs nothing). It also renews every lease that
no take renewed lately, so idle shards and long performs keep their owner.

Its periodic duties (schedule ticks, replica counts, per-minute totals, id
history trims: ``lowkiq.server.duties``) run after that, each guarded on its
own: one that fails is reported and backs off, and the leases go on.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from .. import __version__, log_format
from ..store import leases, lua, membership
from ..store.leases import Lease
from ..transport.errors import REDIS_ERRORS
from ..worker import Shard
from . import group_limits
from .assignment import MemberView, ShardId, assign, split_among_threads
from .duties import Duties, Failure
from .duties.day_stats_flush import DayStatsFlush
from .duties.dependency_audit import DependencyAudit
from .duties.dependency_releases import DependencyReleases
from .duties.id_history_trim import IdHistoryTrim
from .duties.minute_totals import MinuteTotals
from .duties.replica_counts import ReplicaCounts
from .duties.schedule_ticks import ScheduleTicks
from .duties.score_migration import ScoreMigration
from .holdings import Holdings, shard_id
from .shard_pool import LOST as POOL_LOST
from .shard_pool import RELEASE as POOL_RELEASE
from .shard_pool import ShardPool
from .ticker import Ticker

if TYPE_CHECKING:
    from ..runtime import Runtime
    from ..worker import Worker
    from .async_executor import Pools
    from .processor import Processor
    from .suspect_batches import SuspectBatches

log = logging.getLogger("lowkiq.server")


class Keeper:
    def __init__(self, runtime: Runtime, processors: Sequence[Processor], *, member_id: str | None = None,
                 pool: ShardPool | Pools | None = None) -> None:
        self.runtime = runtime
        self.settings = s = runtime.settings
        self.processors = list(processors)
        self.stop = threading.Event()  # its own: it keeps renewing while the threads finish their batches
        self.member_id = member_id or membership.new_member_id()
        self.client = runtime.new_client(2)
        self.wire = lua.Wire(self.client)
        # The generation of the deployment the beats went to: a new one (a failover, a new slot map) is told to
        # the threads, which put back what their shards hold in processing there (Processor._followed).
        self.generation = 0
        self.workers: dict[str, type[Worker]] = {w.queue_name: w for w in s.workers}
        self.queues = tuple((w.queue_name, w.shards_count) for w in s.workers)
        self.hint = (s.number_of_nodes, s.node_number) if s.number_of_nodes > 1 or s.build_splitter == "by_node" else None
        self.started_ms = int(time.time() * 1000)
        self.holdings = Holdings(runtime, self.member_id)
        # With no splitter, the held shards are a pool every thread checks out from (lowkiq.server.shard_pool).
        self.pool = pool
        # The process's crash isolation: whether its threads wait for a suspect batch (told in each beat).
        self.isolation: SuspectBatches | None = next((p.isolation for p in self.processors), None)
        for processor in self.processors:  # its threads hand shards back to it, and share its holdings
            processor.keeper, processor.holdings = self, self.holdings
        self.thread_of: dict[ShardId, int] = {}
        # The thread each held lease was last given to: it serves it, or will once it reads its inbox.
        self.given: dict[ShardId, int] = {}
        self.desired: set[ShardId] = set()
        # Queues no server may take from (read with every beat): their shards are handed back and left alone.
        self.paused: frozenset[str] = frozenset()
        self.view: tuple[Any, ...] | None = None
        self.view_since = time.monotonic()
        # Whether the last change of the membership brought a new member: only arrivals wait to settle (many
        # servers starting together move shards once); a first view and departures are acted on at once.
        self.arrived = False
        # The next beat tells the other members at once (this process came, or begins to leave).
        self.announce = True
        self.members: list[membership.Member] = []
        self.draining: bool = False
        self.wake = threading.Event()
        self.ticked_at = time.monotonic()
        # When a heartbeat last got its reply (monotonic): the server's /healthz says Redis answers it.
        self.answered_at: float | None = None
        # Redis's time, learnt from every beat: the threads wait for due jobs by it, the ticker for ticks.
        self.redis_clock = runtime.redis_clock
        self.ticker = Ticker(runtime, self.wire) if s.schedules else None
        self.schedule_ticks = (None if self.ticker is None else
                               ScheduleTicks(s, self.client, self.ticker, self.redis_clock, lambda: self.draining))
        trim = IdHistoryTrim(self.wire, self.holdings, self.workers, self.redis_clock)
        trim_after_a_while = {trim.name: time.monotonic() + trim.every}  # nothing to trim at start-up
        self.duties = Duties([d for d in (self.schedule_ticks, ReplicaCounts(self.client, self.holdings),
                                          MinuteTotals(self.client, self.workers, runtime.clock), trim,
                                          DayStatsFlush(self.client),
                                          DependencyReleases(self.client, self.holdings),
                                          DependencyAudit(self.client, self.holdings, self.workers, self.redis_clock),
                                          ScoreMigration(self.wire, self.holdings, lambda: self.members))
                              if d is not None], report=self.duty_failed)
        self.duties.next_at.update(trim_after_a_while)
        self.thread = threading.Thread(target=self.run, name="lowkiq-keeper", daemon=True)

    # -- the loop ---------------------------------------------------------

    def start(self) -> None:
        self.thread.start()

    def run(self) -> None:
        errors_in_a_row = 0
        while not self.stop.is_set():
            started = time.monotonic()
            lag = started - self.ticked_at
            if lag > self.settings.lease_ttl / 3:
                log.warning("keeper: %.1f s since its last beat (lease_ttl %.1f s): something starves this "
                            "process's threads; its leases may expire", lag, self.settings.lease_ttl)
            self.ticked_at = started
            try:
                self.tick()
                if errors_in_a_row:
                    self.runtime.events.redis_answered()
                    for processor in self.processors:  # Redis answers again: threads backing off retry now
                        processor.wake.set()
                errors_in_a_row = 0
            except REDIS_ERRORS as exc:
                errors_in_a_row += 1
                self.runtime.events.outage(exc)
                self.wire.close(disconnect=True)
                if self.ticker is not None:
                    self.ticker.blind()
                if errors_in_a_row == 1 or errors_in_a_row % 10 == 0:
                    log.warning("keeper: Redis error (%s: %s); retrying", type(exc).__name__, exc)
            except Exception:
                log.exception("keeper: unexpected error; retrying")
            interval = self.settings.heartbeat_interval
            self.wait_for_next_beat(started + interval * random.uniform(0.9, 1.0))
            self.wake.clear()

    def wait_for_next_beat(self, beat_at: float) -> None:
        """Sleep until monotonic ``beat_at``, waking on the way for ticks that come due before it: a tick is
        enqueued when it is due by Redis's clock, not up to a beat later."""
        while not self.stop.is_set():
            left = beat_at - time.monotonic()
            if left <= 0:
                return
            due_in = None if self.ticker is None or self.draining else self.ticker.due_in(self.redis_clock.now())
            if due_in is None or due_in >= left:
                self.wake.wait(left)
                return
            if self.wake.wait(due_in):
                return
            self.check_schedules()

    def check_schedules(self) -> None:
        if self.schedule_ticks is None:
            return
        try:
            self.duties.run_now(self.schedule_ticks)
        except REDIS_ERRORS as exc:
            # The next beat finds out whether Redis is gone; the ticks are sent again then.
            log.warning("keeper: could not enqueue due ticks (%s: %s); retrying", type(exc).__name__, exc)
            self.wire.close(disconnect=True)

    def tick(self) -> None:
        """The leases first (beat, assignment, renewals), then the due duties: no duty can keep a process from
        holding and serving its shards."""
        self.beat()
        if self.draining:
            self.renew_due()
        else:
            if not self.arrived or time.monotonic() - self.view_since >= self.settings.settle:
                self.rebalance()
            elif self.paused & self.desired_queues():
                # A pause does not wait for the membership to settle: stop serving now.
                self.ask_back({shard for shard in self.desired if shard[0] not in self.paused})
            self.renew_due()
        self.duties.run_due()

    def duty_failed(self, failure: Failure) -> None:
        """A duty raised: subscribers hear of it; the next beat's record carries it to the console."""
        self.runtime.events.emit("duty_failed", duty=failure.duty, error=failure.error, failures=failure.failures)

    def desired_queues(self) -> set[str]:
        return {queue for queue, _ in self.desired}

    def beat(self) -> None:
        ttl_ms = leases.ttl_ms(self.settings.lease_ttl)
        sent = time.monotonic()
        reply = self.wire.call(*membership.beat_call(self.member_id, ttl_ms, self.record(ttl_ms), announce=self.announce))
        self.announce = False
        generation = self.client.generation
        if generation != self.generation:
            if self.generation:  # not the first look: its calls went elsewhere (a failover, a new slot map)
                if self.pool is not None:
                    self.pool.followed()
                for processor in self.processors:
                    processor.primary_moved()
            self.generation = generation
        now_ms, members = membership.members_of(reply)
        self.answered_at = time.monotonic()
        self.redis_clock.observe(now_ms / 1000, sent, self.answered_at)
        if self.ticker is not None:
            self.ticker.watching(now_ms / 1000)
        self.members = members
        paused = membership.paused_of(reply) & self.workers.keys()
        if paused != self.paused:
            for queue in sorted(paused - self.paused):
                log.info("keeper: queue %s is paused: its shards are handed back after their current batch", queue,
                         extra=log_format.fields(queue=queue, paused=True))
                self.runtime.events.emit("queue_paused", queue=queue)
            for queue in sorted(self.paused - paused):
                log.info("keeper: queue %s is resumed", queue, extra=log_format.fields(queue=queue, paused=False))
                self.runtime.events.emit("queue_resumed", queue=queue)
            self.paused = frozenset(paused)
        view = tuple(sorted((m.id, m.state, m.threads, m.queues, m.hint, m.stable_name) for m in members))
        if view != self.view:
            before = {member[0] for member in self.view or ()}
            self.arrived = self.view is not None and bool({member[0] for member in view} - before)
            self.view, self.view_since = view, time.monotonic()
            self.warn_about_twins(members)

    def warn_about_twins(self, members: Sequence[membership.Member]) -> None:
        """Two processes given the same node number or name are safe (leases arbitrate), but surely a mistake."""
        me = next((m for m in members if m.id == self.member_id), None)
        if me is None:
            return
        for other in members:
            if other.id == me.id:
                continue
            if me.hint is not None and other.hint == me.hint:
                log.warning("keeper: %s:%d was also started with --nodes %d --node-number %d; leases keep the two "
                            "from working the same shard, but one of them is probably misconfigured",
                            other.host, other.pid, *me.hint)
            if me.stable_name and other.stable_name == me.stable_name:
                log.warning("keeper: %s:%d has the same member name %r as this process", other.host, other.pid,
                            me.stable_name)
            mine, theirs = dict(me.queues), dict(other.queues)
            for queue in sorted(mine.keys() & theirs.keys()):
                if mine[queue] != theirs[queue]:
                    log.error("keeper: queue %r has %d shards here but %d in %s:%d; one id lands in different shards "
                              "and may run twice at once: give every process the same shards_count", queue,
                              mine[queue], theirs[queue], other.host, other.pid)

    def record(self, ttl_ms: int) -> str:
        s = self.settings
        held: dict[str, list[int]] = defaultdict(list)
        for queue, index in self.holdings.held():
            held[queue].append(index)
        return membership.info(
            threads=s.threads_per_node, version=__version__,
            state=membership.DRAINING if self.draining else membership.RUNNING,
            started_ms=self.started_ms, queues=self.queues, hint=self.hint, stable_name=s.member_name,
            shards=held, ttl_ms=ttl_ms, failing=[f.as_json() for f in self.duties.failing()],
            waiting=None if self.isolation is None else self.isolation.waiting_on(),
        )

    # -- acting on the assignment ----------------------------------------

    def rebalance(self) -> None:
        owner = assign(_view(m) for m in self.members)
        desired = {shard for shard, member in owner.items()
                   if member == self.member_id and shard[0] in self.workers and shard[0] not in self.paused}
        self.ask_back(desired)
        held = self.holdings.held()
        missing = [shard for shard in sorted(desired) if shard not in held]
        if missing:
            self.acquire(missing)

    def ask_back(self, desired: set[ShardId]) -> None:
        """Make ``desired`` the shards to serve; ask threads to hand back the held ones it leaves out."""
        if desired != self.desired:
            log.info("keeper: this process should hold %d shards (%d live processes%s)", len(desired),
                     len(self.members), f"; paused: {', '.join(sorted(self.paused))}" if self.paused else "")
            self.desired = desired
            if self.pool is None:
                self.thread_of = self.split(desired)
        held = self.holdings.held()
        if self.pool is not None:
            # A shard no thread performs is released now, whatever the threads are doing; one being performed
            # by its thread once its batch is acknowledged.
            free = [lease for shard, lease in held.items()
                    if shard not in desired and lease.lost is None and self.pool.take_back(lease, POOL_RELEASE)]
            if free:
                self.release(free)
                self.pool_changed()
            return
        for shard, lease in held.items():
            # Asked of the thread it was given to, the only one that may serve it: a thread only reads
            # its inbox between batches, so a shard given to a busy thread is not served by it yet.
            if shard not in desired and lease.lost is None:
                self.processors[self.thread_of_lease(lease)].hand_back(lease, release=True)
            elif shard in desired and self.thread_of.get(shard) != self.given.get(shard):
                self.processors[self.thread_of_lease(lease)].hand_back(lease, release=False)

    def split(self, shards: set[ShardId]) -> dict[ShardId, int]:
        threads = len(self.processors)
        choice = self.settings.build_splitter
        if callable(choice):
            return self.custom_split(choice, shards, threads)
        return split_among_threads(shards, self.thread_of, threads)

    def custom_split(self, choice: Callable[..., Any], shards: set[ShardId], threads: int) -> dict[ShardId, int]:
        objects = [Shard(self.workers[q], i) for q, i in sorted(shards, key=self.canonical)]
        try:
            parts = choice(self.settings)(objects)
            out = {(s.worker.queue_name, s.index): t for t, part in enumerate(parts) for s in part}
            if set(out) != shards or any(not 0 <= t < threads for t in out.values()):
                raise ValueError("it must give every shard of this process to exactly one of its threads")
            return out
        except Exception:
            log.exception("keeper: the custom splitter failed; dealing shards to the least loaded threads")
            return split_among_threads(shards, self.thread_of, threads)

    def canonical(self, shard: ShardId) -> tuple[int, int]:
        order = [q for q, _ in self.queues]
        return (order.index(shard[0]), shard[1])

    def thread_of_lease(self, lease: Lease) -> int:
        shard = self.shard_id(lease)
        return self.given.get(shard, self.thread_of.get(shard, 0))

    def give(self, shard: ShardId, lease: Lease) -> None:
        if self.pool is not None:
            self.pool.add(lease)
            return
        thread = self.thread_of.get(shard, 0)
        self.given[shard] = thread
        self.processors[thread].give(lease)

    @staticmethod
    def shard_id(lease: Lease) -> ShardId:
        return shard_id(lease)

    def acquire(self, shards: Sequence[ShardId]) -> None:
        outcomes = self.holdings.acquire(self.wire, [Shard(self.workers[queue], index) for queue, index in shards])
        for shard, outcome in zip(shards, outcomes):
            if isinstance(outcome, Lease):
                self.give(shard, outcome)
        if self.pool is not None and any(isinstance(outcome, Lease) for outcome in outcomes):
            self.pool_changed()

    def pool_changed(self) -> None:
        assert self.pool is not None
        shards = self.pool.shards()
        if shards is None:
            return
        names = [str(Shard(self.workers[queue], index)) for queue, index in shards]
        log.info("keeper: the pool of %d threads serves shards %s", len(self.processors), " ".join(names) or "(none)",
                 extra=log_format.fields(shards=names))

    def wants(self, lease: Lease) -> bool:
        """Whether this process still means to serve the shard: a thread moving it releases it otherwise."""
        return self.shard_id(lease) in self.desired and not self.draining

    def returned(self, lease: Lease, released: bool) -> None:
        """A thread handed a shard back: released in Redis, or to be given to another thread.

        Called on that thread: the keeper's connection is its own thread's alone, so a shard to release
        was released by the thread (see ``wants``); one that is not wanted any more by now is given all the
        same, and handed back at the next beat.
        """
        if released or lease.lost is not None:
            self.holdings.returned(lease)
            return
        self.give(self.shard_id(lease), lease)

    # -- renewals and releases -------------------------------------------

    def renew_due(self) -> None:
        due_before = time.monotonic() - self.settings.heartbeat_interval
        due = [lease for lease in self.holdings.held().values()
               if lease.lost is None and lease.renewed_at <= due_before]
        if not due:
            return
        # group permits first: a permit must not end before the lease it stands for (docs/fairness.md)
        group_limits.extend(self.wire, due)
        for lease in self.holdings.renew(self.wire, due):
            if self.pool is not None:
                self.pool.take_back(lease, POOL_LOST)
            else:
                self.processors[self.thread_of_lease(lease)].drop_lost(lease)

    def release(self, held: Sequence[Lease], acked: dict[int, Sequence[str]] | None = None) -> None:
        """Release leases (with the last batch of each acknowledged); refusals only mean it was lost already."""
        self.holdings.release(self.wire, held, acked or {})
        for lease in held:
            self.returned(lease, released=True)

    # -- stopping ---------------------------------------------------------

    def drain(self) -> None:
        """Tell the other processes this one is leaving, so they plan to take its shards over."""
        self.draining = True
        self.announce = True
        self.wake.set()

    def leave(self, keep: Sequence[Lease] = ()) -> None:
        """Release what is left (but ``keep``: leases of performs still running) and leave the membership."""
        self.stop.set()
        self.wake.set()
        self.thread.join(10)
        rest = [lease for lease in self.holdings.held().values() if lease.lost is None and lease not in keep]
        try:
            if rest:
                self.release(rest)
            self.wire.call(*membership.leave_call(self.member_id))
            DayStatsFlush(self.client).run()  # the last second's wait and run times
        except REDIS_ERRORS as exc:
            log.warning("keeper: could not leave cleanly (%s); the leases expire in %.0f s",
                        exc, self.settings.lease_ttl)
        finally:
            self.wire.close(disconnect=True)
            self.client.close()


def _view(member: membership.Member) -> MemberView:
    """What the assignment needs of a member, from its heartbeat record."""
    return MemberView(member.id, member.threads, member.queues, member.state == membership.DRAINING, member.hint,
                      member.stable_name)
