"""History charts from Redis: the dashboard and a worker's page draw per-minute processed, failed and lag
from the streams servers and open dashboards record; the API gives the same numbers."""

from __future__ import annotations

import html
import json
import re
import time

import pytest
from webui_support import OrdersWorker, host_app

from lowkiq.store.minute_totals import MinuteTotalsKeys

MINUTE = 60.0


@pytest.fixture
def now(clock):
    clock.now = time.time()  # the console's clock and Redis's agree, as in production
    return clock.now


def seed(r, queue: str, now: float, rows: list[tuple[int, int, float] | None]) -> None:
    """Totals (processed, failed, lag) sampled at the start of the last len(rows) minutes, 10 s into each; a
    None leaves its minute without a sample."""
    first = (now // MINUTE) * MINUTE - (len(rows) - 1) * MINUTE
    for i, row in enumerate(rows):
        if row is None:
            continue
        processed, failed, lag = row
        minute = first + i * MINUTE
        r.xadd(MinuteTotalsKeys.stream(queue), {"at": int((minute + 10) * 1000), "processed": processed, "failed": failed,
                                            "lag": lag, "length": 0, "dead": 0}, id=f"{int(minute * 1000)}-0")


ROWS = [(0, 0, 0.0), (60, 0, 0.0), (120, 6, 5.0), (120, 6, 30.0), (300, 6, 0.0)]


def lines(panel: str, name: str) -> list[list[tuple[float, float]]]:
    """The runs of a chart line: its path's moves start a new one."""
    d = re.findall(rf'class="line-{name}" d="([^"]*)"', panel)[0]
    runs: list[list[tuple[float, float]]] = []
    for op, x, y in re.findall(r"([ML])([\d.]+),([\d.]+)", d):
        if op == "M":
            runs.append([])
        runs[-1].append((float(x), float(y)))
    return runs


def panel_of(page: str) -> str:
    return page.split('id="history"')[1].split("</section>")[0]


def test_the_dashboard_draws_the_last_hour_from_redis(client, runtime, r, now):
    seed(r, OrdersWorker.queue_name, now, ROWS)
    panel = panel_of(client.get("/lowkiq/_history").get_data(as_text=True))
    assert "300 processed" in panel and "6 failed" in panel and "peak 30 s" in panel
    [processed] = lines(panel, "processed")
    assert len(processed) == 5  # four minutes of rates from five samples, the first drawn over its whole minute
    [lag] = lines(panel, "lag")
    assert lag[2][1] < lag[1][1]  # the highest lag is drawn highest
    assert 'href="/lowkiq/?hours=24"' in panel


def test_the_chart_has_axes_and_the_points_for_the_hover_read_out(client, runtime, r, now):
    seed(r, OrdersWorker.queue_name, now, ROWS)
    panel = panel_of(client.get("/lowkiq/_history").get_data(as_text=True))
    # the y axes: 0 to a round number above the peak (180 jobs a minute; 30 s of lag)
    counts, lag = re.findall(r'<div class="chart-y" aria-hidden="true">(.*?)</div>', panel)
    assert re.findall(r"<span>([^<]+)</span>", counts) == ["200", "100", "0"]
    assert re.findall(r"<span>([^<]+)</span>", lag) == ["50 s", "25 s", "0.0 s"]
    # the time axis: round minutes, as clock times
    ticks = re.findall(r'<text x="([\d.]+)%"[^>]*data-clock="[^"]+">(\d\d:\d\d)</text>', panel)
    assert len(ticks) >= 2 and all(0 <= float(x) <= 100 for x, _ in ticks)
    points = json.loads(html.unescape(re.search(r"data-points='([^']+)'", panel).group(1)))
    assert [(p[2], p[3], p[4]) for p in points] == [(60.0, 0.0, 0.0), (60.0, 6.0, 5.0), (0.0, 0.0, 30.0), (180.0, 0.0, 0.0)]
    assert all(p[1] - p[0] == pytest.approx(60, abs=1) and p[5] == 0 for p in points)  # minute by minute, no gap


def test_a_span_nobody_recorded_breaks_the_lines_instead_of_a_ramp(client, runtime, r, now):
    """Ten minutes without a sample between two runs of minutes: two runs of line, a shaded gap between."""
    rows = [(0, 0, 0.0), (60, 0, 0.0), (120, 0, 0.0)] + [None] * 10 + [(1300, 0, 0.0), (1360, 0, 0.0)]
    seed(r, OrdersWorker.queue_name, now, rows)
    panel = panel_of(client.get("/lowkiq/_history").get_data(as_text=True))
    runs = lines(panel, "processed")
    assert len(runs) == 2
    assert runs[0][-1][0] < runs[1][0][0]  # the second run starts after the first ends: nothing drawn between
    gaps = set(re.findall(r'<rect class="gap" x="([\d.]+)" y="0" width="([\d.]+)"', panel))  # on both plots
    assert len(gaps) == 1 and runs[0][-1][0] == pytest.approx(float(next(iter(gaps))[0]), abs=0.5)
    assert runs[1][0][0] == pytest.approx(float(next(iter(gaps))[0]) + float(next(iter(gaps))[1]), abs=20)
    # no line rises to the jobs processed over the gap (1,180 in 11 min): the next run's first minute is 60
    points = json.loads(html.unescape(re.search(r"data-points='([^']+)'", panel).group(1)))
    assert [p[5] for p in points] == [0, 0, 1, 0]


def test_a_long_window_with_minutes_of_history_spans_those_minutes(client, runtime, r, now):
    seed(r, OrdersWorker.queue_name, now, [(100 * i, 0, 0.0) for i in range(9)])
    panel = panel_of(client.get("/lowkiq/_history?hours=48").get_data(as_text=True))
    start, end = (float(v) for v in re.search(r'data-start="([\d.]+)" data-end="([\d.]+)"', panel).groups())
    assert 8 * 60 <= end - start <= 10 * 60  # not 48 h with a dot at its end
    assert "data-narrowed" in panel and "of the 48 h asked for" in panel
    [processed] = lines(panel, "processed")
    assert processed[-1][0] - processed[0][0] > 700  # the line spans most of the 1,000 units wide plot


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
    stream = MinuteTotalsKeys.stream(OrdersWorker.queue_name)
    client.get("/lowkiq/")
    client.get("/lowkiq/_live")
    assert r.xlen(stream) == 1  # another read in the same minute records nothing more
    [(_, fields)] = r.xrange(stream)
    assert fields[b"length"] == b"1"


def test_a_read_only_console_records_nothing(runtime, r, now):
    host_app(LOWKIQ_WEB_READONLY=True).test_client().get("/lowkiq/")
    assert not r.exists(MinuteTotalsKeys.stream(OrdersWorker.queue_name))


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
