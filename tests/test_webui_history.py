"""History charts from Redis: the dashboard and a worker's page draw per-minute processed, failed and lag
from the streams servers and open dashboards record; the API gives the same numbers."""

from __future__ import annotations

import re
import time

import pytest
from webui_support import OrdersWorker, host_app

from lowkiq.store.history import HistoryKeys

MINUTE = 60.0


@pytest.fixture
def now(clock):
    clock.now = time.time()  # the console's clock and Redis's agree, as in production
    return clock.now


def seed(r, queue: str, now: float, rows: list[tuple[int, int, float]]) -> None:
    """Totals (processed, failed, lag) sampled at the start of the last len(rows) minutes, 10 s into each."""
    first = (now // MINUTE) * MINUTE - (len(rows) - 1) * MINUTE
    for i, (processed, failed, lag) in enumerate(rows):
        minute = first + i * MINUTE
        r.xadd(HistoryKeys.stream(queue), {"at": int((minute + 10) * 1000), "processed": processed, "failed": failed,
                                            "lag": lag, "length": 0, "dead": 0}, id=f"{int(minute * 1000)}-0")


ROWS = [(0, 0, 0.0), (60, 0, 0.0), (120, 6, 5.0), (120, 6, 30.0), (300, 6, 0.0)]


def test_the_dashboard_draws_the_last_hour_from_redis(client, runtime, r, now):
    seed(r, OrdersWorker.queue_name, now, ROWS)
    page = client.get("/lowkiq/_history").get_data(as_text=True)
    panel = page.split('id="history"')[1].split("</section>")[0]
    assert "300 processed" in panel and "6 failed" in panel and "peak 30 s" in panel
    points = re.findall(r'class="line-processed" points="([^"]+)"', panel)[0].split()
    assert len(points) == 5  # four minutes of rates from five samples, the first drawn over its whole minute
    lag = re.findall(r'class="line-lag" points="([^"]+)"', panel)[0].split()
    assert float(lag[2].split(",")[1]) < float(lag[1].split(",")[1])  # the highest lag is drawn highest
    assert 'href="/lowkiq/?hours=24"' in panel


def test_the_api_gives_the_same_minutes(client, runtime, r, now):
    seed(r, OrdersWorker.queue_name, now, ROWS)
    data = client.get("/lowkiq/api/v1/history?hours=1").get_json()
    assert data["hours"] == 1
    assert [(m["processed"], m["failed"], m["lag"]) for m in data["by_worker"]["OrdersWorker"]] == [
        (60.0, 0.0, 0.0), (60.0, 6.0, 5.0), (0.0, 0.0, 30.0), (180.0, 0.0, 0.0)]
    assert [m["processed"] for m in data["total"]] == [60.0, 60.0, 0.0, 180.0]
    bad = client.get("/lowkiq/api/v1/history?hours=5")
    assert bad.status_code == 400 and "hours must be one of 1, 6, 24, 48" in bad.get_json()["error"]


def test_an_open_dashboard_records_this_minute_once(client, runtime, r, now):
    OrdersWorker.perform_async([{"id": "1"}])
    stream = HistoryKeys.stream(OrdersWorker.queue_name)
    client.get("/lowkiq/")
    client.get("/lowkiq/_live")
    assert r.xlen(stream) == 1  # another read in the same minute records nothing more
    [(_, fields)] = r.xrange(stream)
    assert fields[b"length"] == b"1"


def test_a_read_only_console_records_nothing(runtime, r, now):
    host_app(LOWKIQ_WEB_READONLY=True).test_client().get("/lowkiq/")
    assert not r.exists(HistoryKeys.stream(OrdersWorker.queue_name))


def test_a_worker_page_gets_its_own_history_with_the_counts(client, runtime, r, now):
    seed(r, OrdersWorker.queue_name, now, ROWS)
    counts = client.get("/lowkiq/workers/OrdersWorker/_counts?tab=enqueued").get_data(as_text=True)
    history = counts.split('id="worker-history" hx-swap-oob="true"')[1].split("</section>")[0]
    assert "Last hour, per minute" in history and "300 processed" in history


def test_the_dashboard_loads_its_history_after_the_page(client, runtime):
    page = client.get("/lowkiq/?hours=6").get_data(as_text=True)
    assert 'hx-get="/lowkiq/_history?hours=6" hx-trigger="load"' in page
    assert client.get("/lowkiq/?hours=7").status_code == 400


def test_no_history_says_how_it_fills_in(client, runtime):
    page = client.get("/lowkiq/_history").get_data(as_text=True)
    assert "No history for the last 1 h yet" in page


@pytest.mark.parametrize("hours", [6, 24, 48])
def test_a_longer_window_counts_the_same_jobs_as_the_hour(client, runtime, r, now, hours):
    """Nine minutes of history, 100 jobs a minute: every window counts the same 800 jobs, although
    beyond an hour it reads samples a step of several minutes apart."""
    seed(r, OrdersWorker.queue_name, now, [(100 * i, i, 0.0) for i in range(9)])
    hour = client.get("/lowkiq/_history?hours=1").get_data(as_text=True)
    longer = client.get(f"/lowkiq/_history?hours={hours}").get_data(as_text=True)
    assert "800 processed" in hour and "8 failed" in hour
    assert "800 processed" in longer and "8 failed" in longer, longer.split('id="history"')[1][:600]
    rows = client.get(f"/lowkiq/api/v1/history?hours={hours}").get_json()["by_worker"]["OrdersWorker"]
    assert round(sum(row["processed"] * row["minutes"] for row in rows)) == 800
