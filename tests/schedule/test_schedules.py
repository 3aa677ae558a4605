"""Recurring schedules with real server processes and an execution log: each tick once across servers,
restarts, kill -9 and a Redis Cluster; catch_up after downtime; due work by Redis's clock on a host whose
clock is off; and the checks at configure."""

from __future__ import annotations

import itertools
import time
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
import redis
from server_support import APPS, records, start_server
from timing_support import wait_until

import lowkiq
from lowkiq.schedule import Rule
from lowkiq.store import membership

APP = APPS / "schedule_app.py"


class Reports(lowkiq.Worker):
    def perform(self, payloads_by_id):
        pass


class Plain(lowkiq.Worker):
    """The app's worker of that name (same queue, same shards): the tests enqueue into it."""

    shards_count = 2

    def perform(self, payloads_by_id):
        pass


class Other(lowkiq.Worker):
    def perform(self, payloads_by_id):
        pass


# -- configure ------------------------------------------------------------------------------


@pytest.mark.parametrize(("make", "message"), [
    (lambda: lowkiq.Schedule("s", Other, every=5), "unknown worker Other"),
    (lambda: lowkiq.Schedule("s", Reports, cron="61 * * * *"), "bad cron expression"),
    (lambda: lowkiq.Schedule("s", Reports, cron="0 3 * * *", timezone="Mars/Olympus"), "unknown time zone"),
    (lambda: lowkiq.Schedule("s", Reports, every=5, payload=[1]), "payload must be a dict"),
    (lambda: lowkiq.Schedule("s", Reports, every=5, payload={"x": object()}), "cannot be serialized"),
    (lambda: lowkiq.Schedule("s", Reports, every=5, cron="* * * * *"), "exactly one of cron= or every="),
    (lambda: lowkiq.Schedule("s", Reports), "exactly one of cron= or every="),
    (lambda: lowkiq.Schedule("s", Reports, every=0), "every must be a number of seconds >= 1"),
    (lambda: lowkiq.Schedule("s", Reports, every=5, catch_up="some"), "catch_up must be one of last, all, none"),
    (lambda: lowkiq.Schedule("bad name/x", Reports, every=5), "schedule name"),
    (lambda: "not a schedule", "schedules must be lowkiq.Schedule objects"),
])
def test_a_bad_schedule_is_a_clear_error_at_configure(redis_url, make, message):
    with pytest.raises((TypeError, ValueError), match=message):
        lowkiq.configure(redis_url=redis_url, workers=[Reports], schedules=[make()])


def test_two_schedules_may_not_share_a_name_or_an_id(redis_url):
    with pytest.raises(ValueError, match="two schedules are named 'a'"):
        lowkiq.configure(redis_url=redis_url, workers=[Reports],
                         schedules=[lowkiq.Schedule("a", Reports, every=5), lowkiq.Schedule("a", Reports, every=9)])
    with pytest.raises(ValueError, match="enqueue the same id 'r'"):
        lowkiq.configure(redis_url=redis_url, workers=[Reports], schedules=[
            lowkiq.Schedule("a", Reports, every=5, id="r"), lowkiq.Schedule("b", Reports, every=9, id="r")])


def test_a_good_configuration_keeps_its_schedules(redis_url):
    s = lowkiq.Schedule("nightly", Reports, cron="0 3 * * *", timezone="Europe/Moscow", payload={"full": True})
    runtime = lowkiq.configure(redis_url=redis_url, workers=[Reports], schedules=[s])
    assert runtime.settings.schedules == (s,)
    assert s.job_id == "nightly" and s.payload_for(5.0) == {"scheduled_at": 5.0, "full": True}
    lowkiq.runtime._current = None


# -- ticks ------------------------------------------------------------------------------------


def test_every_ticks_at_multiples_of_its_period_since_the_epoch():
    rule = Rule(None, 30)
    assert rule.next_after(1_700_000_000.5) == 1_700_000_010.0  # 1_700_000_010 = 56_666_667 * 30
    assert rule.next_after(1_700_000_010.0) == 1_700_000_040.0
    assert rule.ticks_between(1_700_000_010.0, 1_700_000_100.0, 100) == [1_700_000_040.0, 1_700_000_070.0,
                                                                          1_700_000_100.0]
    assert rule.ticks_between(0, 1_700_000_100.0, 2) == [1_700_000_070.0, 1_700_000_100.0]  # the latest only


