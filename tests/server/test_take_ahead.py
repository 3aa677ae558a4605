"""Take-ahead (docs/take-ahead.md): a batch_size 1 worker's thread takes several due ids in one call and
performs them one at a time, in order, each on its own; what it does not start goes back untouched."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from queue_support import acquire, held_lease

import lowkiq
from lowkiq.console import Console
from lowkiq.console.busy import busy_jobs, over_time_limit
from lowkiq.errors import ConfigurationError
from lowkiq.server import take_ahead
from lowkiq.server.async_handler import AsyncShardHandler
from lowkiq.server.processor import Processor
from lowkiq.server.shard_handler import ShardHandler
from lowkiq.store import ownership, registry
from lowkiq.store.id_history import TAKEN_AHEAD, IdHistories
from lowkiq.store.leases import renew_call
from lowkiq.store.lua import Wire

CALLS: list[list[str]] = []
FAILING: set[str] = set()


class Quick(lowkiq.Worker):
    shards_count = 1
    max_retry_count = 3

    def perform(self, payloads_by_id):
        CALLS.append(list(payloads_by_id))
        if set(payloads_by_id) & FAILING:
            raise ValueError(f"{list(payloads_by_id)} failed")


class Slow(Quick):
    def perform(self, payloads_by_id):
        time.sleep(take_ahead.WINDOW * 0.7)
        super().perform(payloads_by_id)


class Off(Quick):
    take_ahead = 1


class Batched(Quick):
    batch_size = 10


class Grouped(Quick):
    group_concurrency = 2


class Isolated(Quick):
    isolation = "process"


class AsyncQuick(lowkiq.Worker):
    shards_count = 1
    max_retry_count = 3

    async def perform(self, payloads_by_id):
        await asyncio.sleep(0)
        CALLS.append(list(payloads_by_id))
        if set(payloads_by_id) & FAILING:
            raise ValueError(f"{list(payloads_by_id)} failed")


@pytest.fixture(autouse=True)
def setup(configure):
    CALLS.clear()
    FAILING.clear()
    take_ahead._paces.clear()  # each test's workers start without a pace
    return configure(workers=[Quick, Slow, Off, Batched, Grouped, Isolated, AsyncQuick])


def handler(worker, runtime=None) -> ShardHandler:
    runtime = runtime or lowkiq.current()
    q = runtime.queue(worker)
    return ShardHandler(held_lease(q, 0), worker(), q, runtime.settings, Wire(runtime.client),
                        clock=runtime.clock)


def warmed(h: ShardHandler) -> ShardHandler:
    """The first id performed and acknowledged, then a pace of a quick worker, whatever this machine's load:
    the next take takes the cap of 16 ahead."""
    h.ack(h.perform(h.take(None)).ids)
    h.pace.seconds = 1e-5
    return h


def enqueue(worker, clock, n: int) -> list[str]:
    ids = [f"id{i:02d}" for i in range(n)]
    worker.perform_async([{"id": job_id, "payload": job_id, "perform_in": clock.now - 100 + i}
                          for i, job_id in enumerate(ids)])
    return ids


def test_once_its_first_perform_tells_the_pace_a_quick_worker_takes_ahead_and_performs_them_one_by_one(clock):
    ids = enqueue(Quick, clock, 60)
    h = handler(Quick)
    assert h.wanted() == 1  # the pace is not known yet
    first = h.take(None)
    assert [j.id for j in first.jobs] == ids[:1]
    ack = h.perform(first)
    # A blank perform fits the window many times over (fewer on a machine too busy to run it in 3 ms)
    k = -h.wanted()
    assert 2 <= k <= Quick.take_ahead == 16
    taken = h.take(ack)
    assert [j.id for j in taken.jobs] == ids[1:1 + k]
    ack = h.perform(taken)
    assert ack is not None and ack.ids == ids[1:1 + k]
    assert list(CALLS) == [[job_id] for job_id in ids[:1 + k]]  # one id per perform, in perform_in order
    k2 = -h.wanted()
    rest = h.take(ack)
    assert [j.id for j in rest.jobs] == ids[1 + k:1 + k + k2]
    assert len(lowkiq.current().queries(Quick).busy()) == k2  # the run's ids wait in processing together
    h.pace.seconds = 1e-6
    assert h.wanted() == -16  # capped by Worker.take_ahead


def test_a_perform_that_fills_the_window_takes_one_id_at_a_time(clock):
    enqueue(Slow, clock, 5)
    h = handler(Slow)
    for _ in range(2):
        ack = h.perform(h.take(None))
        assert ack is not None
        h.ack(ack.ids)
    assert h.wanted() == 1
    assert [len(c) for c in CALLS] == [1, 1]


@pytest.mark.parametrize("worker", [Off, Batched, Grouped, Isolated])
def test_take_ahead_is_off_for_a_cap_of_1_batches_group_limits_and_process_isolation(worker, clock):
    h = handler(worker)
    h.pace.record(0.0001)  # quick performs would take ahead
    assert h.wanted() == worker.batch_size


def test_a_bad_cap_is_refused_naming_it():
    for bad in (0, 65, 2.0, True, "8"):
        with pytest.raises(ValueError, match=r"Capped.take_ahead must be an int 1\.\.64"):
            type("Capped", (lowkiq.Worker,), {"take_ahead": bad, "perform": lambda self, batch: None})
    with pytest.raises((ValueError, ConfigurationError)):
        type("Capped", (lowkiq.Worker,), {"take_ahead": -1, "perform": lambda self, batch: None})


def test_an_id_that_fails_in_a_run_fails_alone_and_the_others_are_acknowledged(clock):
    ids = enqueue(Quick, clock, 17)
    h = warmed(handler(Quick))
    FAILING.add(ids[5])
    taken = h.take(None)
    ack = h.perform(taken)
    assert ack is not None and ack.ids == [i for i in ids[1:17] if i != ids[5]]
    h.ack(ack.ids)
    queries = lowkiq.current().queries(Quick)
    job = queries.job(ids[5])
    assert job is not None and (job.retry_count, job.error) == (0, f"ValueError: ['{ids[5]}'] failed")
    assert queries.busy() == []
    assert [i for chunk in queries.enqueued_ids() for i in chunk] == [ids[5]]
    history = IdHistories(lowkiq.current().client, Quick.keys()).of(ids[5])
    failed = [e for e in history.events if e.kind == "failed"]
    assert len(failed) == 1 and failed[0].batch_size == 1 and "failed together" not in failed[0].summary
    taken_event = next(e for e in history.events if e.kind == "taken")
    assert taken_event.reason == TAKEN_AHEAD and taken_event.batch_size == 16


def test_ids_not_started_when_the_thread_says_stop_go_back_untouched_in_one_step(clock, r):
    ids = enqueue(Quick, clock, 17)
    h = warmed(handler(Quick))
    allowed = iter([True, True])
    h.between = lambda handler: next(allowed, False)  # the process stops after the third id
    ack = h.perform(h.take(None))
    assert ack is not None and ack.ids == ids[1:4]
    assert CALLS[-3:] == [[i] for i in ids[1:4]]
    queries = lowkiq.current().queries(Quick)
    assert len(queries.busy()) == 3  # the performed ones, acknowledged with the next take
    h.ack(ack.ids)
    for job_id, at in zip(ids[4:], range(4, 17)):
        job = queries.job(job_id)
        assert (job.retry_count, job.perform_in, [p for p, _ in job.payloads]) == (-1, clock.now - 100 + at, [job_id])
    back = [e for e in IdHistories(r, Quick.keys()).of(ids[10]).events if e.kind == "restored"]
    assert len(back) == 1 and "taken ahead, not started" in back[0].summary
    assert queries.busy() == []


def test_a_crash_record_in_the_shard_makes_the_take_take_one_id(clock, r):
    ids = enqueue(Quick, clock, 10)
    h = handler(Quick)
    h.pace.record(0.0001)
    r.hset(h.lease.keys.crashes_hash, ids[7], 1)  # a server died performing it once
    taken = h.take(None)
    assert [j.id for j in taken.jobs] == ids[:1]
    r.delete(h.lease.keys.crashes_hash)
    assert len(h.take(h.perform(taken)).jobs) == 9


def test_between_ids_the_thread_renews_a_lease_whose_budget_is_low_and_stops_when_its_process_does(configure):
    runtime = configure(workers=[Quick], lease_ttl=3, heartbeat_interval=1.0, min_perform_budget=1.0)
    stop = threading.Event()
    thread = Processor(0, runtime, stop, lambda exc, in_perform: None)
    try:
        q = runtime.queue(Quick)
        held = acquire(q, 0, "tests", ttl=3)
        h = thread._handler(held)
        time.sleep(held.remaining() - 0.9)  # under the budget now
        assert held.remaining() < 1.0
        assert h.between(h) is True
        assert held.remaining() > 2.0  # renewed in Redis: the thread's call refreshed the local deadline
        stop.set()
        assert h.between(h) is False
    finally:
        thread.wire.close(disconnect=True)
        thread.client.close()


SEEN: dict[str, Any] = {}


class Watched(Quick):
    """At id05 of its run, the busy list is read after a renewal, as the keeper renews during a long perform."""

    def perform(self, payloads_by_id):
        super().perform(payloads_by_id)
        if "id05" in payloads_by_id:
            runtime = lowkiq.current()
            lease = SEEN["lease"]
            time.sleep(0.05)
            Wire(runtime.client).call(*renew_call(lease))
            c = Console(runtime.client, lambda: ([registry.info_of(Watched)], []))
            view = c.worker("Watched")
            _, SEEN["busy"] = busy_jobs(c, view, c.queries(view).busy())
            SEEN["over"] = over_time_limit(c, c.metrics())


def test_a_renewal_during_a_run_names_the_id_performing_and_the_busy_list_the_others_as_in_its_run(configure, clock):
    configure(workers=[Watched])
    ids = enqueue(Watched, clock, 17)
    h = handler(Watched)
    SEEN["lease"] = h.lease
    warmed(h)
    ack = h.perform(h.take(None))
    assert ack is not None and h.lease.performing is None  # told only while the run performs
    by_id = {b.job.id: b for b in SEEN["busy"]}
    assert sorted(by_id) == ids[1:17]
    assert by_id["id05"].lease.performing == "id05" and not by_id["id05"].in_run
    assert 0.04 <= by_id["id05"].running_for < 5  # from its own start, not the run's take
    assert all(b.in_run and b.running_for is None and not b.over_time_limit for i, b in by_id.items() if i != "id05")
    h.take(ack)  # the next take starts another run: no id is named until a renewal tells one
    [row] = [s for s in ownership.shard_leases(lowkiq.current().client, Watched.keys(), [])[1]]
    assert row.performing is None


class Limited(Quick):
    time_limit = 0.3

    def perform(self, payloads_by_id):
        super().perform(payloads_by_id)
        if "id04" in payloads_by_id:
            while True:  # runs on past its time limit until TimeLimitExceeded stops it
                sum(range(100))


def test_an_id_past_its_time_limit_in_a_run_fails_alone_with_time_limit_exceeded_and_the_run_goes_on(configure,
                                                                                                   clock):
    configure(workers=[Limited])
    ids = enqueue(Limited, clock, 17)
    h = warmed(handler(Limited))
    started = time.monotonic()
    ack = h.perform(h.take(None))
    assert time.monotonic() - started < 3
    assert ack is not None and ack.ids == [i for i in ids[1:17] if i != "id04"]
    h.ack(ack.ids)
    job = lowkiq.current().queries(Limited).job("id04")
    assert job is not None and job.retry_count == 0
    assert job.error.startswith("TimeLimitExceeded: the perform ran past its time_limit of 0.3 s")
    assert h.pace.seconds > 1e-3  # the slow perform weighs on the pace: fewer ids ahead next time


def async_handler(worker) -> AsyncShardHandler:
    """An async worker's handler as a slot of the async executor has it, its blocking steps run in place."""
    runtime = lowkiq.current()
    q = runtime.queue(worker)
    h = AsyncShardHandler(held_lease(q, 0), worker(), q, runtime.settings, Wire(runtime.client), clock=runtime.clock)

    async def offload(fn, *args):
        return fn(*args)

    h.offload = offload
    return h


