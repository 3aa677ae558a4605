"""Wait and run times per worker and UTC day (lowkiq.store.day_stats): the tally's sums and buckets, one
round trip per flush, 30 days kept, a bad day refused."""

from __future__ import annotations

import time

import pytest
from queue_support import RoundTrips

import lowkiq
from lowkiq.store import day_stats
from lowkiq.store.day_stats import BUCKETS, Tally

T = (time.time() // 86_400 - 1) * 86_400  # yesterday, 00:00 UTC
DAY = day_stats.day_of(T)
NEXT_DAY = day_stats.day_of(T + 86_400)


def test_counts_means_deviations_and_buckets_of_a_day(configure, r):
    configure(workers=[])
    client = lowkiq.current().client
    tally = Tally()
    tally.record("W", [T + 10, T + 10], T + 12, 0.05)  # both waited 1.95 s, ran 50 ms
    tally.record("W", [T + 20], T + 20.5, 0.25)  # waited 0.25 s, ran 250 ms
    assert tally.flush(client) == 1
    assert tally.flush(client) == 0  # nothing new
    stats = day_stats.read(client, "W", DAY)
    assert stats.run.count == 3 and stats.wait.count == 3
    assert stats.run.mean == pytest.approx((0.05 * 2 + 0.25) / 3)
    assert stats.run.stddev == pytest.approx(0.0942809, rel=1e-4)
    assert stats.wait.mean == pytest.approx((1.95 * 2 + 0.25) / 3)
    assert sum(stats.run.buckets) == 3 and stats.run.buckets[BUCKETS.index(0.05)] == 2
    assert stats.run.buckets[BUCKETS.index(0.25)] == 1
    assert stats.wait.buckets[BUCKETS.index(2.5)] == 2
    assert 29 * 86_400 < r.ttl(f"lowkiq:v1:{{stats:W}}:{DAY}") <= 30 * 86_400
    assert day_stats.read(client, "W", NEXT_DAY).run.count == 0


def test_a_recent_day_is_kept_thirty_days_after_it_ends(configure, r):
    configure(workers=[])
    tally = Tally()
    now = time.time()
    tally.record("W", [now - 1], now, 0.01)
    tally.flush(lowkiq.current().client)
    key = f"lowkiq:v1:{{stats:W}}:{day_stats.day_of(now)}"
    assert 30 * 86_400 < r.ttl(key) <= 31 * 86_400


def test_a_flush_is_one_round_trip_and_a_failed_one_keeps_its_counts(configure, monkeypatch):
    configure(workers=[])
    client = lowkiq.current().client
    tally = Tally()
    tally.record("A", [T], T + 1, 0.1)
    tally.flush(client)  # connections made
    for worker in ("A", "B", "C"):
        tally.record(worker, [T] * 5, T + 1, 0.1)
    trips = RoundTrips(monkeypatch)
    tally.flush(client)
    assert trips.count == 1

    def broken(commands, **_):
        raise OSError("down")

    tally.record("A", [T], T + 1, 0.1)
    monkeypatch.setattr(client, "pipeline_commands", broken)
    with pytest.raises(OSError):
        tally.flush(client)
    monkeypatch.undo()
    tally.flush(client)
    assert day_stats.read(client, "A", DAY).run.count == 7


@pytest.mark.parametrize("bad", ["", "2025-13-01", "2025-2-1", "yesterday", "2025-02-30", "2025-11-29T00"])
def test_a_bad_day_is_refused_naming_it(bad, configure):
    configure(workers=[])
    with pytest.raises(ValueError, match="day must be"):
        day_stats.read(lowkiq.current().client, "W", bad)


def test_bucket_labels_are_for_people():
    labels = day_stats.bucket_labels()
    assert labels[0] == "≤ 5 ms" and labels[7] == "≤ 1 s" and labels[-2] == "≤ 1 h" and labels[-1] == "> 1 h"
    assert len(labels) == len(BUCKETS) + 1
