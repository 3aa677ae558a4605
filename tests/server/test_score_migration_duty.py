"""The keeper's score_migration duty: it migrates the shards its server holds to integer microsecond scores,
only while every live server reads them, a bounded chunk per call, and looks at a migrated shard again later."""

from __future__ import annotations

import msgpack
import pytest
from queue_support import OrdersWorker, held_lease, queue

from lowkiq.server.duties import score_migration
from lowkiq.server.duties.score_migration import ScoreMigration
from lowkiq.store import lua, membership, score_units

US_AT = 1e12


@pytest.fixture(autouse=True)
def setup(configure):
    configure(workers=[OrdersWorker])


def member(member_id: str, *, reads_us: bool) -> membership.Member:
    record = membership.info(threads=1, version="x", state="running", started_ms=0, queues=[], hint=None,
                             stable_name="", shards={}, ttl_ms=1000)
    if not reads_us:
        record = record.replace(',"scores":"us"', "")  # a heartbeat of the previous version
    found = membership.parse(member_id, record, 1e15)
    assert found is not None
    return found


class Held:
    """The holdings of a server that holds every shard of the queue."""

    def __init__(self, leases):
        self.leases = leases

    def held(self):
        return dict(self.leases)


def seconds_left(r, shard) -> int:
    return r.zcount(shard.ids_by_perform_in_zset, "-inf", f"({US_AT:.0f}")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_it_waits_for_every_server_then_migrates_big_shards_in_chunks_and_rechecks_later(r, clock):
    q = queue()
    jobs = [{"id": f"id-{n}", "payload": n, "perform_in": clock.now + n} for n in range(3 * score_units.CHUNK)]
    OrdersWorker.perform_async(jobs)
    leases = {(q.keys.queue_name, s): held_lease(q, s) for s in range(OrdersWorker.shards_count)}
    members = [member("new", reads_us=True), member("old", reads_us=False)]
    ticks = Clock()
    wire = lua.Wire(q.client)
    duty = ScoreMigration(wire, Held(leases), lambda: members, clock=ticks)
    try:
        duty.run()
        # an old server lives: nothing switched, nothing converted
        assert all(score_units.layout_of(q.client, lease.keys) == (2, False) for lease in leases.values())
        members.pop()
        duty.run()  # each shard holds ~500 jobs: a few chunks, within the run's budget
        for lease in leases.values():
            assert score_units.layout_of(q.client, lease.keys) == (3, True)
            assert seconds_left(r, lease.keys) == 0
        # an older producer writes seconds later: read right at once, converted on the first run after the rest
        shard = leases[(q.keys.queue_name, 0)].keys
        r.hset(shard.payloads_hash, "late", msgpack.packb(["p", 1.0]))
        r.zadd(shard.ids_by_perform_in_zset, {"late": repr(clock.now + 5)})
        duty.run()
        assert seconds_left(r, shard) == 1  # resting
        ticks.now += score_migration.RECHECK
        duty.run()
        assert seconds_left(r, shard) == 0
        assert r.zscore(shard.ids_by_perform_in_zset, "late") == round((clock.now + 5) * 1_000_000)
    finally:
        wire.close()


def test_a_run_stops_after_its_budget_and_the_next_goes_on(r, clock, monkeypatch):
    monkeypatch.setattr(score_units, "CHUNK", 100)
    q = queue()
    OrdersWorker.perform_async([{"id": f"b-{n}", "payload": n, "perform_in": clock.now + n} for n in range(900)])
    leases = {(q.keys.queue_name, s): held_lease(q, s) for s in range(OrdersWorker.shards_count)}
    ticks = Clock()

    class Slow:
        """A wire whose every round trip takes the whole budget (as a busy Redis would)."""

        def call_many(self, calls, settle=False):
            ticks.now += score_migration.BUDGET
            return real.call_many(calls, settle=settle)

    real = lua.Wire(q.client)
    duty = ScoreMigration(Slow(), Held(leases), lambda: [member("new", reads_us=True)], clock=ticks)
    try:
        duty.run()
        left = sum(seconds_left(r, lease.keys) for lease in leases.values())
        assert left == 900 - 100 * len(leases)  # one chunk per shard, then the budget was spent
        for _ in range(5):
            ticks.now += duty.every
            duty.run()
        assert sum(seconds_left(r, lease.keys) for lease in leases.values()) == 0
    finally:
        real.close()
