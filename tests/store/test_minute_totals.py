"""Per-minute history of every queue in Redis: claimed once per minute however many processes sample,
trimmed to KEEP entries, read back as per-minute rates; a real server samples the queues it serves."""

from __future__ import annotations

import time

import pytest
from server_support import start_server
from timing_support import wait_until

import lowkiq
from lowkiq.store import minute_totals
from lowkiq.store.metrics import queue_metrics
from lowkiq.store.minute_totals import Minute, MinuteTotalsKeys, Point


class Orders(lowkiq.Worker):
    shards_count = 2

    def perform(self, payloads_by_id):
        pass


class Mails(lowkiq.Worker):
    shards_count = 1

    def perform(self, payloads_by_id):
        pass


@pytest.fixture
def runtime(configure):
    return configure(workers=[Orders, Mails])


def test_a_minute_is_claimed_once_and_written_once(runtime, r):
    minute, claimed = minute_totals.claim(r, ["Orders", "Mails"])
    assert claimed == ["Orders", "Mails"] and minute % 60000 == 0
    assert minute_totals.claim(r, ["Orders", "Mails"]) == (minute, [])  # another process, same minute
    Orders.perform_async([{"id": i} for i in range(3)])
    measured = queue_metrics(r, [Orders.keys(), Mails.keys()], now=runtime.clock())
    assert minute_totals.write(r, measured, minute) == 2
    assert minute_totals.write(r, measured, minute) == 0  # a late writer of the same minute: the first entry stays
    assert minute_totals.write(r, measured) == 0  # the console's "now": already claimed this minute
    points = minute_totals.read(r, ["Orders", "Mails", "Nobody"], 60, time.time())
    [orders] = points["Orders"]
    assert (orders.minute * 1000, orders.length, orders.processed, orders.lag) == (minute, 3, 0, 0.0)
    assert points["Nobody"] == []


def test_the_console_s_write_claims_and_writes_at_once(runtime, r):
    Mails.perform_async([{"id": "m"}])
    assert minute_totals.write(r, queue_metrics(r, [Mails.keys()])) == 1
    assert [p.length for p in minute_totals.read(r, ["Mails"], 5, time.time())["Mails"]] == [1]


def test_streams_keep_at_most_keep_entries(runtime, r, monkeypatch):
    monkeypatch.setattr(minute_totals, "KEEP", 5)
    measured = queue_metrics(r, [Orders.keys()])
    for minute in range(1, 13):
        minute_totals.write(r, measured, minute * 60000)
    assert r.xlen(MinuteTotalsKeys.stream("Orders")) == 5
    assert [p.minute for p in minute_totals.read(r, ["Orders"], 60, time.time())["Orders"]] == [m * 60.0 for m in range(8, 13)]


def test_a_long_window_is_sampled_and_its_rates_stay_exact(runtime, r):
    now = time.time()
    last = int(now // 60) * 60
    for k in range(300, -1, -1):  # five hours of minutes, 100 jobs a minute, lag = minutes ago
        minute = last - k * 60
        r.xadd(MinuteTotalsKeys.stream("Orders"), {"at": minute * 1000, "processed": (300 - k) * 100, "failed": 0,
                                               "lag": k, "length": 0, "dead": 0}, id=f"{minute * 1000}-0")
    every = minute_totals.read(r, ["Orders"], 60, now)["Orders"]
    assert len(every) == 61 and [p.lag for p in every[-2:]] == [1.0, 0.0]
    sampled = minute_totals.read(r, ["Orders"], 240, now, points=120)["Orders"]
    assert len(sampled) == 121 and sampled[-1].minute == last and sampled[0].minute == last - 240 * 60
    assert {round(m.processed) for m in minute_totals.per_minute(sampled)} == {100}  # 200 jobs per 2 minutes


def test_rates_per_minute_and_queues_combined():
    points = [Point(0, 0, 100, 1, 0.0, 5, 0), Point(60, 60, 160, 4, 2.0, 5, 0), Point(180, 180, 220, 4, 9.0, 5, 1),
              Point(240, 240, 10, 4, 0.0, 0, 0)]
    minutes = minute_totals.per_minute(points)
    assert minutes == [Minute(60, 60.0, 3.0, 2.0, 1.0), Minute(180, 30.0, 0.0, 9.0, 2.0), Minute(240, 0.0, 0.0, 0.0, 1.0)]
    combined = minute_totals.combine([minutes, [Minute(60, 1.0, 1.0, 7.0)]])
    assert combined[0] == Minute(60, 61.0, 4.0, 7.0) and len(combined) == 3


@pytest.mark.slow
def test_a_server_samples_the_queues_it_serves(runtime, r, redis_url, tmp_path):
    from server_support import APPS

    server = start_server(tmp_path, redis_url, app=APPS / "app.py", env={"APP_WORKERS": "Recorder,Other"})
    try:
        wait_until(lambda: r.xlen(MinuteTotalsKeys.stream("Recorder")) == 1 and r.xlen(MinuteTotalsKeys.stream("Other")) == 1,
                   timeout=15)
        assert not r.exists(MinuteTotalsKeys.stream("Orders"))  # not served by it: not its to sample
        assert "thread 0 started" in server.log()  # sampled by that very process
    finally:
        server.kill()