def test_a_cron_schedule_follows_its_zone_across_daylight_saving_changes():
    berlin = ZoneInfo("Europe/Berlin")
    rule = Rule("0 3 * * *", None, "Europe/Berlin")
    # 2024-03-31: clocks go from 02:00 to 03:00 (UTC+1 -> UTC+2). 03:00 local stays 03:00 local.
    before = datetime(2024, 3, 30, 12, 0, tzinfo=berlin).timestamp()
    first = rule.next_after(before)
    second = rule.next_after(first)
    assert datetime.fromtimestamp(first, berlin) == datetime(2024, 3, 31, 3, 0, tzinfo=berlin)
    assert datetime.fromtimestamp(second, berlin) == datetime(2024, 4, 1, 3, 0, tzinfo=berlin)
    assert second - first == 86400  # both at UTC+2
    assert first - rule.ticks_between(0, first - 1, 1)[0] == 86400 - 3600  # the night that lost an hour
    # 2024-10-27: 03:00 happens once more (UTC+2 -> UTC+1): the day is 25 hours long.
    autumn = rule.next_after(datetime(2024, 10, 26, 12, 0, tzinfo=berlin).timestamp())
    assert datetime.fromtimestamp(autumn, berlin).utcoffset().total_seconds() == 3600
    assert autumn - rule.ticks_between(0, autumn - 1, 1)[0] == 86400 + 3600
    # Every 30 minutes through the repeated hour: 02:00 and 02:30 tick twice (two instants each).
    half = Rule("*/30 * * * *", None, "Europe/Berlin")
    start = datetime(2024, 10, 27, 1, 50, tzinfo=berlin).timestamp()
    ticks = half.ticks_between(start, start + 3 * 3600, 100)
    assert [t - start for t in ticks] == [600 + 1800 * k for k in range(6)]  # evenly spaced in real time
    # The schedule's zone decides: the same rule in UTC ticks at 03:00 UTC.
    utc = Rule("0 3 * * *", None).next_after(before)
    assert datetime.fromtimestamp(utc, ZoneInfo("UTC")).hour == 3


# -- processes --------------------------------------------------------------------------------


def first_beat(r, pid: int, timeout: float = 20) -> float:
    """Redis time of the first heartbeat of the server process ``pid`` (polled often enough to see it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        beats = [m.heartbeat_ms for m in membership.live(r) if m.pid == pid]
        if beats:
            return beats[0] / 1000
        time.sleep(0.005)
    raise AssertionError(f"no heartbeat of process {pid} within {timeout} s")


def ticks_performed(tmp: Path) -> list[tuple[float, float, float]]:
    """(scheduled_at, start, end) of every payload the schedule's worker performed, by start."""
    out = []
    for rec in records(tmp, "perform"):
        if rec["worker"] == "Ticks":
            for payloads in rec["batch"].values():
                out.extend((p["scheduled_at"], rec["start"], rec["end"]) for p in payloads)
    return sorted(out, key=lambda x: (x[1], x[0]))


def assert_each_tick_once(tmp: Path, every: int) -> list[float]:
    performed = ticks_performed(tmp)
    ticks = [t for t, _, _ in performed]
    assert len(ticks) == len(set(ticks)), f"duplicates: {sorted(t for t in set(ticks) if ticks.count(t) > 1)}"
    ordered = sorted(ticks)
    gaps = [(a, b) for a, b in itertools.pairwise(ordered) if b - a != every]
    assert not gaps, f"gaps between ticks: {gaps}"
    runs = sorted({(start, end) for _, start, end in performed})
    overlaps = [(a, b) for a, b in itertools.pairwise(runs) if b[0] < a[1]]
    assert not overlaps, f"runs overlapped: {overlaps}"
    return ordered


def redis_now(r: redis.Redis) -> float:
    seconds, micros = r.time()
    return seconds + micros / 1_000_000


def exactly_once_across_servers(tmp: Path, url: str, r: redis.Redis) -> None:
    env = {"APP_EVERY": "2", "APP_PERFORM_SECONDS": "0.3"}
    servers = [start_server(tmp, url, app=APP, env=env, name=f"s{i}") for i in range(3)]
    try:
        started = redis_now(r)
        wait_until(lambda: len(ticks_performed(tmp)) >= 2, 15)
        # Rolling restart, one at a time, then a kill -9 of one of the new ones.
        for i in range(3):
            servers[i].stop()
            servers[i] = start_server(tmp, url, app=APP, env=env, name=f"s{i}-again")
            time.sleep(2.5)
        servers[1].kill()
        time.sleep(3)
        ended = redis_now(r)
        # The killed server's shards come back when its leases expire: then the ticks merged meanwhile run.
        wait_until(lambda: max(t for t, _, _ in ticks_performed(tmp)) >= ended - 2, 15)
    finally:
        for server in servers:
            server.stop() if server.process.poll() is None else None
    ticks = assert_each_tick_once(tmp, 2)
    # Every tick of the run came, from the first on: none was left out at the start or the end.
    assert ticks[0] <= started + 4 and ticks[-1] >= ended - 2, (started, ticks, ended)
    # the restarts and the kill spanned at least 10.5 s: every 2 s tick of it came, none twice
    assert len(ticks) >= 5 and ended - started >= 10.5


