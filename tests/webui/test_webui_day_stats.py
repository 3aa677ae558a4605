"""The worker page's Stats tab and api/v1/workers/<w>/stats?day=: a day's wait and run times, a histogram people
read at a glance, a bad day refused with 400."""

from __future__ import annotations

import re
import time

import lowkiq
from lowkiq.store import day_stats
from lowkiq.store.day_stats import BUCKETS, Tally

API = "/lowkiq/api/v1/workers/OrdersWorker/stats"
W = "/lowkiq/workers/OrdersWorker"


def seed(clock) -> str:
    clock.advance(time.time() - clock())  # a day within the 30 kept
    day = day_stats.day_of(clock())
    tally = Tally()
    now = clock()
    tally.record("OrdersWorker", [now - 2] * 3, now, 0.04)
    tally.record("OrdersWorker", [now - 0.5], now, 0.3)
    tally.flush(lowkiq.current().client)
    return day


def test_the_api_answers_a_days_counts_means_deviations_and_buckets(client, runtime, clock):
    day = seed(clock)
    data = client.get(f"{API}?day={day}").get_json()
    assert data["worker"] == "OrdersWorker" and data["day"] == day
    run = data["run"]
    assert run["count"] == 4 and abs(run["mean"] - (0.04 * 3 + 0.3) / 4) < 1e-6 and run["stddev"] > 0
    assert [b["le"] for b in run["histogram"]] == [*BUCKETS, None]
    assert sum(b["count"] for b in run["histogram"]) == 4
    assert data["wait"]["count"] == 4
    assert client.get(API).get_json()["day"] == day  # today (the console's clock) by default
    empty = client.get(f"{API}?day=2020-01-01").get_json()
    assert empty["run"]["count"] == 0 and empty["wait"]["mean"] == 0


def test_a_bad_day_is_a_400_naming_it(client, runtime):
    for bad in ("2025-13-01", "tomorrow", "2025-02-30"):
        answer = client.get(f"{API}?day={bad}")
        assert answer.status_code == 400 and "day must be" in answer.get_json()["error"]
    assert client.get(f"{W}/stats?day=nope").status_code == 400
    assert client.get("/lowkiq/api/v1/workers/Nobody/stats").status_code == 404


def test_the_stats_tab_draws_a_histogram_per_kind(client, runtime, clock):
    day = seed(clock)
    page = client.get(f"{W}/stats?day={day}").get_data(as_text=True)
    assert 'class="active">Stats</a>' in page
    run = page[page.index('data-kind="run"'):]
    assert re.search(r'data-stat="count">4<', run) and re.search(r'data-stat="mean">\d+ ms<', run)
    counts = [int(n) for n in re.findall(r'<g data-bucket="\d+" data-count="(\d+)"', run)]
    assert sum(counts) == 4 and len(counts) == len(BUCKETS) + 1
    assert "≤ 50 ms: 3 jobs (75.0%)" in run
    quiet = client.get(f"{W}/stats?day=2020-01-01").get_data(as_text=True)
    assert "No job was performed that day." in quiet
