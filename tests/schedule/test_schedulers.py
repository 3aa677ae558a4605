"""Choosing the next shard: lag and seq on a hand clock, and the round trips a batch costs on a real Redis."""

from __future__ import annotations

import threading

import pytest
import redis
from queue_support import held_lease

import lowkiq
from lowkiq.config import build_settings
from lowkiq.server import schedulers
from lowkiq.server.processor import Processor
from lowkiq.server.schedulers import Lag, SchedulerContext, Seq
from lowkiq.server.shard_pool import ShardPool
from lowkiq.server.splitters import Shard


class Blank(lowkiq.Worker):
    shards_count = 5

    def perform(self, payloads_by_id):
        pass


class Probe:
    def __init__(self, heads):
        self.heads = heads
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return list(self.heads)


def context(heads, clock, poll_interval=1.0):
    shards = [Shard(Blank, i) for i in range(len(heads))]
    probe = Probe(heads)
    return SchedulerContext(shards, poll_interval, probe, clock), probe


def test_lag_picks_the_most_overdue_shard(clock):
    now = clock()
    ctx, probe = context([now - 5, now - 50, None, now + 10], clock)
    lag = Lag(ctx)
    assert lag.next_shard() == 1
    lag.taken(1, 1, now - 1)  # its next job is barely overdue now
    assert lag.next_shard() == 0
    assert probe.calls == 1


def test_lag_passes_over_the_shards_other_slots_perform(clock):
    now = clock()
    ctx, _ = context([now - 5, now - 50, None, now - 40, now + 10], clock)
    lag = Lag(ctx)
    lag.busy = {1}
    assert lag.next_shard() == 3  # the most overdue of the free ones
    lag.busy = {1, 3, 0}
    assert lag.next_shard() is None  # what is left is empty or not due yet
    assert lag.idle_for() == pytest.approx(1.0)  # the soonest free head is 10 s away: a poll interval
    lag.busy = {0, 1, 2, 3, 4}
    assert lag.next_shard() is None and lag.idle_for() == pytest.approx(1.0)
    lag.busy = {1}
    lag.heads = [float("inf")] * 5  # nothing known to be held anywhere: the first free shard
    lag.probed_at = now
    assert lag._oldest() == 0


def test_lag_learns_from_takes_without_probing(clock):
    now = clock()
    ctx, probe = context([now - 30, now - 20], clock)
    lag = Lag(ctx)
    picks = []
    for step in range(6):
        index = lag.next_shard()
        picks.append(index)
        lag.taken(index, 1, now - 25 + step * 3)  # each take reveals the shard's next, later head
    assert probe.calls == 1
    assert picks == [0, 0, 0, 1, 0, 1]  # heads: -30 -25 -22 | -20 | -19 | -16


def test_lag_probes_again_every_poll_interval_while_busy(clock):
    now = clock()
    ctx, probe = context([now - 1], clock, poll_interval=1.0)
    lag = Lag(ctx)
    for _ in range(10):
        assert lag.next_shard() == 0
        lag.taken(0, 1, now - 1)
        clock.advance(0.25)
    assert probe.calls == 3  # at 0, 1.0 and 2.0 seconds


def test_lag_probes_once_before_idling_then_waits_for_the_next_due_job(clock):
    now = clock()
    ctx, probe = context([now - 1], clock, poll_interval=1.0)
    lag = Lag(ctx)
    assert lag.next_shard() == 0
    lag.taken(0, 1, None)  # the shard is empty now
    clock.advance(0.1)
    probe.heads = [now + 0.4]  # a job due soon appeared meanwhile
    assert lag.next_shard() is None
    assert probe.calls == 2
    assert lag.idle_for() == pytest.approx(0.3)
    clock.advance(0.35)
    assert lag.next_shard() == 0
    assert probe.calls == 2


def test_lag_idles_a_poll_interval_on_empty_shards(clock):
    ctx, probe = context([None, None], clock, poll_interval=2.0)
    lag = Lag(ctx)
    assert lag.next_shard() is None
    assert lag.idle_for() == 2.0


def test_lag_failed_job_makes_its_shard_worth_a_take(clock):
    ctx, probe = context([None], clock)
    lag = Lag(ctx)
    assert lag.next_shard() is None
    lag.due(0, clock())
    assert lag.next_shard() == 0