def test_an_async_worker_takes_ahead_awaits_each_id_alone_in_order_and_puts_back_what_it_did_not_start(clock, r):
    ids = enqueue(AsyncQuick, clock, 17)
    FAILING.add(ids[2])
    h = async_handler(AsyncQuick)
    first = asyncio.run(h.aperform(h.take(None)))
    assert first is not None and first.ids == ids[:1]
    h.pace.seconds = 1e-5  # a quick perform's pace, whatever this machine's load
    asked: list[str] = []

    async def between(handler):
        asked.append(handler.lease.performing[0])  # the id performed last
        return len(asked) < 3  # the slot says stop before the fourth id of the run

    h.abetween = between
    assert h.wanted() == -16
    taken = h.take(first)
    assert [j.id for j in taken.jobs] == ids[1:17]
    ack = asyncio.run(h.aperform(taken))
    assert asked == ids[1:4]
    assert list(CALLS) == [[i] for i in ids[:4]]  # one id per perform, in order
    assert ack is not None and ack.ids == [ids[1], ids[3]]  # the failing one failed alone
    queries = lowkiq.current().queries(AsyncQuick)
    assert queries.job(ids[2]).retry_count == 0
    h.ack(ack.ids)
    for job_id, at in zip(ids[4:], range(4, 17)):
        job = queries.job(job_id)
        assert (job.retry_count, job.perform_in) == (-1, clock.now - 100 + at)
    back = [e for e in IdHistories(r, AsyncQuick.keys()).of(ids[10]).events if e.kind == "restored"]
    assert len(back) == 1 and "taken ahead, not started" in back[0].summary
    assert queries.busy() == []
