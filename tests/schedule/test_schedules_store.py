"""The tick script: each tick above a schedule's high-water mark is pushed once, as a normal push merges;
catch_up decides about ticks that came due while no server watched; a paused schedule pushes nothing."""

from __future__ import annotations

import pytest
from queue_support import OrdersWorker, queued

import lowkiq
from lowkiq.serializers import dump_json
from lowkiq.store import lua, schedules


@pytest.fixture
def runtime(configure):
    return configure(workers=[OrdersWorker])


def tick(r, schedule, ticks, missed_until=0.0):
    return schedules.outcome_of(lua.run(r, *schedules.tick_call(schedule, ticks, missed_until, dump_json)))


def payload_ticks(job_id: str) -> list[float]:
    return [payload["scheduled_at"] for payload, _score in queued(job_id).payloads]


def test_a_tick_is_pushed_once_whoever_sends_it(runtime, r):
    s = lowkiq.Schedule("sync", OrdersWorker, every=2, payload={"full": False})
    assert tick(r, s, []).outcome == "state" and tick(r, s, []).mark is None  # read only: nothing known yet
    first = tick(r, s, [100.0, 102.0])
    assert first.outcome == "enqueued" and first.ticks == (100.0, 102.0) and first.mark == 102.0
    job = queued("sync")
    assert job.perform_in == 100.0
    assert list(job.payloads) == [({"scheduled_at": 100.0, "full": False}, 100.0),
                                  ({"scheduled_at": 102.0, "full": False}, 102.0)]  # score = tick
    # A second server sending the same ticks (or older ones) pushes nothing.
    again = tick(r, s, [100.0, 102.0])
    assert again.outcome == "skipped" and again.mark == 102.0 and again.last == 102.0
    assert payload_ticks("sync") == [100.0, 102.0]
    # Only the ticks above the mark of an overlapping list.
    assert tick(r, s, [102.0, 104.0]).ticks == (104.0,)
    assert payload_ticks("sync") == [100.0, 102.0, 104.0]


@pytest.mark.parametrize(("catch_up", "expected"), [
    ("all", [12.0, 14.0, 16.0, 18.0, 20.0]),
    ("last", [16.0, 18.0, 20.0]),
    ("none", [18.0, 20.0]),
])
def test_catch_up_decides_about_the_ticks_due_before_the_caller_watched(runtime, r, catch_up, expected):
    s = lowkiq.Schedule("sync", OrdersWorker, every=2, catch_up=catch_up)
    tick(r, s, [10.0])
    r.delete(*OrdersWorker.keys().shard(queue_shard(s)).all())  # performed meanwhile
    # Ticks 12..16 came due while no server ran; the caller watches since 17.
    out = tick(r, s, [12.0, 14.0, 16.0, 18.0, 20.0], missed_until=17.0)
    assert out.mark == 20.0
    assert payload_ticks("sync") == expected


def test_a_new_schedule_starts_at_its_first_tick_sent(runtime, r):
    s = lowkiq.Schedule("sync", OrdersWorker, every=2, catch_up="none")
    assert tick(r, s, [12.0, 14.0], missed_until=17.0).ticks == (12.0, 14.0)  # no mark: nothing was missed


def test_a_paused_schedule_pushes_nothing_and_its_ticks_are_missed_ticks_once_resumed(runtime, r):
    s = lowkiq.Schedule("sync", OrdersWorker, every=2, catch_up="last")
    info = schedules.info_of(s)
    tick(r, s, [10.0])
    assert schedules.set_paused(r, info, "pause", who="alice", source="cli")
    assert not schedules.set_paused(r, info, "pause", who="alice", source="cli")
    assert tick(r, s, [12.0]).outcome == "paused"
    assert payload_ticks("sync") == [10.0]
    assert schedules.set_paused(r, info, "resume", who="alice", source="cli")
    # Resumed now (Redis time, far after these ticks): 12..16 were missed while paused, "last" keeps 16.
    assert tick(r, s, [12.0, 14.0, 16.0]).ticks == (16.0,)
    assert payload_ticks("sync") == [10.0, 16.0]
    [state] = schedules.states(r, [info])
    assert (state.last_at, state.paused, state.outcome) == (16.0, False, "queued")


def queue_shard(s: lowkiq.Schedule) -> int:
    return schedules.keys_of(s).shard