@pytest.mark.slow
@pytest.mark.guarantee
def test_each_tick_runs_once_across_three_servers_a_rolling_restart_and_a_kill(tmp_path, redis_url, r):
    exactly_once_across_servers(tmp_path, redis_url, r)


@pytest.mark.slow
@pytest.mark.guarantee
def test_each_tick_runs_once_on_a_redis_cluster(tmp_path, cluster):
    exactly_once_across_servers(tmp_path, cluster.url, cluster.client(cluster.owner(0)))


@pytest.mark.slow
@pytest.mark.parametrize("catch_up", ["last", "all", "none"])
def test_catch_up_after_seven_seconds_without_a_server(tmp_path, redis_url, r, catch_up):
    env = {"APP_EVERY": "1", "APP_CATCH_UP": catch_up, "APP_PERFORM_SECONDS": "0.01"}
    server = start_server(tmp_path, redis_url, app=APP, env=env, name="first")
    wait_until(lambda: len(ticks_performed(tmp_path)) >= 2, 15)
    server.stop()
    stopped = redis_now(r)
    before = {t for t, _, _ in ticks_performed(tmp_path)}
    time.sleep(7)
    again = start_server(tmp_path, redis_url, app=APP, env=env, name="again")
    try:
        watching = first_beat(r, again.pid)
        # then two ticks on time, after whatever it caught up
        wait_until(lambda: len([t for t, _, _ in ticks_performed(tmp_path) if t > watching]) >= 2, 15)
    finally:
        again.stop()
    performed = [t for t, _, _ in ticks_performed(tmp_path)]
    assert len(performed) == len(set(performed))
    assert watching >= stopped + 7
    last_before = max(before)
    later = sorted(t for t in performed if t > last_before)
    # The new server watches from its first heartbeat: what came due before it was missed (at least
    # the 6 or 7 ticks of one second while no server ran).
    missed = [t for t in later if t <= watching]
    if catch_up == "all":
        assert len(missed) >= 6 and all(b - a == 1 for a, b in itertools.pairwise(later)), later
    elif catch_up == "last":
        assert len(missed) == 1 and missed[0] > watching - 1, (later, watching)
    else:
        assert missed == [], (later, watching)
    # Then every tick, on time.
    on_time = [t for t in later if t > watching]
    assert len(on_time) >= 2 and all(b - a == 1 for a, b in itertools.pairwise(on_time)), later


@pytest.mark.slow
@pytest.mark.parametrize("skew", [-6, 6])
def test_a_server_whose_clock_is_off_starts_due_jobs_and_ticks_on_redis_time(tmp_path, redis_url, r, skew):
    env = {"APP_EVERY": "2", "APP_CLOCK_SKEW": str(skew), "PYTHONPATH": str(APPS / "skewed_clock")}
    server = start_server(tmp_path, redis_url, app=APP, env=env)
    try:
        wait_until(lambda: len(ticks_performed(tmp_path)) >= 1, 15)
        # A job with an explicit perform_in, 3 s ahead of Redis's clock, into the app's other worker.
        lowkiq.configure(redis_url=redis_url, workers=[Plain])
        due = redis_now(r) + 3
        Plain.perform_async([{"id": "later", "payload": "x", "perform_in": due}])
        wait_until(lambda: [x for x in records(tmp_path, "perform") if x["worker"] == "Plain"], 15)
        time.sleep(4.5)
    finally:
        server.stop()
    [plain] = [x for x in records(tmp_path, "perform") if x["worker"] == "Plain"]
    assert due - 0.05 <= plain["start"] <= due + 1, plain["start"] - due
    late = [start - tick for tick, start, _ in ticks_performed(tmp_path)][1:]  # the first waits for the leases
    assert late and all(-0.05 <= x <= 1 for x in late), late
    lowkiq.runtime._current = None