def test_seq_goes_round_robin_and_idles_only_after_a_full_empty_round(clock):
    ctx, probe = context([None, None, None], clock, poll_interval=0.5)
    seq = Seq(ctx)
    picks = []
    for found in [1, 0, 0, 0]:
        index = seq.next_shard()
        picks.append(index)
        seq.taken(index, found, None)
    assert picks == [0, 1, 2, 0]
    assert seq.next_shard() is None
    assert seq.idle_for() == 0.5
    assert seq.next_shard() == 1
    assert probe.calls == 0


def test_build_by_name_or_callable(clock):
    ctx, _ = context([None], clock)
    s = build_settings({"workers": [Blank]}, environ={})
    assert isinstance(schedulers.build(s, ctx), Lag)
    assert isinstance(schedulers.build(build_settings({"build_scheduler": "seq"}, environ={}), ctx), Seq)
    custom = schedulers.build(build_settings({"build_scheduler": Seq}, environ={}), ctx)
    assert isinstance(custom, Seq)
    with pytest.raises(ValueError, match="unknown scheduler"):
        schedulers.build(build_settings({"build_scheduler": "fifo"}, environ={}), ctx)


class CountingConnection(redis.Connection):
    """Counts packets sent: one per round trip, a pipeline included (redis-py's sends, and the
    transport's on these connections: see counting_links)."""

    sent = 0

    def send_packed_command(self, command, check_health=True):
        type(self).sent += 1
        return super().send_packed_command(command, check_health)


def counting_links(monkeypatch) -> None:
    from lowkiq.transport.resp import Link

    original = Link.send

    def send(link, data):
        if isinstance(link.connection, CountingConnection):
            CountingConnection.sent += 1
        return original(link, data)

    monkeypatch.setattr(Link, "send", send)


def drain_with_one_thread(runtime, shards, expected, pooled: bool = False, take_ahead: int = 1) -> tuple[int, int]:
    """Run one server thread until ``expected`` ids are done; (round trips, ids performed). ``pooled``: the thread
    checks the shards out of a pool (the default server), its probes through the pool's connection;
    ``take_ahead``: the worker's (1: a batch of one id per take)."""
    done = []

    class Counting(Blank):
        queue_name = "Blank"

        def perform(self, payloads_by_id):
            done.extend(payloads_by_id)
            if len(done) >= expected:
                stop.set()

    Counting.take_ahead = take_ahead

    stop = threading.Event()
    pool = redis.BlockingConnectionPool.from_url(runtime.redis_url, max_connections=2,
                                                 connection_class=CountingConnection)
    runtime.new_client = lambda size: redis.Redis(connection_pool=pool)
    shard_pool = ShardPool(runtime.settings, runtime.new_client(2), runtime.due_clock()) if pooled else None
    processor = Processor(0, runtime, stop, lambda e, p: None, pool=shard_pool)
    queue = runtime.queue(Counting)
    for s in shards:
        lease = held_lease(queue, s.index)
        if shard_pool is not None:
            shard_pool.add(lease)
        else:
            processor.give(lease)
    CountingConnection.sent = 0
    processor.run()
    return CountingConnection.sent, len(done)


@pytest.mark.slow
@pytest.mark.parametrize("take_ahead", [1, 16])
@pytest.mark.parametrize("pooled", [True, False], ids=["pool", "pinned"])
@pytest.mark.parametrize("scheduler, extra", [("lag", 0.03), ("seq", 0.25)])
def test_round_trips_per_batch(configure, monkeypatch, scheduler, extra, pooled, take_ahead):
    runtime = configure(workers=[Blank], build_scheduler=scheduler, poll_interval=0.05)
    counting_links(monkeypatch)
    runtime.clock = __import__("time").time
    Blank.perform_async([{"id": i} for i in range(1000)])
    shards = [Shard(Blank, i) for i in range(Blank.shards_count)]
    trips, performed = drain_with_one_thread(runtime, shards, 1000, pooled, take_ahead)
    assert performed == 1000
    # One ack+take per take. lag adds a probe per poll interval (and one script load); seq also pays for
    # takes on shards that ran dry before the others. Taken ahead, a take is 16 ids, but each shard's first
    # (the worker's pace is not known yet: one id), its last (partly) and one that finds it dry.
    takes = 1000 if take_ahead == 1 else 1000 / 16 + 3 * len(shards)
    assert 1000 / take_ahead <= trips <= takes * (1 + extra), trips
