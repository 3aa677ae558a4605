"""A tick is never enqueued before Redis's clock reaches it: the enqueue script reads Redis's TIME and writes
nothing for a tick still ahead of it, and a server's estimate of Redis's time never runs ahead of Redis, even
when the reply it learnt the time from was held up by a ``CLIENT PAUSE``."""

from __future__ import annotations

import threading
import time

import pytest
import redis
from queue_support import OrdersWorker, queued

import lowkiq
from lowkiq.redis_clock import RedisClock
from lowkiq.serializers import dump_json
from lowkiq.server.ticker import Ticker
from lowkiq.store import lua, schedules


@pytest.fixture
def runtime(configure):
    return configure(workers=[OrdersWorker], schedules=[lowkiq.Schedule("sync", OrdersWorker, every=2)])


def redis_seconds(r: redis.Redis) -> float:
    seconds, micros = r.time()
    return seconds + micros / 1_000_000


def tick(r, schedule, ticks, missed_until=0.0):
    return schedules.outcome_of(lua.run(r, *schedules.tick_call(schedule, ticks, missed_until, dump_json)))


def test_a_tick_ahead_of_redis_clock_is_not_enqueued(runtime, r):
    schedule = runtime.settings.schedules[0]
    now = redis_seconds(r)
    ahead = float(int(now) + 4)
    out = tick(r, schedule, [ahead])
    assert out.outcome == "early" and out.ticks == () and out.mark is None
    assert out.redis_now is not None and now <= out.redis_now < ahead
    assert queued("sync") is None
    # the ones due are enqueued, the early one of the same call is left for later (the mark stays below it)
    due = float(int(now) - 2)
    out = tick(r, schedule, [due, ahead])
    assert out.outcome == "enqueued" and out.ticks == (due,) and out.mark == due
    assert [p["scheduled_at"] for p, _ in queued("sync").payloads] == [due]


def test_the_estimate_of_redis_time_does_not_run_ahead_after_a_client_pause(redis_server, r):
    held = redis.Redis.from_url(redis_server.url)
    clock = RedisClock()
    pause = 1.5

    def pause_soon() -> None:
        r.execute_command("CLIENT", "PAUSE", int(pause * 1000), "ALL")

    pauser = threading.Timer(0.0, pause_soon)
    pauser.start()
    pauser.join()
    sent = time.monotonic()
    seconds, micros = held.time()  # answered when the pause ends: Redis reads its clock then
    received = time.monotonic()
    assert received - sent >= pause * 0.8  # the reply was held up
    clock.observe(seconds + micros / 1_000_000, sent, received)
    ahead = clock.now() - redis_seconds(held)
    # Half the hold-up (0.75 s) when the reading was taken as made half way; never ahead now.
    assert ahead <= 0.005, ahead
    held.close()


def test_a_server_whose_estimate_runs_ahead_sends_the_tick_again_once_redis_reaches_it(runtime, r):
    """A clock estimate 1.5 s ahead (a reading whose reply was held up, under the old estimate): Redis refuses
    the tick as early, and the ticker asks again when Redis's clock gets there, not in a busy loop."""
    wire = lua.Wire(runtime.client)
    ticker = Ticker(runtime, wire)
    while redis_seconds(r) % 2 > 0.3:  # just past a tick: the next one is 1.7 s or more away
        time.sleep(0.02)
    now = redis_seconds(r)
    ticker.watching(now)
    ticker.check(now)  # learns the schedule's state (nothing ticked yet)
    (watched,) = ticker.watched
    target = watched.next_due
    assert target - now >= 1.5
    ahead_estimate = target + 0.01  # what an estimate 1.5 s or more ahead of Redis reads
    sent = []
    original = wire.call_many

    def counting(calls, **kwargs):
        sent.append(len(calls))
        return original(calls, **kwargs)

    wire.call_many = counting  # type: ignore[method-assign]
    ticker.check(ahead_estimate)
    assert queued("sync") is None  # refused: Redis's clock has not reached the tick
    assert watched.hold_until > ahead_estimate  # not asked again before Redis can have reached it
    assert ticker.due_in(ahead_estimate) > 0.5
    ticker.check(ahead_estimate + 0.1)
    assert len(sent) == 1  # nothing sent while held
    # once Redis's clock reaches the tick, it is enqueued
    while redis_seconds(r) < target:
        time.sleep(0.05)
    ticker.check(max(watched.hold_until, redis_seconds(r)))
    assert [p["scheduled_at"] for p, _ in queued("sync").payloads] == [target]
